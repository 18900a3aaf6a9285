#!/usr/bin/env bash
# test-hip-build.sh — the HIP backend builds, loads and computes, on a machine without a GPU:
#  1. every GPU toolchain CMake found is built into its module for the configured targets
#     (cmake --build, so a stale module is really recompiled), and every target's device code
#     holds all 147 kernels: nvcc SASS per sm_XX plus PTX of the newest, hipcc a code object
#     per gfx target, whose quantized GEMVs all use v_dot4 (llvm-objdump); the prefill GEMM's
#     sm_80 PTX holds the mma.sync m16n8k16 f16, m16n8k32 s8, m16n8k16 bf16 and m16n8k8 tf32
#     instructions (and the cvt.rn.bf16x2 / cvt.rna.tf32 roundings of the float paths; nvcc -ptx of
#     the kernel headers; no SASS disassembler here); the module exports only its entry point;
#  2. `engine devices` exits 0 and says why HIP is unavailable: no module, no runtime library,
#     no device, a driver error (the emulator module and a copy of the AMD module whose
#     runtime dependency is renamed stand in for the machines that have those problems);
#  3. hx-hip-emu.so (the same kernels built for the host CPU) passes test-backend-ops
#     against ref (and its matmuls with the emulated device as sm_80, sm_80 with HX_HIP_GEMM=
#     mma16, gfx1100, and sm_80 with HX_HIP_GEMM=mma-fsimt: each prefill GEMM path of hip-mma.h), `engine run` on the test models gives the tokens of cpu or ref, `engine
#     diff` passes, and an
#     out-of-memory or a failing kernel launch is reported cleanly (or falls back to cpu).
# Skips (exit 77; a failure in CI, tests/lib.sh) only when no GPU toolchain is installed; a build
# with the backend turned off (HX_BACKEND_HIP=OFF, as CI's ASan build) is not applicable: exit 0.
set -u
B=${HX_BUILD:?} E=${HX_ENGINE:-${HX_BUILD:?}/engine} D=${HX_DATA:-}
. "$(dirname "$0")/lib.sh"

hipcc=$(command -v hipcc || ls /opt/rocm/bin/hipcc 2>/dev/null || true)
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
cache_hip=$(sed -n 's/^HX_BACKEND_HIP:[A-Z]*=//p' "$B/CMakeCache.txt" 2>/dev/null)
man=$B/hx-hip-build.txt
if [ "$cache_hip" = "OFF" ]; then
    na "HIP backend disabled in this build (HX_BACKEND_HIP=OFF)"
    finish
fi
if [ -z "$hipcc" ] && [ -z "$nvcc" ] && [ ! -f "$man" ]; then
    skip "no GPU toolchain installed (neither hipcc nor nvcc): the HIP backend is not built"
    finish
fi
if [ ! -f "$man" ]; then
    bad "a GPU toolchain is installed (${hipcc:-} ${nvcc:-}) but $B has no HIP backend (no $man)"
    finish
fi
get() { sed -n "s/^$1=//p" "$man"; }
[ -n "$hipcc" ] && [ -z "$(get amd_module)" ] && bad "hipcc is installed ($hipcc) but no AMD module is configured: $(get amd_note)"
[ -n "$nvcc" ] && [ -z "$(get nv_module)" ] && bad "nvcc is installed ($nvcc) but no NVIDIA module is configured"

# ---- 1. build and inspect the modules ----------------------------------------------------------
targets=""
[ -n "$(get amd_module)$(get nv_module)" ] && targets="hx_hip_modules"
[ -n "$(get emu_module)" ] && targets="$targets hx_hip_emu"
log=$(mktemp)
if cmake --build "$B" --target $targets > "$log" 2>&1; then
    ok "cmake --build --target $targets"
else
    bad "building the HIP modules failed:"; tail -30 "$log"
    rm -f "$log"; finish
fi
rm -f "$log"

inspect() { # module, comma-separated targets
    python3 - "$1" "$2" <<'EOF'
import re, struct, sys
path, want = sys.argv[1], sys.argv[2].split(',')
def sections(d):
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3A)
    secs = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
    so = secs[shstrndx][4]
    name = lambda o: d[so + o:d.index(b'\0', so + o)].decode()
    return [(name(s[0]),) + s for s in secs], shoff + shnum * shentsize
def funcs(blob):
    secs, _ = sections(blob)
    out = set()
    for s in secs:
        if s[2] != 2: continue  # SHT_SYMTAB
        so = secs[s[7]][5]
        for i in range(s[6] // 24):
            st_name, st_info = struct.unpack_from('<IB', blob, s[5] + i * 24)
            if st_info & 0xf == 2: out.add(blob[so + st_name:blob.index(b'\0', so + st_name)].decode())
    return out
# the 147 kernel instantiations hip-module.hip launches (types as in enum hx_dtype)
need = ['hx_hip_gemv_qILi%dELi%dE' % (t, c) for t in range(3, 12) for c in (1, 2, 4, 8)]
need += ['hx_hip_gemv_fILi%dELi%dELb%dE' % (t, c, v) for t in range(3) for c in (1, 2, 4, 8) for v in (0, 1)]
need += ['hx_hip_%sILi%dE' % (k, t) for k in ('gemm', 'embed') for t in range(12)]
need += ['hx_hip_gemm_tcILi%dELi%dE' % (t, p) for t in range(12) if t not in (0, 2) for p in (1, 3)]
need += ['hx_hip_gemm_tcILi%dELi2E' % t for t in (3, 4, 7, 8, 9, 10, 11)]
need += ['hx_hip_gemm_tcfILi0ELi9E', 'hx_hip_gemm_tcfILi2ELi8E']  # F32 3xTF32, BF16 split bf16
# AMD WMMA beyond RDNA3's f16: RDNA4 f16 (17) for the f16 types, RDNA3 / RDNA4 int8 (16, 18)
need += ['hx_hip_gemm_wmmaILi%dELi17E' % t for t in range(12) if t not in (0, 2)]
need += ['hx_hip_gemm_wmmaILi%dELi%dE' % (t, p) for t in (3, 4, 7, 8, 9, 10, 11) for p in (16, 18)]
need += ['hx_hip_gemm_caps']
need += ['hx_hip_' + k for k in ('quantize_q8', 'gemv_combine', 'rms_norm', 'copy_rows', 'rope', 'kv_store', 'attn', 'attn_flash', 'eltwise')]
d = open(path, 'rb').read()
secs, _ = sections(d)
fat = [s for s in secs if s[0] in ('.nv_fatbin', '.hip_fatbin')]
if not fat: sys.exit('%s: no device code section (.nv_fatbin / .hip_fatbin)' % path)
sec = d[fat[0][5]:fat[0][5] + fat[0][6]]
found, errors = {}, []
for m in re.finditer(rb'\x7fELF\x02\x01', sec):
    blob = sec[m.start():]
    mach, = struct.unpack_from('<H', blob, 18)
    flags, = struct.unpack_from('<I', blob, 0x30)
    blob = blob[:sections(blob)[1]]
    if mach == 190: arch = 'sm_%d' % ((flags >> 8) & 0xff)           # EM_CUDA
    elif mach == 224:                                                 # EM_AMDGPU
        a = re.search(rb'amdgcn-amd-amdhsa--(gfx[0-9a-f]+)', blob)
        arch = a.group(1).decode() if a else '?'
    else: continue
    names = [f for f in funcs(blob) if 'hx_hip_' in f]
    if names: found.setdefault(arch, set()).update(names)
if fat[0][0] == '.nv_fatbin':  # fatbin container entries: kind 1 = PTX, arch in word 7
    pos = 0
    while pos + 16 <= len(sec):
        magic, _, hs, size = struct.unpack_from('<IHHQ', sec, pos)
        if magic != 0xBA55ED50: break
        e = pos + hs
        while e < pos + hs + size:
            kind, _, ehs, psize = struct.unpack_from('<HHIQ', sec, e)
            if kind == 1: found.setdefault('compute_%d' % struct.unpack_from('<I', sec, e + 28)[0], set()).add('ptx')
            e += ehs + psize
        pos = (pos + hs + size + 7) & ~7
for t in want:
    if t not in found: errors.append('%s: no device code' % t); continue
    if t.startswith('compute_'): continue
    missing = [n for n in need if not any(n in f for f in found[t])]
    if missing: errors.append('%s: %d of %d kernels missing (%s ...)' % (t, len(missing), len(need), missing[0]))
extra = sorted(set(found) - set(want))
print('device code for %s, %d kernels each%s' % (','.join(sorted(found)), len(need),
      ('; also ' + ','.join(extra)) if extra else ''))
if errors: sys.exit('; '.join(errors))
EOF
}
# The AMD code's quantized GEMVs use the packed int8 dot product (v_dot4*: hx_hip_dp4a on
# gfx1030/1036), not its scalar fallback: every hx_hip_gemv_q in each code object, disassembled
dot4() { # module
    python3 - "$1" "$2" <<'EOF'
import re, struct, subprocess, sys, tempfile, os
path, objdump = sys.argv[1], sys.argv[2]
d = open(path, 'rb').read()
shoff, = struct.unpack_from('<Q', d, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3A)
secs = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
so = secs[shstrndx][4]
fat = [s for s in secs if d[so + s[0]:d.index(b'\0', so + s[0])] == b'.hip_fatbin']
if not fat: sys.exit('no .hip_fatbin')
sec = d[fat[0][4]:fat[0][4] + fat[0][5]]
starts = [m.start() for m in re.finditer(rb'\x7fELF\x02\x01', sec)] + [len(sec)]
out, bad = [], []
for a, b in zip(starts, starts[1:]):
    with tempfile.NamedTemporaryFile(suffix='.co', delete=False) as f:
        f.write(sec[a:b])
    asm = subprocess.run([objdump, '-d', f.name], capture_output=True, text=True).stdout
    os.unlink(f.name)
    arch = re.search(r'amdgcn-amd-amdhsa--(gfx[0-9a-f]+)', sec[a:b].decode('latin1'))
    fn, cnt = None, {}
    for line in asm.splitlines():
        m = re.match(r'^[0-9a-f]+ <(.*)>:$', line)
        if m: fn = m.group(1) if 'hx_hip_gemv_q' in m.group(1) else None; cnt.setdefault(fn, 0) if fn else None
        elif fn and 'v_dot4' in line: cnt[fn] += 1
    arch = arch.group(1) if arch else '?'
    without = [f for f, c in cnt.items() if c == 0]
    if not cnt or without: bad.append('%s: %d of %d GEMVs without v_dot4 (%s)' % (arch, len(without), len(cnt), (without or ['none found'])[0]))
    else: out.append('%s: %d GEMVs, %d v_dot4' % (arch, len(cnt), sum(cnt.values())))
if bad: sys.exit('; '.join(bad))
print('; '.join(out))
EOF
}
for kind in amd nv; do
    so=$(get ${kind}_module) tg=$(get ${kind}_targets)
    [ -n "$so" ] || continue
    if [ ! -f "$so" ]; then bad "$so was not built"; continue; fi
    if out=$(inspect "$so" "$tg" 2>&1); then ok "$(basename "$so"): $out"; else bad "$(basename "$so"): $out"; fi
    if [ $kind = amd ]; then
        od=$(command -v llvm-objdump-15 || command -v llvm-objdump || ls /opt/rocm/llvm/bin/llvm-objdump 2>/dev/null || true)
        if [ -z "$od" ]; then skip "no llvm-objdump: the AMD GEMVs' v_dot4 not checked"
        elif out=$(dot4 "$so" "$od" 2>&1); then ok "$(basename "$so") GEMVs use v_dot4: $out"
        else bad "$(basename "$so") GEMVs: $out"; fi
    fi
    if [ $kind = nv ]; then
        # the matrix-unit GEMM (hip-mma.h) as sm_80 PTX: the two mma.sync forms must be there
        t=$(mktemp -d)
        printf '%s\n' '#include "hip-ops.h"' \
            'void *hx_k[] = {(void *)hx_hip_gemm_tc<HX_DTYPE_Q8_0, HX_HIP_TC_MMA_S8>,' \
            '                (void *)hx_hip_gemm_tc<HX_DTYPE_Q4_K, HX_HIP_TC_MMA_F16>,' \
            '                (void *)hx_hip_gemm_tcf<HX_DTYPE_BF16, HX_HIP_TC_MMA_BF16>,' \
            '                (void *)hx_hip_gemm_tcf<HX_DTYPE_F32, HX_HIP_TC_MMA_TF32>};' > "$t/k.cu"
        src=$(dirname "$0")/..
        if "$nvcc" -std=c++17 -ptx -arch=compute_80 -I"$src/include" -I"$src/backends/hip" \
            "$t/k.cu" -o "$t/k.ptx" > "$t/log" 2>&1; then
            f16=$(grep -c 'mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32' "$t/k.ptx")
            s8=$(grep -c 'mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32' "$t/k.ptx")
            [ "$f16" -gt 0 ] && [ "$s8" -gt 0 ] && ok "sm_80 PTX of the prefill GEMM: $f16 mma m16n8k16 f16, $s8 mma m16n8k32 s8" \
                || bad "sm_80 PTX of the prefill GEMM: $f16 mma f16, $s8 mma s8 (want both > 0)"
            # the float-weight paths: bf16 and tf32 mma, and the roundings that split their operands
            bf=$(grep -c 'mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32' "$t/k.ptx")
            tf=$(grep -c 'mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32' "$t/k.ptx")
            cb=$(grep -c 'cvt.rn.bf16x2.f32' "$t/k.ptx") ct=$(grep -c 'cvt.rna.tf32.f32' "$t/k.ptx")
            [ "$bf" -gt 0 ] && [ "$tf" -gt 0 ] && [ "$cb" -gt 0 ] && [ "$ct" -gt 0 ] \
                && ok "sm_80 PTX of the float-weight GEMM: $bf mma m16n8k16 bf16, $tf mma m16n8k8 tf32, $cb cvt.rn.bf16x2, $ct cvt.rna.tf32" \
                || bad "sm_80 PTX of the float-weight GEMM: $bf mma bf16, $tf mma tf32, $cb cvt.rn.bf16x2, $ct cvt.rna.tf32 (want all > 0)"
        else
            bad "nvcc -ptx of the prefill GEMM failed: $(tail -3 "$t/log")"
        fi
        rm -rf "$t"
    fi
    exports=$(nm -D --defined-only "$so" 2>/dev/null | awk '$2 ~ /[TDBR]/ {print $3}' | grep -v '^_' | tr '\n' ' ')
    [ "$exports" = "hx_hip_module_get_ops " ] && ok "$(basename "$so") exports only hx_hip_module_get_ops" \
        || bad "$(basename "$so") exports: $exports"
done

# ---- 2. why HIP is unavailable ------------------------------------------------------------------
hipline() { # env assignments..., prints the `hip` line of engine devices; fails unless exit 0
    local out rc
    out=$(env "$@" "$E" devices 2>&1); rc=$?
    echo "$out" | grep -E '^  hip ' || echo "(no hip line)"
    return $rc
}
expect_why() { # name, regex, env...
    local name=$1 re=$2 line; shift 2
    if line=$(hipline "$@") && echo "$line" | grep -Eq "$re"; then ok "$name: ${line#  }"; else bad "$name (exit 0, /$re/): $line"; fi
}
line=$(hipline HX_HIP_MODULE=) && rc=0 || rc=$?
if [ $rc -ne 0 ]; then bad "engine devices exited $rc"
elif echo "$line" | grep -q 'unavailable: .'; then ok "engine devices on this machine: ${line#  }"
elif echo "$line" | grep -q 'available'; then ok "engine devices finds a GPU here: ${line#  }"
else bad "engine devices: $line"; fi
expect_why "no module" 'unavailable: HX_HIP_MODULE=/nonexistent/hx-hip-nv.so: no such file' HX_HIP_MODULE=/nonexistent/hx-hip-nv.so
amd=$(get amd_module)
if [ -n "$amd" ] && [ -f "$amd" ] && grep -q 'libamdhip64.so.5' "$amd"; then
    tmp=$(mktemp -d)
    # the same module on a machine without ROCm: its libamdhip64.so.5 dependency cannot be found
    python3 -c "import sys; d=open(sys.argv[1],'rb').read(); open(sys.argv[2],'wb').write(d.replace(b'libamdhip64.so.5', b'libamdhip64.so.X'))" "$amd" "$tmp/hx-hip-amd.so"
    expect_why "no runtime library" 'unavailable: hx-hip-amd.so: ROCm HIP runtime not installed \(libamdhip64.so.X not found\)' HX_HIP_MODULE="$tmp/hx-hip-amd.so"
    rm -rf "$tmp"
fi
emu=$(get emu_module)
if [ -n "$emu" ]; then
    expect_why "no device" 'unavailable: hx-hip-emu.so: the emu runtime finds no GPU' HX_HIP_MODULE="$emu" HX_HIP_EMU_DEVICES=0
    expect_why "driver error" 'unavailable: hx-hip-emu.so: driver error: hipGetDeviceCount: hipErrorInsufficientDriver' HX_HIP_MODULE="$emu" HX_HIP_EMU_DRIVER_ERROR=1
    expect_why "emulated device" 'available \(score 2\), 1 device' HX_HIP_MODULE="$emu"
fi

# ---- 3. the kernels, run on the host --------------------------------------------------------------
if [ -z "$emu" ]; then
    skip "hx-hip-emu.so not configured (HX_HIP_EMU=OFF): kernels not run"
    finish
fi
export HX_HIP_MODULE=$emu
tbo=$B/tests/test-backend-ops
if [ -x "$tbo" ]; then
    out=$("$tbo" --backend hip -q 2>&1); rc=$?
    last=$(echo "$out" | tail -1)
    if [ $rc -eq 0 ] && echo "$last" | grep -Eq '^[1-9][0-9]* passed, 0 failed'; then ok "test-backend-ops --backend hip (emulated): $last"
    else bad "test-backend-ops --backend hip (emulated), exit $rc: $last"; echo "$out" | grep -E '^FAIL' | head -20; fi
    # the prefill GEMM on each matrix-unit path (hip-mma.h), the emulated device as the GPU
    # (m = 512 on the default NVIDIA path only; test-hip-mma runs every path at m = 512)
    # (AMD: gfx1100 takes wmma int8 + f16; gfx1200 the RDNA4 WMMA, int8 + f16, and wmma12-16
    # its f16 for every type; gfx11's f16 WMMA on the int8 types, HX_HIP_GEMM=wmma, is left to
    # test-hip-mma: each run costs CI ~8 s)
    for v in "HX_HIP_EMU_ARCH=sm_80" "HX_HIP_EMU_ARCH=sm_80 HX_HIP_GEMM=mma16" "HX_HIP_EMU_ARCH=gfx1100" "HX_HIP_EMU_ARCH=sm_80 HX_HIP_GEMM=mma-fsimt" \
             "HX_HIP_EMU_ARCH=gfx1200" "HX_HIP_EMU_ARCH=gfx1200 HX_HIP_GEMM=wmma12-16"; do
        ms=64; case $v in *=sm_80) ms=64,512 ;; esac
        out=$(env $v "$tbo" --backend hip --op matmul --m $ms -q 2>&1); rc=$?
        last=$(echo "$out" | tail -1)
        want=$(case $v in *mma16*) echo "mma (f16 + bf16x2 + 3xtf32)" ;; *fsimt*) echo "mma (int8 + f16)" ;; *sm_80*) echo "mma (int8 + f16 + bf16x2 + 3xtf32)" ;;
               *gfx1100*) echo "wmma (int8 + f16)" ;; *wmma12-16) echo "wmma12 (f16)" ;; *) echo "wmma12 (int8 + f16)" ;; esac)
        if [ $rc -eq 0 ] && echo "$last" | grep -Eq '^[1-9][0-9]* passed, 0 failed' && echo "$out" | grep -qF "prefill GEMM $want"; then
            ok "test-backend-ops matmul m=$ms, $v (emulated, prefill GEMM $want): $last"
        else bad "test-backend-ops matmul m=$ms, $v (emulated; want prefill GEMM $want), exit $rc: $last"; echo "$out" | grep -E '^FAIL' | head -20; fi
    done
    # a device whose fragment layout differs from the documented one (the emulator's
    # HX_HIP_EMU_MMA_FAULT: one wrong D register of that op): the caps kernel's self-check drops
    # the path with a warning, the device takes the next one, and the results stay right
    for v in "1|sm_80|mma (f16 + bf16x2 + 3xtf32)|mma int8" "16|gfx1100|wmma (f16)|wmma int8 (gfx11)" \
             "17|gfx1200|simt|wmma f16 (gfx12)"; do
        IFS='|' read -r k a want path <<< "$v"
        out=$(HX_HIP_EMU_MMA_FAULT=$k HX_HIP_EMU_ARCH=$a "$tbo" --backend hip --op matmul --m 64 --type Q8_0,F16 -q 2>&1); rc=$?
        last=$(echo "$out" | tail -1)
        if [ $rc -eq 0 ] && echo "$last" | grep -Eq '^[1-9][0-9]* passed, 0 failed' &&
           echo "$out" | grep -qF "the $path matrix path failed its self-check" &&
           echo "$out" | grep -qF "prefill GEMM $want"; then
            ok "a wrong $path layout on an emulated $a: dropped by the self-check, prefill GEMM $want; $last"
        else bad "HX_HIP_EMU_MMA_FAULT=$k on $a (want '$path' dropped, prefill GEMM $want), exit $rc: $last $(echo "$out" | grep -m1 -o 'prefill GEMM [a-z0-9 (+)-]*')"; fi
    done
    out=$(HX_HIP_EMU_ARCH=gfx1030 HX_HIP_GEMM=bogus "$tbo" --backend hip --op matmul --m 64 --type Q8_0 -q 2>&1)
    echo "$out" | grep -q 'prefill GEMM simt' && ok "gfx1030 (emulated) keeps the SIMT GEMM; HX_HIP_GEMM=bogus ignored" \
        || bad "gfx1030 with HX_HIP_GEMM=bogus: $(echo "$out" | grep -m1 'device hip')"
    # the GEMVs cut K into slices when the grid is small for the GPU (hip-gemv.h); the
    # emulator has one multiprocessor, so few shapes are cut: plan for an H100's 132
    out=$(HX_HIP_GEMV_SM=132 "$tbo" --backend hip --op matmul --m 1 --type TQ2_0,I2_S,TQ1_0,Q4_K,BF16 -q 2>&1); rc=$?
    last=$(echo "$out" | tail -1)
    if [ $rc -eq 0 ] && echo "$last" | grep -Eq '^[1-9][0-9]* passed, 0 failed'; then ok "test-backend-ops matmul, split K planned for 132 SMs (emulated): $last"
    else bad "test-backend-ops matmul, split K planned for 132 SMs (emulated), exit $rc: $last"; echo "$out" | grep -E '^FAIL' | head -20; fi
else
    skip "no $tbo"
fi
if [ -n "$D" ] && [ -d "$D" ]; then
    for m in qwen3/qwen3-tern-tq2_0.gguf qwen3/qwen3-tern-f16.gguf misc/llama-2-tiny-random.gguf stories260K/stories260K.gguf; do
        [ -f "$D/$m" ] || { skip "no $D/$m"; continue; }
        run() { "$E" run -m "$D/$m" -p "Once upon a time" -n 12 --temp 0 --ids --backend "$1" 2>/dev/null | xargs; }
        h=$(run hip) c=$(run cpu) r=$(run ref)
        if [ -n "$h" ] && { [ "$h" = "$c" ] || [ "$h" = "$r" ]; }; then ok "engine run $m on hip (emulated) = $( [ "$h" = "$c" ] && echo cpu || echo ref): $h"
        else bad "engine run $m: hip '$h', cpu '$c', ref '$r'"; fi
    done
    if "$E" diff --help > /dev/null 2>&1; then
        for m in qwen3/qwen3-tern-tq2_0.gguf misc/llama-2-tiny-random.gguf; do
            [ -f "$D/$m" ] || continue
            out=$("$E" diff -m "$D/$m" --backend hip -n 8 2>&1); rc=$?
            s=$(echo "$out" | grep -E 'greedy tokens' | xargs)
            [ $rc -eq 0 ] && ok "engine diff $m --backend hip (emulated): $s" || bad "engine diff $m (exit $rc): $(echo "$out" | tail -3)"
        done
    fi
    # a 100-token prompt (prefill through the GEMM, n > 32) with the emulated device on each
    # matrix-unit path: every op against ref within its threshold, the same greedy tokens
    if "$E" diff --help > /dev/null 2>&1; then
        P="Once upon a time, in a small village by the sea, there lived an old fisherman who every morning walked down to the harbour, mended his nets, and told stories to the children about the great storms of his youth."
        # F32 and BF16 weights (the float mma paths, 3xTF32 and bf16x2): qwen3-micro-f16 converted
        fm=$(mktemp -d)
        if [ -f "$D/qwen3/qwen3-micro-f16.gguf" ]; then
            for ty in BF16 F32; do
                "$E" quantize "$D/qwen3/qwen3-micro-f16.gguf" "$fm/qwen3-micro-$ty.gguf" $ty > /dev/null 2>&1 \
                    || bad "engine quantize qwen3-micro-f16 to $ty failed"
            done
        fi
        for mv in qwen3/qwen3-tern-tq2_0.gguf:sm_80 qwen3/qwen3-micro-q8_0.gguf:sm_80 qwen3/qwen3-micro-f16.gguf:gfx1100 \
            "$fm/qwen3-micro-BF16.gguf:sm_80" "$fm/qwen3-micro-F32.gguf:sm_80" \
            qwen3/qwen3-micro-q8_0.gguf:gfx1100 qwen3/qwen3-micro-f16.gguf:gfx1200 qwen3/qwen3-tern-tq2_0.gguf:gfx1200; do
            m=${mv%%:*} a=${mv##*:}
            case $m in /*) f=$m ;; *) f=$D/$m ;; esac
            [ -f "$f" ] || continue
            out=$(HX_HIP_EMU_ARCH=$a "$E" diff -m "$f" --backend hip -p "$P" -n 4 2>&1); rc=$?
            s=$(echo "$out" | grep -E 'greedy tokens' | xargs)
            [ $rc -eq 0 ] && ok "engine diff $(basename "$m"), 100-token prefill, HX_HIP_EMU_ARCH=$a (emulated): $s" \
                || bad "engine diff $(basename "$m"), 100-token prefill, HX_HIP_EMU_ARCH=$a (exit $rc): $(echo "$out" | tail -3)"
        done
        rm -rf "$fm"
    fi
    # the memory a plan accounts on hip (weights, KV, activations, the split scratch) is what
    # the emulated device holds after the runs (test-mem's accounting_hip)
    tm=$B/tests/test-mem
    if [ -x "$tm" ]; then
        out=$("$tm" accounting_hip 2>&1); rc=$?
        if [ $rc -eq 0 ] && echo "$out" | grep -q '^\[  OK  \] accounting_hip'; then
            ok "test-mem accounting_hip (emulated): $(echo "$out" | grep 'plans checked' | xargs)"
        else bad "test-mem accounting_hip (emulated), exit $rc: $(echo "$out" | grep -E 'FAIL' | head -3)"; fi
    else
        skip "no $tm"
    fi
    # the same ternary weights as I2_S and as TQ2_0: bit-identical logits; Q2_0 against llama.cpp
    tq=$B/tests/test-qwen3
    if [ -x "$tq" ]; then
        # again with the GEMVs planned for 132 SMs: ffn_down (512 -> 256) is cut in two slices
        for t in tern_i2_s_equals_tq2_0_hip tern_q2_0_hip sm132:tern_i2_s_equals_tq2_0_hip; do
            sm=; case $t in sm132:*) sm=132 t=${t#sm132:} ;; esac
            out=$(HX_HIP_GEMV_SM=$sm "$tq" "$t" 2>&1); rc=$?
            if [ $rc -eq 0 ] && echo "$out" | grep -q "^\[  OK  \] $t"; then
                ok "test-qwen3 $t (emulated${sm:+, split K for $sm SMs}): $(echo "$out" | grep -E 'logits differ|greedy ids' | tail -1 | xargs)"
            else bad "test-qwen3 $t (emulated${sm:+, split K for $sm SMs}), exit $rc: $(echo "$out" | tail -3)"; fi
        done
    else
        skip "no $tq"
    fi
    M=$D/qwen3/qwen3-tern-tq2_0.gguf
    if [ -f "$M" ]; then
        out=$(HX_HIP_EMU_FAIL_MALLOC=3 "$E" run -m "$M" -p Once -n 4 --temp 0 --ids --backend hip 2>&1); rc=$?
        [ $rc -eq 1 ] && echo "$out" | grep -q 'hipMalloc of [0-9]* bytes: hipErrorOutOfMemory' \
            && ok "out of device memory: exit 1, '$(echo "$out" | tail -1)'" || bad "out of device memory: exit $rc: $out"
        out=$(HX_HIP_EMU_FAIL_LAUNCH=40 "$E" run -m "$M" -p Once -n 4 --temp 0 --ids --backend hip 2>&1); rc=$?
        [ $rc -eq 1 ] && echo "$out" | grep -q 'kernel launch: hipErrorLaunchFailure' \
            && ok "kernel launch failure: exit 1, '$(echo "$out" | tail -1)'" || bad "kernel launch failure: exit $rc: $out"
        want=$("$E" run -m "$M" -p Once -n 4 --temp 0 --ids --backend cpu 2>/dev/null | xargs)
        got=$(HX_HIP_EMU_FAIL_LAUNCH=40 "$E" run -m "$M" -p Once -n 4 --temp 0 --ids --backend hip --fallback cpu 2>/dev/null | xargs)
        [ -n "$got" ] && [ "$got" = "$want" ] && ok "kernel launch failure with --fallback cpu: the cpu's tokens ($got)" \
            || bad "launch failure with --fallback cpu: '$got', cpu '$want'"
        # decode as one graph launch (hip-graph.h): the same tokens as direct launches, one graph
        # launch and one copy per token once captured, and a failing graph falls back to direct
        # launches with one warning. Host calls per token: the counters of -n 12 minus -n 4.
        grun() { # n, env...: prints "TOKENS|kernels graph_launches copies|warnings"
            local n=$1 out; shift
            out=$(env HX_LOG_LEVEL=info "$@" "$E" run -m "$M" -p "Once upon a time" -n "$n" --temp 0 --ids --backend hip 2>&1)
            echo "$(echo "$out" | grep -E '^[0-9 ]+$' | xargs)|$(echo "$out" | sed -n 's/.*host calls: \([0-9]*\) kernel launches, \([0-9]*\) graph launches, \([0-9]*\) copies.*/\1 \2 \3/p')|$(echo "$out" | grep -c 'decode graph failed, direct launches from now on')"
        }
        pertok() { # the grun lines at -n 12 and -n 4 → "kernels graph_launches copies" per token
            local a=($(echo "$1" | cut -d'|' -f2)) b=($(echo "$2" | cut -d'|' -f2))
            [ ${#a[@]} -eq 3 ] && [ ${#b[@]} -eq 3 ] || { echo "? ? ?"; return; }
            echo "$(( (a[0] - b[0]) / 8 )) $(( (a[1] - b[1]) / 8 )) $(( (a[2] - b[2]) / 8 ))"
        }
        g12=$(grun 12) g4=$(grun 4) d12=$(grun 12 HX_HIP_GRAPH=0) d4=$(grun 4 HX_HIP_GRAPH=0)
        IFS='|' read -r gt gc gw <<< "$g12"; IFS='|' read -r dt dc dw <<< "$d12"
        gp=$(pertok "$g12" "$g4") dp=$(pertok "$d12" "$d4")
        read -r gk gg gcp <<< "$gp"; read -r dk dg dcp <<< "$dp"
        if [ -n "$gt" ] && [ "$gt" = "$dt" ] && [ "$gw" = 0 ]; then ok "graphs: greedy tokens with graphs = HX_HIP_GRAPH=0 ($gt)"
        else bad "graphs: tokens with graphs '$gt' (warnings $gw), HX_HIP_GRAPH=0 '$dt'"; fi
        if [ "$gk" = 0 ] && [ "$gg" = 1 ] && [ "$gcp" = 1 ] && [ "$dg" = 0 ] && [ "$dcp" = 1 ] && [ "${dk:-0}" -gt 10 ] 2>/dev/null; then
            ok "graphs: host calls per decode token: $((dk + dcp)) direct ($dk kernel launches + $dcp copy) -> $((gg + gcp)) ($gg graph launch + $gcp copy)"
        else bad "graphs: host calls per token: graphs '$gp', HX_HIP_GRAPH=0 '$dp' (kernels, graph launches, copies)"; fi
        for f in instantiate launch; do
            IFS='|' read -r ft fc fw <<< "$(grun 12 HX_HIP_EMU_FAIL_GRAPH=$f)"
            set -- $fc
            if [ "$ft" = "$dt" ] && [ "$fw" = 1 ] && [ "${2:-x}" = 0 ]; then ok "graphs: HX_HIP_EMU_FAIL_GRAPH=$f: one warning, direct launches, the same tokens"
            else bad "graphs: HX_HIP_EMU_FAIL_GRAPH=$f: tokens '$ft' (want '$dt'), warnings $fw, counters '$fc'"; fi
        done
        # every graph-sized attention and RoPE case captured at first sight and replayed
        if [ -x "$tbo" ]; then
            out=$(HX_HIP_GRAPH=eager HX_LOG_LEVEL=info "$tbo" --backend hip --op attn,rope --m 1,7 -q 2>&1); rc=$?
            n=$(echo "$out" | sed -n 's/.*(\([0-9]*\) as graphs).*/\1/p')
            last=$(echo "$out" | tail -1)
            if [ $rc -eq 0 ] && [ "${n:-0}" -gt 0 ] && echo "$last" | grep -Eq '^[1-9][0-9]* passed, 0 failed'; then ok "test-backend-ops --op attn,rope --m 1,7 with HX_HIP_GRAPH=eager: $last, $n splits as graphs"
            else bad "test-backend-ops with HX_HIP_GRAPH=eager, exit $rc, $n graphs: $last"; fi
        fi
        # the emulated GPU has its own memory (not "unified"): no share of the host's probe
        share() { "$E" bench -m "$M" -b "$1" -p 0 -n 4 -r 5 --bw-gbs 20 2>/dev/null | awk -F'|' '/ tg4 /{gsub(/ /, "", $15); print $15}'; }
        sh=$(share hip) sc=$(share cpu)
        [ "$sh" = "—" ] && echo "$sc" | grep -Eq '^[0-9]+%' && ok "engine bench: no host-bandwidth share for a discrete GPU ('$sh'; cpu '$sc')" \
            || bad "engine bench share: hip '$sh', cpu '$sc'"
    fi
else
    skip "no HX_DATA: engine runs skipped"
fi
finish
