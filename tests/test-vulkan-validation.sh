#!/usr/bin/env bash
# test-vulkan-validation.sh — the Vulkan backend under the Khronos validation layer: a share of
# test-vulkan (every kernel variant and op, a model, the error paths) and a short
# `engine run --backend vulkan`, all with VK_LAYER_KHRONOS_validation enabled both through the
# loader (VK_INSTANCE_LAYERS: the layer prints "Validation Error: ...") and through the
# backend's debug messenger (HX_VK_VALIDATION=1: "hx error: vulkan validation: ..."). Any
# validation error fails the test, as does a failing test or wrong greedy ids.
# Skipped (exit 77, says why; a failure in CI, tests/lib.sh) when no Vulkan device or no
# validation layer is installed (Debian: vulkan-validationlayers; scripts/setup-debian.sh
# installs it).
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?} B=${HX_BUILD:-$(dirname "$E")}
T=$B/tests/test-vulkan
. "$(dirname "$0")/lib.sh"

if ! "$E" devices 2>/dev/null | grep -q '^  vulkan *available'; then
  skip "no usable Vulkan device: $("$E" devices 2>&1 | grep -A1 '^  vulkan' | tr -s ' ' | head -2 | xargs)"
  finish
fi
have_layer=0
for f in /usr/share/vulkan/explicit_layer.d/*validation*.json /etc/vulkan/explicit_layer.d/*validation*.json; do
  [ -e "$f" ] && have_layer=1
done
if [ $have_layer -eq 0 ]; then
  skip "the Vulkan validation layer is not installed (apt-get install vulkan-validationlayers)"
  finish
fi
[ -x "$T" ] || { echo "FAIL: $T not built"; echo "0 passed, 1 failed"; exit 1; }

export VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation HX_VK_VALIDATION=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# errors the layer or the messenger reported in $log (the messenger also logs warnings,
# e.g. performance hints, at "hx warn": those are printed, not failed)
verrors() { grep -E 'Validation Error|hx error: vulkan validation' "$log"; }

check() { # name, command...
  local name=$1; shift
  "$@" >"$log" 2>&1; local rc=$?
  local n; n=$(verrors | wc -l)
  if [ $rc -eq 0 ] && [ "$n" -eq 0 ]; then
    ok "$name: no validation errors ($(grep -c 'validation layer enabled' "$log") instance(s) validated)"
  else
    bad "$name: exit $rc, $n validation error(s)"; verrors | head -5; [ $rc -ne 0 ] && tail -5 "$log"
  fi
  grep 'hx warn: vulkan validation' "$log" | grep -v "env var 'VK_INSTANCE_LAYERS'" | head -3 | cut -c1-200
}

for t in devices matmul_variants ops_norm_rope_eltwise_embed ops_attention stories_prefill \
         stories_prefill_gpu_kernels qwen3_tern_tq2_0 tern_i2_s_equals_tq2_0 errors_oom_and_knobs \
         gemm_variants gemv_variants gemv_sg_red; do
  check "test-vulkan $t" env HX_LOG_LEVEL=info "$T" "$t"
done

M=$D/stories260K/stories260K.gguf
want=$(grep '^generated_ids' "$D/stories260K/reference.txt" | cut -d: -f2 | xargs | cut -d' ' -f1-24)
check "engine run --backend vulkan" env HX_LOG_LEVEL=info "$E" run -m "$M" -p "Once upon a time" -n 24 --temp 0 --ids --backend vulkan
got=$(grep -E '^[0-9]+( [0-9]+)*$' "$log" | tail -1 | xargs)
[ "$got" = "$want" ] && ok "greedy ids under validation match llama2.c" || bad "greedy ids under validation: '$got' want '$want'"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
