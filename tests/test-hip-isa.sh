#!/usr/bin/env bash
# test-hip-isa.sh — the HIP kernels as RDNA3 (gfx1100) and RDNA4 (gfx1200) machine code, which
# the build's own hipcc (Debian's ROCm 5.2) cannot produce: Debian's clang 19 (an LLVM that knows
# both, and their WMMA builtins) compiles hip-module.hip device-only to assembly against ROCm
# 5.2's HIP headers, for gfx1030 (the prebuilt target, as the reference), gfx1100 and gfx1200.
# What is checked, per target:
#  - it compiles, without warnings the build's flags would raise;
#  - every target holds the same kernels as gfx1030, at least as many as test-hip-build's list;
#  - the prefill GEMM's matrix-unit kernels (hx_hip_gemm_tc<T, path>) hold the instruction of
#    their path where the target has it: the f16 WMMA path (path 3) v_wmma_f32_16x16x16_f16 on
#    gfx1100 in every type it takes; gfx1030 holds no WMMA; hx_hip_gemm_wmma<T, path>: RDNA3
#    int8 (16) v_wmma_i32_16x16x16_iu8 on gfx1100, RDNA4 f16 (17) v_wmma_f32_16x16x16_f16 and
#    int8 (18) v_wmma_i32_16x16x16_iu8 on gfx1200 (the _gfx12 builtins);
#  - the quantized GEMVs use the packed int8 dot product (v_dot4_i32_iu8 on gfx11 and gfx12,
#    v_dot4c_i32_i8 on gfx1030); gfx12 fell back to scalar products until this test.
#  - no kernel uses scratch on any of the three (register spills: flash attention spilled 2.6 KB
#    a thread and the 8-row GEMVs up to 976 bytes before this check);
# and, where the build has an NVIDIA module, nvcc's ptxas for sm_80 and sm_90 reports no kernel
# spilling more than 64 bytes (not applicable without one).
# This checks that the code a user's ROCm compiles with hipRTC for these GPUs (hip-rtc.h) is
# valid and takes the intended instructions; it does not run it. Not applicable without the HIP
# backend; skipped (77; a failure in CI, whose setup installs clang-19) without clang 19 or
# ROCm's HIP headers.
set -u
B=${HX_BUILD:?}
. "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")/.." && pwd)

if grep -qs '^HX_BACKEND_HIP:[A-Z]*=OFF' "$B/CMakeCache.txt"; then
    na "HIP backend disabled in this build (HX_BACKEND_HIP=OFF)"
    finish
fi
clang=$(command -v clang++-19 || ls /usr/lib/llvm-19/bin/clang++ 2>/dev/null || true)
if [ -z "$clang" ]; then
    skip "clang 19 (Debian package clang-19) not installed: RDNA3/RDNA4 code not compiled"
    finish
fi
hipinc=
for d in /usr/include /opt/rocm/include; do [ -f "$d/hip/hip_runtime.h" ] && hipinc=$d && break; done
if [ -z "$hipinc" ]; then
    skip "ROCm's HIP headers (hip/hip_runtime.h) not installed"
    finish
fi

[ "$hipinc" = /usr/include ] || hipflag="-isystem $hipinc"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
targets="gfx1030 gfx1100 gfx1200"
compile() { # target: $work/$1.s, $work/$1.log
    "$clang" -x hip --offload-arch="$1" --cuda-device-only -nogpulib -std=c++17 -O3 -S \
        -Wall -Wextra -Wno-unused-parameter -Werror ${hipflag:-} \
        -DHX_HIP_TARGETS="\"$1\"" -I"$src/include" -I"$src/backends/hip" -I"$B/backends/hip" \
        "$src/backends/hip/hip-module.hip" -o "$work/$1.s" > "$work/$1.log" 2>&1
}
# hip-module.hip includes the generated hip-rtc-src.h only with HX_HIP_AMD_RTC (not set here)
pids=
for t in $targets; do compile "$t" & pids="$pids $!"; done
rcs=
for p in $pids; do wait "$p"; rcs="$rcs $?"; done
set -- $rcs
for t in $targets; do
    if [ "$1" -eq 0 ]; then ok "$t: compiled by $(basename "$clang") ($(grep -c '^\s*\.amdhsa_kernel ' "$work/$t.s") kernels)"
    else bad "$t: clang failed: $(grep -m3 -E 'error|warning' "$work/$t.log" | cut -c1-200 | xargs)"; fi
    shift
done

out=$(python3 - "$work" $targets <<'EOF'
import re, sys
work, targets = sys.argv[1], sys.argv[2:]
def parse(path):
    funcs, cur = {}, None
    for line in open(path):
        m = re.match(r'^(_Z\w+):', line)
        if m: cur = m.group(1); funcs[cur] = set(); continue
        if line.startswith('.Lfunc_end'): cur = None; continue
        if cur:
            w = line.split()
            if w and re.match(r'^[vs]_\w+$', w[0]): funcs[cur].add(w[0])
    text = open(path).read()
    kernels = set(re.findall(r'^\s*\.amdhsa_kernel (\S+)', text, re.M))
    # per kernel, the scratch (private segment) a thread needs: register spills, or arrays the
    # compiler could not keep in registers
    scratch = {m.group(1): int(re.search(r'\.amdhsa_private_segment_fixed_size (\d+)', m.group(2)).group(1))
               for m in re.finditer(r'\.amdhsa_kernel (\S+)(.*?)\.end_amdhsa_kernel', text, re.S)}
    return funcs, kernels, scratch
res, errors = {}, []
for t in targets:
    try: res[t] = parse('%s/%s.s' % (work, t))
    except OSError: errors.append('%s: no assembly' % t)
if 'gfx1030' not in res: sys.exit('no reference (gfx1030) assembly')
ref = res['gfx1030'][1]
if len(ref) < 121: errors.append('gfx1030: %d kernels, fewer than the 121 test-hip-build lists' % len(ref))
def tc(funcs, path):  # hx_hip_gemm_tc<T, path> kernels → their instruction sets
    return {n: i for n, i in funcs.items() if re.search(r'hx_hip_gemm_tcILi\d+ELi%dE' % path, n)}
def amd(funcs, path):  # hx_hip_gemm_wmma<T, path> kernels
    return {n: i for n, i in funcs.items() if re.search(r'hx_hip_gemm_wmmaILi\d+ELi%dE' % path, n)}
def gemvq(funcs):
    return {n: i for n, i in funcs.items() if 'hx_hip_gemv_qI' in n}
for t, (funcs, kernels, scratch) in sorted(res.items()):
    if set(scratch) != kernels: errors.append('%s: scratch sizes read for %d of %d kernels' % (t, len(scratch), len(kernels)))
    spill = sorted(((b, n) for n, b in scratch.items() if b), reverse=True)
    if spill:
        errors.append('%s: %d kernels use scratch (register spills), e.g. %s: %d bytes a thread' % (t, len(spill), spill[0][1][:60], spill[0][0]))
    if kernels != ref:
        errors.append('%s: kernels differ from gfx1030 (%d missing, %d extra)' % (t, len(ref - kernels), len(kernels - ref)))
    # gfx1030: the accumulating VOP2 form v_dot4c_i32_i8 (or VOP3P v_dot4_i32_i8)
    dots = ('v_dot4_i32_i8', 'v_dot4c_i32_i8') if t == 'gfx1030' else ('v_dot4_i32_iu8',)
    dot = '/'.join(dots)
    g = gemvq(funcs)
    nodot = [n for n, i in g.items() if not any(d in i for d in dots)]
    if not g or nodot: errors.append('%s: %d of %d quantized GEMVs without %s' % (t, len(nodot), len(g), dot))
    wmma = {n for n, i in funcs.items() if any(x.startswith('v_wmma') for x in i)}
    line = '%s: no kernel spills; %d GEMVs with %s' % (t, len(g), dot)
    if t == 'gfx1030':
        if wmma: errors.append('gfx1030 holds WMMA (%d kernels)' % len(wmma))
    elif t.startswith('gfx11'):
        k = tc(funcs, 3)
        miss = [n for n, i in k.items() if 'v_wmma_f32_16x16x16_f16' not in i]
        if not k or miss: errors.append('%s: %d of %d f16 WMMA GEMMs without v_wmma_f32_16x16x16_f16' % (t, len(miss), len(k)))
        line += ', %d f16 WMMA GEMMs with v_wmma_f32_16x16x16_f16' % len(k)
    # AMD WMMA beyond RDNA3's f16 (hx_hip_gemm_wmma<T, path>): RDNA3 int8 (16) on gfx11, RDNA4
    # f16 (17) and int8 (18) on gfx12, each with its instruction; elsewhere they are traps
    for p, want, fam in ((16, 'v_wmma_i32_16x16x16_iu8', 'gfx11'), (17, 'v_wmma_f32_16x16x16_f16', 'gfx12'),
                         (18, 'v_wmma_i32_16x16x16_iu8', 'gfx12')):
        if not t.startswith(fam): continue
        k = amd(funcs, p)
        miss = [n for n, i in k.items() if want not in i]
        if not k or miss: errors.append('%s: %d of %d hx_hip_gemm_wmma<T, %d> without %s' % (t, len(miss), len(k), p, want))
        line += ', %d hx_hip_gemm_wmma<T, %d> with %s' % (len(k), p, want)
    print(line)
if errors: print('ERR ' + '; '.join(errors)); sys.exit(1)
EOF
)
rc=$?
while read -r l; do [ -n "$l" ] && ok "$l"; done <<< "$(echo "$out" | grep -v '^ERR')"
[ $rc -eq 0 ] || bad "$(echo "$out" | sed -n 's/^ERR //p')"

# ---- NVIDIA: ptxas's register spills for sm_80 and sm_90 (the build's nvcc) ----------------------
# (only where the build made an NVIDIA module: CUDA is not one of setup-debian's packages)
nvcc=$(sed -n 's/^nv_compiler=//p' "$B/hx-hip-build.txt" 2>/dev/null)
if [ -z "$(sed -n 's/^nv_module=//p' "$B/hx-hip-build.txt" 2>/dev/null)" ]; then
    na "this build has no NVIDIA module (no nvcc at configure time): NVIDIA register use not checked"
    finish
fi
if [ ! -x "$nvcc" ]; then
    bad "the build's nvcc ($nvcc) is gone"
    finish
fi
if ! "$nvcc" -std=c++17 -O3 -x cu -gencode=arch=compute_80,code=sm_80 \
        -gencode=arch=compute_90,code=sm_90 --resource-usage -c -I"$src/include" \
        -I"$src/backends/hip" "$src/backends/hip/hip-module.hip" -o "$work/nv.o" > "$work/nv.log" 2>&1; then
    bad "nvcc failed: $(grep -m3 error "$work/nv.log" | cut -c1-200 | xargs)"
    finish
fi
# A few bytes where a kernel sits at the 255-register cap are ptxas's choice (today 8 bytes or
# less: the AMD WMMA kernels NVIDIA code holds as traps and never launches, 4 in Q2_0's
# embedding on sm_80); hundreds would mean a kernel's live state no longer fits, as the RDNA
# spills above did
out=$(python3 - "$work/nv.log" <<'EOF'
import re, sys
cur, arch, n, spills = None, None, 0, []
for line in open(sys.argv[1]):
    m = re.search(r"Compiling entry function '(\S+)' for '(sm_\d+)'", line)
    if m: cur, arch = m.group(1), m.group(2); n += 1; continue
    m = re.search(r'(\d+) bytes spill stores', line)
    if m and cur and int(m.group(1)):
        spills.append((int(m.group(1)), arch, cur))
print('%d kernels compiled for sm_80 and sm_90; %d spill (%s)' % (n, len(spills),
      ', '.join('%s %s: %d bytes' % (a, k[:40], b) for b, a, k in sorted(spills, reverse=True)[:3]) or 'none'))
big = [x for x in spills if x[0] > 64]
if n < 2 * 121 or big:
    print('ERR %d kernels; %d spill more than 64 bytes, e.g. %s' % (n, len(big), big[0] if big else '-')); sys.exit(1)
EOF
)
rc=$?
if [ $rc -eq 0 ]; then ok "$out"; else bad "$(echo "$out" | tr '\n' ' ')"; fi
finish
