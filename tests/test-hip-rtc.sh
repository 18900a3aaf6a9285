#!/usr/bin/env bash
# test-hip-rtc.sh — the AMD module's hipRTC path (backends/hip/hip-rtc.h), on a machine without
# an AMD GPU: `hx-hip-rtc get` runs what a device open runs for a GPU without prebuilt code
# (the cache lookup, then hipRTC of the installed ROCm in the helper process).
#  1. gfx1030 compiles: an AMDGPU ELF code object (e_machine 224, the gfx1030 machine flag)
#     holding, as kernels, the lowered name of every kernel the module registers (the .map),
#     which are all the kernels the module launches (the list test-hip-build checks);
#  2. a second get is a cache hit (same file, unchanged, marked used, no compile) that removes
#     entries unused for 30 days and temporaries a day old, and keeps younger ones and every
#     name the cache does not write (near misses: hip-*.co.bak, an uppercase hash, ...);
#     another target is another cache entry; a get that races a prune removing its entry's
#     map waits for it and compiles the entry again; no temporary files are left;
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
# Files in the cache folder, 40 days old unless said: entries of other builds and ROCm versions
# (removed by the next get), their temporaries of a crashed compile (removed: this build's
# names and the <pid>.tmp of earlier ones), one 2 days old (removed: a compile is never that
# long); an entry unused for 10 days and the temporary of a compile in progress (kept); and
# names that are not the cache's although they start with hip- and hold .co (kept whatever
# their age), a folder and a link with an entry's name (kept)
cdir=$(dirname "$co")
h=00000000000000aa
gone="hip-$h-gfx1030-rocm0.co hip-$h-gfx1030-rocm0.co.map hip-$h-gfx90a-rocm5.7.31921.co
      hip-$h-gfx1030-rocm0.co.123.tmp hip-$h-gfx1030-rocm0.co.123.tmp.map
      hip-$h-gfx1030-rocm0.co.123-5f3e9a.tmp hip-$h-gfx1030-rocm0.co.123-5f3e9a.tmp.map"
young="hip-00000000000000bb-gfx1030-rocm0.co hip-00000000000000bb-gfx1030-rocm0.co.map
       hip-$h-gfx1030-rocm0.co.999-abc.tmp"
stray="notes.txt hip-notes.co.txt hip-$h-gfx1030-rocm0.co.bak hip-$h-gfx1030-rocm0.cobalt
       hip-$h-gfx1030-rocm0.co.tmp hip-$h-gfx1030-rocm0.co.map.orig hip-$h-gfx1030-rocm0.co.1.tmp.x
       hip-0000old-gfx1030-rocm0.co hip-00000000000000AA-gfx1030-rocm0.co hip-$h-sm_80-rocm0.co
       hip-$h-gfx1030.co hip-$h-gfx1030-rocm.co hip-$h-gfx1030-rocm0.co~ hip-$h-gfx1030-rocm0.map"
for f in $gone $young $stray; do echo planted > "$cdir/$f"; done
mkdir "$cdir/hip-$h-gfx1031-rocm0.co"
ln -s notes.txt "$cdir/hip-$h-gfx1032-rocm0.co"
touch -h -d '40 days ago' $(for f in $gone $stray hip-$h-gfx1031-rocm0.co hip-$h-gfx1032-rocm0.co; do
    echo "$cdir/$f"; done) "$co" "$co.map"
touch -d '2 days ago' "$cdir/hip-$h-gfx1030-rocm0.co.123-5f3e9a.tmp.map"
touch -d '10 days ago' "$cdir"/hip-00000000000000bb-*
touch -d '2 hours ago' "$cdir/hip-$h-gfx1030-rocm0.co.999-abc.tmp"
get gfx1030
rc=$?
if [ $rc -eq 0 ] && [ "$(field gfx1030 note)" = "from cache" ] && [ "$(field gfx1030 path)" = "$co" ] &&
   [ "$(stat -c %i.%s "$co")" = "$before" ] && [ "$(cksum < "$co")" = "$sum" ]; then
    ok "second get: from cache, the same unchanged file"
else
    bad "second get: status $rc, note '$(field gfx1030 note)', path '$(field gfx1030 path)'"
fi
[ -n "$(find "$co" "$co.map" -mmin -5 | sed -n 2p)" ] && ok "the hit marked its entry used" ||
    bad "the hit did not mark its entry used: $(ls -l --time-style=+%F "$co" "$co.map")"
wrong=""
for f in $gone; do [ -e "$cdir/$f" ] && wrong="$wrong kept:$f"; done
for f in $young $stray hip-$h-gfx1031-rocm0.co; do [ -e "$cdir/$f" ] || wrong="$wrong removed:$f"; done
[ -L "$cdir/hip-$h-gfx1032-rocm0.co" ] || wrong="$wrong removed:hip-$h-gfx1032-rocm0.co"
[ -z "$wrong" ] && ok "pruning removed the 40-day entries and stale temporaries, kept the 10-day entry, a compile in progress and $(echo $stray | wc -w) near-miss names" ||
    bad "cache pruning:$wrong"
HX_HIP_RTC_KEEP_DAYS=0 get gfx1030 && [ -e "$cdir/hip-$h-gfx1030-rocm0.co.999-abc.tmp" ] &&
    touch -d '40 days ago' "$cdir/hip-00000000000000bb-gfx1030-rocm0.co" &&
    HX_HIP_RTC_KEEP_DAYS=0 get gfx1030 && [ -e "$cdir/hip-00000000000000bb-gfx1030-rocm0.co" ] &&
    ok "HX_HIP_RTC_KEEP_DAYS=0 removes nothing" || bad "HX_HIP_RTC_KEEP_DAYS=0 removed a file"
for f in $young $stray; do rm -f "$cdir/$f"; done
rm -rf "$cdir/hip-$h-gfx1031-rocm0.co" "$cdir/hip-$h-gfx1032-rocm0.co"
if get gfx1036 && co2=$(field gfx1036 path) && [ "$co2" != "$co" ] &&
   [ "${co2/gfx1036/gfx1030}" = "$co" ] && msg=$(check_co "$co2" 0x45); then
    ok "gfx1036: its own cache entry ($(field gfx1036 note)); $msg"
else
    bad "gfx1036: status $?, path '$(field gfx1036 path)' vs '$co': ${msg:-} $(tail -1 "$work/err.gfx1036")"
fi
# A get racing a prune, and an entry without its map: the gfx1036 get below removes the gfx1030
# entry's map (unused for 40 days; the code object is not) and waits (HX_HIP_RTC_PRUNE_PAUSE_MS)
# between deciding to and doing it. A gfx1030 get started then must not take the entry being
# broken (its map would be gone): it waits for the prune's lock, finds a code object without
# its map, and compiles the entry again.
touch -d '40 days ago' "$co.map"
HX_HIP_RTC_PRUNE_PAUSE_MS=3000 get gfx1036 &
pruner=$!
for _ in $(seq 300); do flock -n -s "$cdir/hip.lock" true || break; sleep 0.1; done
if flock -n -s "$cdir/hip.lock" true; then
    bad "the pruning get never held the cache's lock ($cdir/hip.lock)"
    wait $pruner
else
    get gfx1030
    rc=$?
    wait $pruner
    rc2=$?
    if [ $rc -eq 0 ] && [ $rc2 -eq 0 ] && [ "$(field gfx1030 note)" != "from cache" ] &&
       [ -f "$co" ] && [ -f "$co.map" ] && [ -n "$(find "$co.map" -mmin -5)" ]; then
        ok "a get racing a prune of its entry's map waits for it and compiles the entry again ($(field gfx1030 note))"
    else
        bad "a get racing a prune: status $rc (pruner $rc2), note '$(field gfx1030 note)', entry $(ls -l --time-style=+%F "$co" "$co.map" 2>&1 | xargs)"
    fi
fi
left=$(ls "$XDG_CACHE_HOME/hx" | grep -v '\.co$\|\.co\.map$\|^hip\.lock$')
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
