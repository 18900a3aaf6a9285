// dot.glsl — hx_dot4(a, b, acc): acc + Σ of the four products of the signed 8-bit lanes of
// a and b. With DOT_EXT it is the SPIR-V 4×8-bit packed dot product (SPV_KHR_integer_dot_
// product, reached through GL_EXT_spirv_intrinsics because the Debian 12 glslang has no
// GL_EXT_integer_dot_product); the device must have enabled shaderIntegerDotProduct.
// Otherwise the lanes are sign-extended and multiplied in 32-bit integers.
#ifdef DOT_EXT
#extension GL_EXT_spirv_intrinsics : require
/* OpSDot (4450) with PackedVectorFormat4x8Bit (0); capabilities DotProduct (6019),
 * DotProductInput4x8BitPacked (6018) */
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int hx_sdot_packed(uint a, uint b, spirv_literal int fmt);
int hx_dot4(uint a, uint b, int acc) { return acc + hx_sdot_packed(a, b, 0); }
#else
int hx_dot4(uint a, uint b, int acc)
{
    ivec4 x = ivec4(int(a << 24u), int(a << 16u), int(a << 8u), int(a)) >> 24;
    ivec4 y = ivec4(int(b << 24u), int(b << 16u), int(b << 8u), int(b)) >> 24;
    return acc + x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
}
#endif
