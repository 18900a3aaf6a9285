// common.glsl — the one binding layout every hx pipeline uses: set 0, bindings 0..4 storage
// buffers, 5..6 uniform texel buffers of 16-byte texels (unused ones are bound to a dummy
// buffer / view), plus up to 128 bytes of push constants. Activations are f32 arrays
// addressed in elements (the host binds each tensor at an offset aligned down to
// minStorageBufferOffsetAlignment and passes the remainder).
// Large grids fold the workgroup index over x and z (x ≤ 65535).
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64u;

uint hx_group_index() { return gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.z; }
