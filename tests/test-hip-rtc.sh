#!/usr/bin/env bash
# test-hip-rtc.sh — the AMD module's hipRTC path (backends/hip/hip-rtc.h), on a machine without
# an AMD GPU: `hx-hip-rtc get` runs what a device open runs for a GPU without prebuilt code
# (the cache lookup, then hipRTC of the installed ROCm in the helper process).
#  1. gfx1030 compiles: an AMDGPU ELF code object (e_machine 224, the gfx1030 machine flag)
#     holding, as kernels, the lowered name of every kernel the module registers (the .map),
#     which are all the kernels the module launches (the list test-hip-build checks);
#  2. a second get is a cache hit (same file, unchanged, marked used, no compile) that removes
#     entries unused for 30 days and keeps younger ones and foreign files; another target is
#     another cache entry; no temporary files are left;
#  3. a target this ROCm cannot compile for (gfx1100 on ROCm 5.2, whose hipRTC aborts) and a
#     malformed target are clear errors with exit status 1, not a crash of the caller.
# Skips (exit 77; a failure in CI, tests/lib.sh, whose Debian ROCm 5.2 has hipRTC) when ROCm
# or its hipRTC is not installed; N/A when the build has no HIP backend.
set -u
B=${HX_BUILD:?}
. "$(dirname "$0")/lib.sh"

man=$B/hx-hip-build.txt
if grep -qs '^HX_BACKEND_HIP:[A-Z]*=OFF' "$B/CMakeCache.txt"; then
    na "HIP backend disabled in this build (HX_BACKEND_HIP=OFF)"
    finish
fi
hipcc=$(command -v hipcc || ls /opt/rocm/bin/hipcc 2>/dev/null || true)
mod=$(sed -n 's/^amd_module=//p' "$man" 2>/dev/null)
helper=$(sed -n 's/^amd_rtc_helper=//p' "$man" 2>/dev/null)
if [ -z "$mod" ]; then
    if [ -n "$hipcc" ]; then
        bad "hipcc is installed ($hipcc) but this build has no AMD module ($man)"
    else
        skip "ROCm (hipcc) not installed: no AMD module, no hipRTC path to test"
    fi
    finish
fi
if [ -z "$helper" ]; then
    bad "$man names no hipRTC helper (amd_rtc_helper=)"
    finish
fi
cmake --build "$B" --target hx_hip_modules > /dev/null 2>&1 || { bad "building hx_hip_modules failed"; finish; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache
get() { # target → $work/out.$1, $work/err.$1; returns the helper's status
    "$helper" get "$mod" "$1" > "$work/out.$1" 2> "$work/err.$1"
}
field() { sed -n "s/^$2=//p" "$work/out.$1"; }

# ---- 1. compile for gfx1030 ----------------------------------------------------------------------
get gfx1030
rc=$?
if [ $rc -ne 0 ] && grep -q "hipRTC is not installed" "$work/err.gfx1030"; then
    skip "$(tail -1 "$work/err.gfx1030")"
    finish
fi
if [ $rc -ne 0 ]; then
    bad "hx-hip-rtc get gfx1030 failed (status $rc): $(tail -3 "$work/err.gfx1030")"
    finish
fi
co=$(field gfx1030 path)
note=$(field gfx1030 note)
case "$note" in
    "compiled now in "*) ok "gfx1030: $note" ;;
    *) bad "gfx1030 on an empty cache: note '$note', expected 'compiled now in N s'" ;;
esac
case "$co" in
    "$XDG_CACHE_HOME"/hx/hip-*-gfx1030-rocm*.co) ok "cached as ${co#$XDG_CACHE_HOME/}" ;;
    *) bad "code object path '$co' is not \$XDG_CACHE_HOME/hx/hip-HASH-gfx1030-rocmVER.co" ;;
esac

check_co() { # code object, its .map, machine flag
    python3 - "$1" "$1.map" "$2" <<'EOF'
import struct, sys
path, mpath, mach = sys.argv[1], sys.argv[2], int(sys.argv[3], 0)
d = open(path, 'rb').read()
bad = []
if d[:4] != b'\x7fELF' or d[4] != 2:
    print('not a 64-bit ELF file'); sys.exit(1)
e_machine, = struct.unpack_from('<H', d, 0x12)
e_flags, = struct.unpack_from('<I', d, 0x30)
if e_machine != 224: bad.append('e_machine %d, not EM_AMDGPU (224)' % e_machine)
if e_flags & 0xff != mach: bad.append('machine flag 0x%x, expected 0x%x' % (e_flags & 0xff, mach))
shoff, = struct.unpack_from('<Q', d, 0x28)
shentsize, shnum = struct.unpack_from('<HH', d, 0x3A)
secs = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
funcs, objs = set(), set()
for s in secs:
    if s[1] not in (2, 11): continue  # SHT_SYMTAB, SHT_DYNSYM
    so = secs[s[6]][4]
    for i in range(s[5] // 24):
        st_name, st_info = struct.unpack_from('<IB', d, s[4] + i * 24)
        name = d[so + st_name:d.index(b'\0', so + st_name)].decode()
        (funcs if st_info & 0xf == 2 else objs).add(name)
rows = [l.split() for l in open(mpath) if l.strip()]
kernels = {n[:-3] for n in objs if n.endswith('.kd')}
for reg, low in rows:
    if low not in funcs or low not in kernels: bad.append('kernel %s (%s) missing' % (low, reg))
if len(kernels) != len(rows): bad.append('%d kernels in the code object, %d in the map' % (len(kernels), len(rows)))
# every kernel instantiation hip-module.hip launches (types as in enum hx_dtype)
need = ['hx_hip_gemv_qILi%dELi%dE' % (t, c) for t in range(3, 12) for c in (1, 2, 4, 8)]
need += ['hx_hip_gemv_fILi%dELi%dELb%dE' % (t, c, v) for t in range(3) for c in (1, 2, 4, 8) for v in (0, 1)]
need += ['hx_hip_%sILi%dE' % (k, t) for k in ('gemm', 'embed') for t in range(12)]
need += ['hx_hip_' + k for k in ('quantize_q8', 'gemv_combine', 'rms_norm', 'copy_rows', 'rope',
                                 'kv_store', 'attn', 'attn_part', 'attn_combine', 'attn_flash',
                                 'eltwise')]
regs = [r for r, _ in rows]
for n in need:
    if not any(n in r for r in regs): bad.append('%s not registered by the module' % n)
if bad:
    print('; '.join(bad[:6])); sys.exit(1)
print('%d kernels, AMDGPU ELF for mach 0x%x' % (len(rows), mach))
EOF
}
if [ -f "$co" ] && msg=$(check_co "$co" 0x36); then
    ok "gfx1030 code object: $msg"
else
    bad "gfx1030 code object: ${msg:-missing}"
fi

# ---- 2. the cache ---------------------------------------------------------------------------------
before=$(stat -c %i.%s "$co" 2>/dev/null)
sum=$(cksum < "$co")
# entries of other builds: one unused for 40 days (removed by the next get), one for 10 (kept),
# and a file that is not the cache's (kept whatever its age)
cdir=$(dirname "$co")
for f in hip-0000old-gfx1030-rocm0.co hip-0000old-gfx1030-rocm0.co.map hip-0000new-gfx1030-rocm0.co \
         hip-0000new-gfx1030-rocm0.co.map notes.txt; do
    echo planted > "$cdir/$f"
done
touch -d '40 days ago' "$cdir"/hip-0000old-* "$cdir/notes.txt" "$co" "$co.map"
touch -d '10 days ago' "$cdir"/hip-0000new-*
get gfx1030
rc=$?
if [ $rc -eq 0 ] && [ "$(field gfx1030 note)" = "from cache" ] && [ "$(field gfx1030 path)" = "$co" ] &&
   [ "$(stat -c %i.%s "$co")" = "$before" ] && [ "$(cksum < "$co")" = "$sum" ]; then
    ok "second get: from cache, the same unchanged file"
else
    bad "second get: status $rc, note '$(field gfx1030 note)', path '$(field gfx1030 path)'"
fi
if [ -n "$(find "$co" "$co.map" -mmin -5 | sed -n 2p)" ] && [ ! -e "$cdir/hip-0000old-gfx1030-rocm0.co" ] &&
   [ ! -e "$cdir/hip-0000old-gfx1030-rocm0.co.map" ] && [ -e "$cdir/hip-0000new-gfx1030-rocm0.co" ] &&
   [ -e "$cdir/hip-0000new-gfx1030-rocm0.co.map" ] && [ -e "$cdir/notes.txt" ]; then
    ok "the hit marked its entry used, removed the entry unused for 40 days, kept the 10-day one and a foreign file"
else
    bad "cache pruning: $(cd "$cdir" && ls -l --time-style=+%F | sed 1d | awk '{print $6, $7}' | tr '\n' ' ')"
fi
rm -f "$cdir"/hip-0000new-* "$cdir/notes.txt"
if get gfx1036 && co2=$(field gfx1036 path) && [ "$co2" != "$co" ] &&
   [ "${co2/gfx1036/gfx1030}" = "$co" ] && msg=$(check_co "$co2" 0x45); then
    ok "gfx1036: its own cache entry ($(field gfx1036 note)); $msg"
else
    bad "gfx1036: status $?, path '$(field gfx1036 path)' vs '$co': ${msg:-} $(tail -1 "$work/err.gfx1036")"
fi
rm -f "$co.map"
if get gfx1030 && [ "$(field gfx1030 note)" != "from cache" ] && [ -f "$co.map" ]; then
    ok "an entry without its map is compiled again ($(field gfx1030 note))"
else
    bad "an entry without its map: note '$(field gfx1030 note)'"
fi
left=$(ls "$XDG_CACHE_HOME/hx" | grep -v '\.co$\|\.co\.map$')
[ -z "$left" ] && ok "no temporary files left in the cache" || bad "left in the cache: $left"

# ---- 3. targets this ROCm cannot compile for ------------------------------------------------------
ver=${co##*-rocm}
ver=${ver%.co}
get gfx1100
rc=$?
err=$(tail -1 "$work/err.gfx1100")
if [ $rc -ge 128 ]; then
    bad "gfx1100: the caller died (status $rc): $err"
elif [ $rc -eq 0 ]; then
    case "$ver" in
        5.[0-4].*) bad "gfx1100 compiled with ROCm $ver, whose hipRTC is expected to abort on it" ;;
        *) ok "gfx1100 compiles with ROCm $ver ($(field gfx1100 note))" ;;
    esac
elif [ $rc -eq 1 ] && grep -q "^hx-hip-rtc: .*gfx1100" <<< "$err"; then
    ok "gfx1100 with ROCm $ver: status 1, '$err'"
    case "$ver" in
        5.[0-4].*) grep -q "crashed compiling for gfx1100" <<< "$err" &&
                   ok "the hipRTC crash is named as one" ||
                   bad "ROCm $ver's hipRTC aborts on gfx1100; the message does not say so" ;;
    esac
else
    bad "gfx1100: status $rc, '$err'"
fi
[ ! -e "$XDG_CACHE_HOME/hx/$(basename "${co/gfx1030/gfx1100}")" ] && ok "nothing cached for gfx1100 after the failure" ||
    [ $rc -eq 0 ] || bad "a failed gfx1100 compile left a cache entry"
get 'gfx10;rm'
rc=$?
if [ $rc -eq 1 ] && grep -q "not an AMD GPU target" "$work/err.gfx10;rm"; then
    ok "malformed target refused: $(tail -1 "$work/err.gfx10;rm")"
else
    bad "malformed target: status $rc, $(tail -1 "$work/err.gfx10;rm")"
fi
finish
