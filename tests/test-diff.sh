#!/usr/bin/env bash
# test-diff.sh — `engine diff` on the shared models: every backend and policy present must
# compute what `ref` computes (per op within test-backend-ops' NMSE thresholds, logits within
# the whole-model bound, greedy tokens up to near ties), the JSON report must parse, a corrupted
# op must be found where it happened with exit status 1, a wrong NPU kernel must fail (also one
# that only the whole-model bound sees), and bad usage must fail with 2 before loading. A shared
# model that is missing is a skip (exit 77; a failure in CI, tests/lib.sh).
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/diff-models.sh"
export HX_PROFILE_DIR=${TMPDIR:-/tmp}/hx-test-diff.$$
trap 'rm -rf "$HX_PROFILE_DIR"' EXIT

policies="single:cpu gemm-offload:cpu tensor-split:cpu=0.5,ref=0.5 tensor-split:ref=0.3,cpu=0.7 auto:cpu,ref
layer-split:cpu=0.5,ref=0.5 phase-split:cpu,ref op-map:attn=ref,lm_head=ref,default=cpu cpu_only"
if "$E" devices 2>/dev/null | grep -q '^  vulkan *available'; then
  policies="$policies single:vulkan tensor-split:cpu=0.5,vulkan=0.5 gemm-offload:vulkan"
fi

diff_models
S=$D/stories260K/stories260K.gguf L=$D/misc/llama-2-tiny-random.gguf

for m in $models; do
  base=$(basename "$m")
  for p in $policies; do
    out=$("$E" diff -m "$m" --policy "$p" -n 6 --ops failed 2>&1); rc=$?
    summary=$(echo "$out" | grep -E 'over threshold$|^logits:|^top-1' | tr '\n' ';')
    [ $rc -eq 0 ] && ok "$base $p" || bad "$base $p: exit $rc: $summary $(echo "$out" | grep -E 'FAIL|first op|error' | head -3)"
  done
done

# The checks on stories260K (missing: a skip already, diff_models).
if [ -f "$S" ]; then
  # --backend and --ref spell the same thing as --policy single:
  out=$("$E" diff -m "$S" --backend ref --ref cpu -n 4 2>&1)
  [ $? -eq 0 ] && echo "$out" | grep -q 'target    verify@cpu:single:ref' && ok "--backend ref --ref cpu" || bad "--backend/--ref: $out"

  # JSON: parses, says pass, has every op and step.
  json=$("$E" diff -m "$S" -n 4 -o json 2>/dev/null)
  echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["pass"] is True and d["first_divergent"] is None, d
assert len(d["ops"]) >= 60 and d["n_steps"] == 4 and d["greedy_match"] == 4, d
assert all(o["ok"] for o in d["ops"])
w = d["whole_model"]
assert w["ok"] is True and 0 <= w["rest"] <= w["bound"] and w["model"] > 0, w
assert all(s["rest_nmse"] is not None and s["model_nmse"] > 0 for s in d["steps"]), d["steps"]
  ' && ok "json report" || bad "json report: $json"

  # An injected corruption is found at the op that produced it (every op is its own split under
  # verify: the 6th run of cpu is node 5), and the exit status is 1.
  out=$(HX_FAULT="dev=cpu,entry=run,mode=corrupt,after=5,count=1" "$E" diff -m "$S" -n 3 --ops failed 2>&1); rc=$?
  [ $rc -eq 1 ] && echo "$out" | grep -q 'first op over its threshold: prefill node 5 ' && ok "corruption found at its op (exit 1)" \
    || bad "corruption: exit $rc: $out"
  json=$(HX_FAULT="dev=cpu,entry=run,mode=corrupt,after=70,count=1" "$E" diff -m "$S" -n 3 -o json 2>/dev/null)
  echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
f = d["first_divergent"]
assert d["pass"] is False and f["phase"] == "decode" and f["node"] == 7 and not f["ok"], d
  ' && ok "corruption in decode, json" || bad "decode corruption json: $json"

  # A device failing mid-run with a fallback chain: diff still passes (the recovered run is right).
  out=$(HX_FAULT="dev=ref,entry=run,after=30,count=1" "$E" diff -m "$S" \
        --policy tensor-split:cpu=0.5,ref=0.5 --ref cpu --fallback cpu -n 6 --ops failed 2>&1); rc=$?
  [ $rc -eq 0 ] && echo "$out" | grep -q 're-running the batch' && ok "fault + fallback still passes" || bad "fault + fallback: exit $rc: $out"
fi

# A wrong NPU kernel must fail engine diff (npu-sim's `mutate` knob, docs/npu-backend.md §6).
# k0 leaves the first element out of every int32 sum: far outside every op's bound. acc+1 makes
# every sum one too large: on these F32/F16 models that stays within every op's bound (small
# against the weights' own int8 conversion error), and only the whole-model bound finds it.
if "$E" devices 2>/dev/null | grep -q '^  npu-sim *available'; then
  for m in "$S" "$L"; do
    base=$(basename "$m")
    [ -f "$m" ] || continue # a skip already (diff_models)
    out=$("$E" diff -m "$m" --backend npu-sim --ops failed 2>&1); rc=$?
    [ $rc -eq 0 ] && echo "$out" | grep -q '^whole-model bound: the rest .*: ok$' \
      && ok "$base npu-sim: within the whole-model bound" || bad "$base npu-sim: exit $rc: $(echo "$out" | grep -E 'over threshold$|^whole')"
    out=$(HX_NPU_SIM=mutate=k0 "$E" diff -m "$m" --backend npu-sim --ops failed 2>&1); rc=$?
    [ $rc -eq 1 ] && echo "$out" | grep -q '^first op over its threshold: prefill node .* on npu-sim' \
      && echo "$out" | grep -q '^whole-model bound: the rest .*: FAIL$' \
      && ok "$base npu-sim mutate=k0: ops over their bounds, whole model over its bound (exit 1)" \
      || bad "$base mutate=k0: exit $rc: $(echo "$out" | grep -E 'over threshold$|^first op|^whole')"
    out=$(HX_NPU_SIM=mutate=acc+1 "$E" diff -m "$m" --backend npu-sim --ops failed 2>&1); rc=$?
    [ $rc -eq 1 ] && echo "$out" | grep -q ' 0 over threshold$' \
      && echo "$out" | grep -q '^whole-model bound: the rest .*: FAIL$' \
      && ok "$base npu-sim mutate=acc+1: every op within its bound, the whole model not (exit 1)" \
      || bad "$base mutate=acc+1: exit $rc: $(echo "$out" | grep -E 'over threshold$|^first op|^whole')"
  done
else
  bad "npu-sim not available (it is always built)"
fi

expect_fail() { # name, expected exit, args...
  local name=$1 code=$2; shift 2
  out=$("$E" "$@" 2>&1); rc=$?
  if [ $rc -eq "$code" ] && [ -n "$out" ]; then ok "$name (exit $rc)"; else bad "$name: exit $rc: $out"; fi
}
expect_fail "unknown policy before loading" 2 diff -m /nonexistent.gguf --policy warp
expect_fail "verify given to diff" 2 diff -m /nonexistent.gguf --policy verify:cpu
expect_fail "unknown reference" 2 diff -m /nonexistent.gguf --ref nosuch
expect_fail "bad -o" 2 diff -m /nonexistent.gguf -o xml
expect_fail "ratios that do not add up" 2 diff -m /nonexistent.gguf --policy tensor-split:cpu=0.5,ref=0.6
expect_fail "missing model" 1 diff -m /nonexistent.gguf
finish
