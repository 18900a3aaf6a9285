#!/usr/bin/env bash
# test-presets.sh — every preset and every policy kind, on every model of ../shared/data,
# through `engine diff` as shipped — its default 16 steps, its default bounds (each op within
# its device's threshold, core/numerics.h; the logits within the whole-model bound,
# docs/policies.md; greedy tokens up to near ties) — with a fallback chain that substitutes
# what this machine lacks: `npu` -> npu-sim, `gpu` -> the best GPU backend (Vulkan on lavapipe here), else the
# next of the chain. Asserts exit 0, that every absent device's substitution was logged and
# that the substitute ran. A policy that cannot run here at all (its whole chain absent) is
# reported as such on its own line and in the summary, never skipped silently. `verify` itself
# (what diff wraps every target in) is also run through `engine run`, which must produce
# exactly the tokens of the policy it wraps. A shared model that is missing is a skip (exit 77;
# a failure in CI, tests/lib.sh), never dropped silently.
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/diff-models.sh"
export HX_PROFILE_DIR=${TMPDIR:-/tmp}/hx-test-presets.$$
trap 'rm -rf "$HX_PROFILE_DIR"' EXIT
cannot=0 ties=0 nobound=0
FB=npu-sim,vulkan,cpu

devs=$("$E" devices 2>/dev/null)
have() { echo "$devs" | grep -q "^  $1 *available"; }
gpu=""
for b in hip vulkan; do have $b && { gpu=$b; break; }; done
# What each policy name resolves to here, and the substitution that must be logged.
sub_npu="" npu_dev=npu
if ! have npu; then
  for f in ${FB//,/ }; do have "$f" && { npu_dev=$f; break; }; done
  sub_npu="device 'npu' unavailable .*; substituting $npu_dev"
  have "$npu_dev" || npu_dev=""
fi
sub_gpu="" gpu_dev=$gpu
if [ -z "$gpu" ]; then
  for f in ${FB//,/ }; do have "$f" && { gpu_dev=$f; break; }; done
  sub_gpu="device 'gpu' unavailable .*; substituting $gpu_dev"
  have "$gpu_dev" || gpu_dev=""
fi
echo "here: npu -> ${npu_dev:-nothing}${sub_npu:+ (substituted)}, gpu -> ${gpu_dev:-nothing}${sub_gpu:+ (substituted)}"

# policy | devices it names (npu, gpu; cpu is always present)
policies="
npu_only|npu
gpu_only|gpu
cpu_only|
layer_by_layer|gpu
attention_on_npu|npu
ffn_on_npu|npu
qkv_on_npu|npu
prefill_npu_decode_gpu|npu gpu
auto|
single:npu|npu
gemm-offload:npu|npu
op-map:qkv=npu,o=npu,attn=gpu,gate_up=gpu,down=npu,lm_head=gpu,default=cpu|npu gpu
layer-split:npu=0.5,gpu=0.5|npu gpu
phase-split:npu,gpu|npu gpu
phase-split:gpu,npu|npu gpu
tensor-split:cpu=0.4,npu=0.3,gpu=0.3|npu gpu
auto:npu,gpu|npu gpu
"

diff_models

# Under the sanitizers (lib.sh's sanitized: several times slower) the models take the policies in
# turn: every policy runs on half the models, every model on half the policies (test-presets was
# ~200 s of the ASan stage). In CI (CI=true, .ci/run runs both builds) the Release run takes the
# other half, so each (model, policy) pair runs once in CI, under one build or the other; outside
# CI the Release run has the whole matrix.
half=""
if sanitized; then half=0; elif in_ci; then half=1; fi
[ -n "$half" ] && na "each policy runs on half the models here (parity $half; the other half in the other CI build; outside CI the Release run has all)"
t0=$SECONDS mi=0
for m in $models; do
  base=$(basename "$m") mi=$((mi + 1)) pi=0
  while IFS='|' read -r p names; do
    [ -n "$p" ] || continue
    pi=$((pi + 1))
    [ -n "$half" ] && [ $(((mi + pi) % 2)) -ne "$half" ] && continue
    why="" want=""
    for n in $names; do
      case $n in
        npu) [ -n "$npu_dev" ] || why="$why no npu and no substitute in $FB;"
             [ -n "$sub_npu" ] && want="$want|$sub_npu"; dv=$npu_dev ;;
        gpu) [ -n "$gpu_dev" ] || why="$why no gpu and no substitute in $FB;"
             [ -n "$sub_gpu" ] && want="$want|$sub_gpu"; dv=$gpu_dev ;;
      esac
    done
    if [ -n "$why" ]; then
      cannot=$((cannot+1)); echo "CANNOT RUN $base $p:$why"; continue
    fi
    s0=$SECONDS
    out=$("$E" diff -m "$m" --policy "$p" --fallback $FB --ops failed 2>&1); rc=$?
    dt=$((SECONDS-s0))
    err=""
    [ $rc -eq 0 ] || err="exit $rc;"
    IFS='|' read -r -a subs <<< "${want#|}"
    for pat in "${subs[@]}"; do
      [ -n "$pat" ] && ! echo "$out" | grep -q "hx warn: sched: $pat" && err="$err substitution not logged ($pat);"
    done
    # auto picks the fastest plan among its candidates (here single:cpu, lavapipe and npu-sim
    # being far slower), so for it only the substitution and the diff verdict are checked
    case $p in auto*) ;; *)
    for n in $names; do
      case $n in npu) dv=$npu_dev ;; gpu) dv=$gpu_dev ;; esac
      echo "$out" | grep -qE "^  target .*\(devices ([^;]*,)?$dv[,;]" || err="$err $n ($dv) did not run;"
    done ;;
    esac
    tie=$(echo "$out" | awk '/\(near tie\)/ {printf " step %s: margin %s, logits max abs err %s;", $2, $11, $4}')
    [ -n "$tie" ] && ties=$((ties+1))
    # the rest of the logits error (what the devices' weights do not explain) against its bound;
    # "none": the modelled error sits in too few steps for a bound at z = 5 (docs/policies.md)
    wm=$(echo "$out" | sed -n 's/^whole-model bound: the rest \([^ ]*\) <= \([^ ]*\) x the error model.s \([^ ]*\) .*/rest\/model \1\/\3, bound \2x/p')
    if [ -z "$wm" ]; then
      wm=$(echo "$out" | sed -n 's/^whole-model bound: none: .* is in \([^ ]*\) effective steps.*/NO whole-model bound (\1 effective steps)/p')
      [ -n "$wm" ] && nobound=$((nobound+1)) || err="$err no whole-model bound line;"
    fi
    if [ -z "$err" ]; then
      ok "$base $p (${dt}s, $wm)${tie:+ near tie:$tie}"
    else
      bad "$base $p: $err $(echo "$out" | grep -E 'over threshold$|^logits:|^whole|^top-1|FAIL|error|MISMATCH' | head -6 | tr '\n' ';')"
    fi
  done <<< "$policies"
done
echo "diff matrix: $((SECONDS-t0)) s"

# verify through engine run: the same tokens as the policy it wraps, no divergent op.
S=$D/stories260K/stories260K.gguf
[ -f "$S" ] && for p in npu_only prefill_npu_decode_gpu tensor-split:cpu=0.4,npu=0.3,gpu=0.3; do
  [ -n "$npu_dev" ] && [ -n "$gpu_dev" ] || { cannot=$((cannot+1)); echo "CANNOT RUN verify:$p: no npu or gpu"; continue; }
  a=$("$E" run -m "$S" -p "Once upon a time" -n 12 --temp 0 --policy "$p" --fallback $FB 2>/dev/null); ra=$?
  b=$("$E" run -m "$S" -p "Once upon a time" -n 12 --temp 0 --policy "verify:$p" --fallback $FB 2>"$HX_PROFILE_DIR.err"); rb=$?
  # No op may diverge: numerics.h counts the degrees of freedom of a matmul's error by
  # activation rows, so npu-sim's INT8 output head (one shared error direction) is within it.
  div=$(grep 'verify: first divergent op' "$HX_PROFILE_DIR.err")
  if [ $ra -eq 0 ] && [ $rb -eq 0 ] && [ "$a" = "$b" ] && [ -n "$a" ] && [ -z "$div" ]; then
    ok "engine run --policy verify:$p: the tokens of $p, every op within its threshold"
  else
    bad "verify:$p: exit $ra/$rb, '$a' vs '$b': $(grep -E 'verify|error' "$HX_PROFILE_DIR.err" | head -3)"
  fi
  rm -f "$HX_PROFILE_DIR.err"
done

# layer_by_layer alternates --backend with cpu: without --backend that is gpu, and
# --backend cpu is a usage error naming the preset (not "cpu named twice").
out=$("$E" diff -m /nonexistent.gguf --policy layer_by_layer --backend cpu 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q 'layer_by_layer alternates' && ok "layer_by_layer --backend cpu: usage error (exit 2)" \
  || bad "layer_by_layer --backend cpu: exit $rc: $out"
# Without --fallback an absent device is an error, not a substitution.
if [ -n "$sub_npu" ] && [ -f "$S" ]; then
  out=$("$E" diff -m "$S" --policy npu_only -n 2 2>&1); rc=$?
  [ $rc -eq 1 ] && echo "$out" | grep -q "npu" && ! echo "$out" | grep -q substituting && ok "npu_only without --fallback: an error (exit 1)" \
    || bad "npu_only without --fallback: exit $rc: $out"
fi

echo "$cannot cannot run here, $ties with a near tie, $nobound without a whole-model bound ($((SECONDS)) s)"
finish
