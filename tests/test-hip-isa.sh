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
    kernels = set(re.findall(r'^\s*\.amdhsa_kernel (\S+)', open(path).read(), re.M))
    return funcs, kernels
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
for t, (funcs, kernels) in sorted(res.items()):
    if kernels != ref:
        errors.append('%s: kernels differ from gfx1030 (%d missing, %d extra)' % (t, len(ref - kernels), len(kernels - ref)))
    # gfx1030: the accumulating VOP2 form v_dot4c_i32_i8 (or VOP3P v_dot4_i32_i8)
    dots = ('v_dot4_i32_i8', 'v_dot4c_i32_i8') if t == 'gfx1030' else ('v_dot4_i32_iu8',)
    dot = '/'.join(dots)
    g = gemvq(funcs)
    nodot = [n for n, i in g.items() if not any(d in i for d in dots)]
    if not g or nodot: errors.append('%s: %d of %d quantized GEMVs without %s' % (t, len(nodot), len(g), dot))
    wmma = {n for n, i in funcs.items() if any(x.startswith('v_wmma') for x in i)}
    line = '%s: %d GEMVs with %s' % (t, len(g), dot)
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
finish
