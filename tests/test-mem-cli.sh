#!/usr/bin/env bash
# test-mem-cli.sh — --mem and fit from the command line (docs/policies.md "Memory"): `engine plan`
# prints each device's bytes by kind and its limit; fit under a cap splits the layers, and
# engine diff passes under it (greedy ids equal the reference's) on the shared stories260K and
# on an `engine mkmodel` model; run and bench take --mem and fit; bad --mem text is a usage
# error (exit 2) in plan, run, bench, diff and serve; a plan that does not fit (a cap below a
# layer's need, a context too large for every device) is refused before loading, exit 1,
# naming the device, its need and its limit; devices on host RAM (cpu, ref, lavapipe, npu-sim)
# are held to it together (`--mem host=SIZE`, else what the host reports). tests/test-mem.c
# checks the accounting against what the devices allocate.
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?}
export HX_PROFILE_DIR=off # auto measures; no cache file from a test
. "$(dirname "$0")/lib.sh"
S=$D/stories260K/stories260K.gguf
need_file "$S" || finish
T=$(mktemp -d "${TMPDIR:-/tmp}/hx-mem-XXXXXX")
trap 'rm -rf "$T"' EXIT
have() { "$E" plan -m "$S" --policy "single:$1" > /dev/null 2>&1; }

# The bytes plan prints for a device: "  DEV  weights ... = X (N bytes) of ..." -> N
bytes_of() { sed -n "s/^  $1 .* = [0-9.]* [KMGT]*i*B (\([0-9]*\) bytes).*/\1/p" | head -1; }

# ---- plan prints the memory per device, by kind, with the limit ---------------------------------
out=$("$E" plan -m "$S" --summary --mem cpu=1G 2>&1); rc=$?
line=$(echo "$out" | grep '^  cpu ')
[ $rc -eq 0 ] && echo "$line" | grep -Eq 'weights .* kv .* act .* staging .* = .* of 1.0 GiB \(1073741824 bytes, --mem cpu\)' \
  && ok "plan: cpu's weights, kv, act and staging against its --mem cap: $line" || bad "plan memory line (exit $rc): $out"
n=$(echo "$out" | bytes_of cpu)
[ -n "$n" ] && [ "$n" -gt 0 ] && ok "  the need in bytes: $n" || bad "  no byte count: $line"
# the same plan without --mem: unchanged rule and placement, the limit is what the host reports
base=$("$E" plan -m "$S" --summary 2>&1 | grep -v '^  cpu ' | grep -v '^memory')
capd=$(echo "$out" | grep -v '^  cpu ' | grep -v '^memory')
[ "$base" = "$capd" ] && ok "  a cap the plan fits changes nothing else of it" || bad "  plan differs under --mem"

# ---- fit under a cap that forces a split ---------------------------------------------------------
FITDEV=ref
have vulkan && FITDEV=vulkan
whole=$("$E" plan -m "$S" --policy single:$FITDEV --summary 2>&1 | bytes_of $FITDEV)
cap=$((whole * 6 / 10))
out=$("$E" plan -m "$S" --policy fit:$FITDEV --mem $FITDEV=$cap --summary 2>&1); rc=$?
rule=$(echo "$out" | sed -n 's/^phase decode.*rule \([^;]*\);.*/\1/p')
need=$(echo "$out" | bytes_of $FITDEV)
if [ $rc -eq 0 ] && echo "$rule" | grep -Eq "^fit:$FITDEV=L0-[0-9]+,cpu=L[0-9]+-4," && [ "$need" -le "$cap" ]; then
  ok "fit:$FITDEV --mem $FITDEV=$cap (60% of its whole-model $whole): $rule, $FITDEV needs $need"
else
  bad "fit under a cap (exit $rc): rule '$rule', need '$need' of $cap: $out"
fi
ids() { "$E" run -m "$1" -p "Once upon a time" -n 12 --temp 0 --ids "${@:2}" 2>/dev/null | xargs; }
a=$(ids "$S" --policy fit:$FITDEV --mem $FITDEV=$cap) b=$(ids "$S" --backend ref)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "  run under it generates ref's tokens ($a)" || bad "  run fit ids '$a' vs ref '$b'"
"$E" diff -m "$S" --policy fit:$FITDEV --mem $FITDEV=$cap -n 16 > "$T/diff" 2>&1; rc=$?
[ $rc -eq 0 ] && ok "  engine diff passes under it: $(grep -m1 -i 'greedy' "$T/diff")" || bad "  diff under fit (exit $rc): $(tail -5 "$T/diff")"

# an mkmodel model: 4 layers, Q8_0, Qwen3-shaped
M=$T/tiny.gguf
if "$E" mkmodel --shape tiny --type Q8_0 --vocab "$D/vocab/ggml-vocab-llama-spm.gguf" -o "$M" > /dev/null 2>&1; then
  C=(-c 128 --batch 16)
  # half the whole model holds every layer but not the tied head and its logits; 60% of that
  # holds only some of the layers
  whole=$("$E" plan -m "$M" "${C[@]}" --policy single:$FITDEV --summary 2>&1 | bytes_of $FITDEV)
  layers=$("$E" plan -m "$M" "${C[@]}" --policy fit:$FITDEV --mem $FITDEV=$((whole / 2)) --summary 2>&1 | bytes_of $FITDEV)
  cap=$((layers * 6 / 10))
  out=$("$E" plan -m "$M" "${C[@]}" --policy fit:$FITDEV --mem $FITDEV=$cap --summary 2>&1); rc=$?
  rule=$(echo "$out" | sed -n 's/^phase decode.*rule \([^;]*\);.*/\1/p')
  [ $rc -eq 0 ] && echo "$rule" | grep -q "cpu=L" && ok "mkmodel tiny Q8_0, fit:$FITDEV --mem $FITDEV=$cap: $rule" \
    || bad "mkmodel fit (exit $rc): $out"
  "$E" diff -m "$M" "${C[@]}" --policy fit:$FITDEV --mem $FITDEV=$cap -n 8 > "$T/diff2" 2>&1; rc=$?
  [ $rc -eq 0 ] && ok "  engine diff passes under it" || bad "  diff mkmodel fit (exit $rc): $(tail -5 "$T/diff2")"
else
  bad "engine mkmodel --shape tiny failed"
fi

# bench takes --policy fit and --mem (bench/policy-matrix.sh calls it so)
"$E" bench -m "$S" --policy fit:$FITDEV,cpu_only --mem $FITDEV=$((whole * 6 / 10)) -p 8 -n 4 -r 1 -o json > "$T/bench" 2> "$T/bench.err"; rc=$?
[ $rc -eq 0 ] && grep -q "\"fit:$FITDEV\"" "$T/bench" && ok "bench --policy fit:$FITDEV,cpu_only --mem: exit 0, both rows" \
  || bad "bench fit (exit $rc): $(tail -3 "$T/bench.err")"

# auto never picks a plan that does not fit: with ref capped below the whole model, not single:ref
out=$("$E" plan -m "$S" --policy auto:cpu,ref --mem ref=64K --summary 2>&1); rc=$?
[ $rc -eq 0 ] && ! echo "$out" | grep -q "rule single:ref" && echo "$out" | grep -q "rejected single:ref .*does not fit" \
  && ok "auto:cpu,ref --mem ref=64K: single:ref rejected as not fitting" || bad "auto under a cap (exit $rc): $out"

# ---- refusals ------------------------------------------------------------------------------------
expect() { # name, exit, message regex, args...
  local name=$1 want=$2 re=$3; shift 3
  "$@" > "$T/o" 2>&1; local rc=$?
  if [ $rc -eq "$want" ] && grep -Eq "$re" "$T/o"; then ok "$name: exit $rc, $(grep -Em1 "$re" "$T/o" | cut -c1-150)"
  else bad "$name: exit $rc (want $want): $(head -3 "$T/o")"; fi
}
expect "malformed size (plan)" 2 "malformed size '2Q' for cpu" "$E" plan -m "$S" --mem cpu=2Q
expect "unknown device (plan)" 2 "unknown device 'nope'" "$E" plan -m "$S" --mem nope=1G
expect "not DEV=SIZE (run)" 2 "is not DEVICE=SIZE" "$E" run -m "$S" -p hi -n 1 --mem cpu
expect "malformed size (bench)" 2 "malformed size" "$E" bench -m "$S" -p 8 -n 2 -r 1 --mem cpu=x
expect "malformed size (diff)" 2 "malformed size" "$E" diff -m "$S" --mem cpu=-1
expect "malformed size (serve)" 2 "malformed size" "$E" serve -m "$S" --port 0 --mem cpu=1.5
expect "a cap of 0" 2 "size '0' for vulkan is under a byte" "$E" plan -m "$S" --mem vulkan=0
expect "a cap beyond any machine" 2 "beyond any machine's memory" "$E" plan -m "$S" --mem cpu=99999999T
expect "device named twice" 2 "named twice" "$E" plan -m "$S" --mem cpu=1G,cpu=2G
expect "a cap below the plan's need" 1 "does not fit: cpu needs weights .* over its limit of 64.0 KiB \(65536 bytes, --mem cpu\)" \
  "$E" run -m "$S" -p hi -n 1 --mem cpu=64K
# before loading: a weight_prepare that would fail is never reached (and without the cap it is)
expect "  refused before any weight is prepared" 1 "does not fit: cpu needs" \
  env HX_FAULT='dev=cpu,entry=weight_prepare' "$E" run -m "$S" -p hi -n 1 --mem cpu=64K
expect "  (the injected weight_prepare failure, without the cap)" 1 "injected device error" \
  env HX_FAULT='dev=cpu,entry=weight_prepare' "$E" run -m "$S" -p hi -n 1
expect "fit: the rest does not fit the cpu" 1 "under fit:.* does not fit: cpu needs .* --mem cpu" \
  "$E" plan -m "$S" --policy fit:ref --mem ref=200K,cpu=200K
expect "a context too large for every device" 1 "does not fit: cpu needs .*kv [0-9.]+ GiB.* over its limit" \
  "$E" plan -m "$S" -c 16777216 --policy fit:ref --mem cpu=4G,ref=4G
expect "auto: fits nowhere" 1 "auto: .*does not fit" "$E" plan -m "$S" --policy auto:cpu,ref --mem cpu=100K,ref=100K
# devices on host RAM are held to it together: cpu and ref each fit a cap the two exceed
cpu_n=$("$E" plan -m "$S" --policy phase-split:ref,cpu --summary 2>&1 | bytes_of cpu)
ref_n=$("$E" plan -m "$S" --policy phase-split:ref,cpu --summary 2>&1 | bytes_of ref)
# (and single:cpu fits it: auto's decode choice for both below; the CPU's prefill scratch makes
# its need a little more than its decode share's)
one_n=$("$E" plan -m "$S" --policy single:cpu --summary 2>&1 | bytes_of cpu)
hc=$(( (cpu_n > ref_n ? cpu_n : ref_n) ))
hc=$(( (hc > one_n ? hc : one_n) + 1024 ))
expect "host RAM shared: phase-split:ref,cpu under --mem host=$hc (each fits, together not)" 1 \
  "does not fit: cpu [0-9.]+ [KMG]iB, ref [0-9.]+ [KMG]iB share host memory and need .* over the host's .*--mem host" \
  "$E" run -m "$S" -p hi -n 1 --policy phase-split:ref,cpu --mem host=$hc
expect "  and with room for both it runs" 0 "" \
  "$E" run -m "$S" -p hi -n 1 --policy phase-split:ref,cpu --mem host=$((cpu_n + ref_n + 1024))
# auto whose phases choose devices that do not fit host RAM together: one plan for both, decode's.
# A crafted profile (ref fast at prefill rows, cpu slow there) makes prefill choose ref.
P=$T/prof; mkdir -p "$P"
HX_PROFILE_DIR=$P "$E" plan -m "$S" --policy auto:cpu,ref > /dev/null 2>&1
for f in "$P"/profile-ref-*.txt "$P"/profile-cpu-*.txt; do
  case $f in *ref*) m=0.001 ;; *) m=1000 ;; esac
  awk -v m=$m '$1 == "op" && $5 > 1 { $8 = $8 * m } { print }' "$f" > "$f.new" && mv "$f.new" "$f"
done
out=$(HX_PROFILE_DIR=$P "$E" plan -m "$S" --policy auto:cpu,ref 2>&1)
echo "$out" | grep -q 'auto (prefill at .*): chose [a-z-]*:.*ref' && echo "$out" | grep -q 'auto (decode at .*): chose single:cpu' \
  && ok "auto with a crafted profile: prefill chooses a plan on ref, decode cpu" || bad "crafted profile not followed: $out"
out=$(HX_PROFILE_DIR=$P "$E" plan -m "$S" --policy auto:cpu,ref --mem host=$hc 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q "do not fit together: decode's choice for both" \
  && [ "$(echo "$out" | grep -c '^phase .*rule single:cpu;')" -eq 2 ] \
  && ok "  under --mem host=$hc they do not fit together: decode's single:cpu for both" \
  || bad "auto's phases under a host cap (exit $rc): $out"
# auto's cost model: devices on the host's cores (cpu, ref) share them, so a tensor-split of
# the two is predicted no faster than one of them alone (each op 1000 us on both, one 1 us:
# the launch cost is the fastest op's)
for f in "$P"/profile-ref-*.txt "$P"/profile-cpu-*.txt; do
  awk '$1 == "op" { $8 = n++ ? 1000 : 1 } { print }' "$f" > "$f.new" && mv "$f.new" "$f"
done
out=$(HX_PROFILE_DIR=$P "$E" plan -m "$S" --policy auto:cpu,ref 2>&1)
one=$(echo "$out" | sed -n 's/^  auto (prefill at .*): chose single:[a-z]*, predicted \([0-9.]*\) us.*/\1/p')
ts=$(echo "$out" | sed -n 's/^    rejected tensor-split:[^ ]* *predicted \([0-9.]*\) us.*/\1/p' | head -1)
[ -n "$one" ] && [ -n "$ts" ] && awk -v a="$ts" -v b="$one" 'BEGIN { exit !(a >= b) }' \
  && ok "  cpu and ref share the host's cores: tensor-split predicted $ts us >= single's $one us" \
  || bad "tensor-split of host-core devices predicted faster than one alone ($ts vs $one): $out"
expect "--mem host alone caps the host device too" 1 "share host memory|does not fit" \
  "$E" run -m "$S" -p hi -n 1 --mem host=64K
finish
