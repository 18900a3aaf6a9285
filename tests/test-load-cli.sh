#!/usr/bin/env bash
# test-load-cli.sh — weights load where they run, from the command line (docs/policies.md
# "Weights load where they run"): an `engine mkmodel --align` model whose q|k|v and gate|up
# parts lie apart in the file (the loader then fuses them as parts, never as a host copy) runs
# with the unpadded model's greedy tokens and passes `engine diff` against single:ref under
# single, fit, tensor-split (slices that cross the parts) and layer-split, on cpu, Vulkan and
# npu-sim where present; `--progress` prints each device's loading line up to 100% in run,
# chat, bench and serve, and nothing is printed without it when stderr is not a terminal;
# a bad --align is a usage error. tests/test-load.c checks the host bytes and the logits.
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?}
export HX_PROFILE_DIR=off
. "$(dirname "$0")/lib.sh"
V=$D/vocab/ggml-vocab-qwen2.gguf
need_file "$V" || finish
T=$(mktemp -d "${TMPDIR:-/tmp}/hx-load-XXXXXX")
trap 'rm -rf "$T"' EXIT
C=(-c 64 --batch 16)
have() { "$E" plan -m "$T/a.gguf" "${C[@]}" --policy "single:$1" > /dev/null 2>&1; }

# tiny: q 256 rows of 272 bytes (Q8_0, 256 wide), k and v 128 rows, gate and up 768: no part
# is a multiple of 64 KiB, so with --align 65536 padding follows each of them
"$E" mkmodel --shape tiny --type Q8_0 --vocab "$V" -o "$T/a.gguf" > /dev/null 2>&1 &&
  "$E" mkmodel --shape tiny --type Q8_0 --vocab "$V" --align 65536 -o "$T/p.gguf" > /dev/null 2>&1
if [ $? -ne 0 ]; then bad "mkmodel tiny (--align 65536) failed"; finish; fi
sa=$(stat -c %s "$T/a.gguf") sp=$(stat -c %s "$T/p.gguf")
[ "$sp" -gt $((sa + 4 * 5 * 32768)) ] && ok "mkmodel --align 65536 pads the tensors ($sa -> $sp bytes)" ||
  bad "mkmodel --align: $sa -> $sp bytes"
"$E" mkmodel --shape tiny --type Q8_0 --vocab "$V" --align 48 -o "$T/x.gguf" > "$T/err" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q 'power of two' "$T/err" && ok "mkmodel --align 48: usage error" ||
  bad "mkmodel --align 48 (exit $rc): $(cat "$T/err")"

ids() { "$E" run -m "$1" -p "Once upon a time" -n 10 --temp 0 "${C[@]}" --ids "${@:2}" 2>/dev/null | xargs; }
plans=("--backend cpu" "--backend ref")
if have vulkan; then
  plans+=("--backend vulkan" "--policy fit:vulkan --mem vulkan=2M"
    "--policy tensor-split:cpu=0.3,vulkan=0.7" "--policy layer-split:vulkan=0.5,cpu=0.5")
else
  skip "no Vulkan device (lavapipe): its plans are not checked"
fi
have npu-sim && plans+=("--backend npu-sim" "--policy gemm-offload:npu-sim")
# Under the sanitizers (CI's second run) each plan runs only engine diff on the padded model,
# which reads every part on the plan's devices and on ref: the tokens against the unpadded
# model are the Release run's (151936-token heads make each run slow under ASan).
sanitized && na "padded vs unpadded tokens: left to the Release run under the sanitizers"
for p in "${plans[@]}"; do
  if ! sanitized; then
    # shellcheck disable=SC2086
    a=$(ids "$T/a.gguf" $p) b=$(ids "$T/p.gguf" $p)
    [ -n "$a" ] && [ "$a" = "$b" ] && ok "$p: the padded model generates the unpadded one's tokens" ||
      bad "$p: ids '$b' (padded) vs '$a'"
  fi
  # shellcheck disable=SC2086
  "$E" diff -m "$T/p.gguf" $p -n 8 "${C[@]}" > "$T/diff" 2>&1; rc=$?
  [ $rc -eq 0 ] && ok "  engine diff passes on the padded model" ||
    bad "  engine diff $p (exit $rc): $(tail -4 "$T/diff")"
done

# ---- --progress --------------------------------------------------------------------------------
P=(--policy tensor-split:cpu=0.5,ref=0.5)
have vulkan && P=(--policy fit:vulkan --mem vulkan=2M)
"$E" run -m "$T/p.gguf" -p hi -n 2 "${C[@]}" "${P[@]}" --progress > /dev/null 2> "$T/err"; rc=$?
devs=$("$E" plan -m "$T/p.gguf" "${C[@]}" "${P[@]}" --summary 2>&1 | sed -n 's/^  \([a-z0-9:-]*\) *weights \([0-9.]*\) \([KMG]*i*B\).*/\1 \2/p' | awk '$2 > 0 {print $1}')
n=0
for d in $devs; do
  n=$((n + 1))
  grep -Eq "^engine run: loading weights: $d [0-9.]+/[0-9.]+ MiB +100%$" "$T/err" &&
    ok "run --progress ${P[*]}: $d's line reaches 100%: $(grep "weights: $d " "$T/err" | tail -1)" ||
    bad "run --progress: no 100% line for $d (exit $rc): $(cat "$T/err")"
done
[ $n -ge 2 ] && ok "  $n devices hold weights in that plan" || bad "  expected two devices with weights, got '$devs'"
bad_pct=$(grep 'loading weights' "$T/err" | awk '{p = $NF; sub("%", "", p); if (p + 0 > 100) print}')
[ -z "$bad_pct" ] && ok "  no line above 100%" || bad "  lines above 100%: $bad_pct"
"$E" run -m "$T/p.gguf" -p hi -n 2 "${C[@]}" "${P[@]}" > /dev/null 2> "$T/err"
grep -q 'loading weights' "$T/err" && bad "run without --progress, stderr a file: $(cat "$T/err")" ||
  ok "run without --progress, stderr not a terminal: no loading lines"
echo hi | "$E" chat -m "$T/p.gguf" -n 2 -c 64 --progress > /dev/null 2> "$T/err"
grep -Eq '^engine chat: loading weights: cpu .* 100%$' "$T/err" && ok "chat --progress" ||
  bad "chat --progress: $(cat "$T/err")"
"$E" bench -m "$T/p.gguf" -p 4 -n 2 -r 1 --progress > /dev/null 2> "$T/err"
grep -Eq '^engine bench: loading weights: cpu .* 100%$' "$T/err" && ok "bench --progress" ||
  bad "bench --progress: $(cat "$T/err")"
if "$E" serve --help 2>&1 | grep -q -- '--progress'; then
  "$E" serve -m "$T/p.gguf" --port 0 --ctx 64 --progress > /dev/null 2> "$T/err" &
  pid=$!
  for _ in $(seq 100); do grep -q '100%' "$T/err" && break; sleep 0.1; done
  kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null
  grep -Eq '^engine serve: loading weights: cpu .* 100%$' "$T/err" && ok "serve --progress" ||
    bad "serve --progress: $(cat "$T/err")"
else
  na "engine serve not built"
fi
finish
