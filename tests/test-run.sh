#!/usr/bin/env bash
# test-run.sh — `engine run` end to end on stories260K (a real trained model): greedy output
# must equal llama2.c's reference ids and text, on ref and cpu; bad input must fail cleanly.
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?}
M=$D/stories260K/stories260K.gguf
pass=0 fail=0
ok() { pass=$((pass+1)); echo "ok   $1"; }
bad() { fail=$((fail+1)); echo "FAIL $1"; }
want=$(grep '^generated_ids' "$D/stories260K/reference.txt" | cut -d: -f2 | xargs)
for b in cpu ref; do
  got=$("$E" run -m "$M" -p "Once upon a time" -n 60 --temp 0 --ids --backend $b 2>/dev/null | xargs)
  [ "$got" = "$want" ] && ok "greedy ids on $b match llama2.c" || bad "greedy ids on $b: $got"
done
text=$("$E" run -m "$M" -p "Once upon a time" -n 60 --temp 0 2>/dev/null)
want_text=$(sed -n '/BEGIN TEXT/,/END TEXT/p' "$D/stories260K/reference.txt" | sed -n 2,3p)
[ "Once upon a time$text" = "$want_text" ] && ok "streamed text matches llama2.c" || bad "text: $text"
# text and figures through one pipe: the text's last line ends before the figures' line
last=$("$E" run -m "$M" -p "Once upon a time" -n 60 --temp 0 2>&1 | tail -n 1)
case $last in prompt:*tokens/s*) ok "the figures follow the whole text through one pipe" ;;
  *) bad "last line through one pipe: '$last'" ;; esac
a=$("$E" run -m "$M" -p "Once" -n 20 --temp 0.9 --seed 7 --ids 2>/dev/null)
b=$("$E" run -m "$M" -p "Once" -n 20 --temp 0.9 --seed 7 --ids 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "sampling is deterministic for a seed" || bad "seeded runs differ: $a / $b"
# llama-2-tiny-random: F16, 32000-token SentencePiece vocabulary; random weights, so ref and
# cpu are compared with each other (both compute F16 weights in f32) rather than with text.
L=$D/misc/llama-2-tiny-random.gguf
lr=$("$E" run -m "$L" -p "Hello world" -n 16 --temp 0 --ids --backend ref 2>/dev/null | xargs)
lc=$("$E" run -m "$L" -p "Hello world" -n 16 --temp 0 --ids --backend cpu 2>/dev/null | xargs)
[ "$(echo "$lc" | wc -w)" -eq 16 ] && [ "$lr" = "$lc" ] && ok "llama-2-tiny-random runs, cpu ids = ref ids" || bad "llama-2-tiny: ref '$lr' cpu '$lc'"
# engine devices names the CPU by one rule (backends/cpu/cpu-features.c): the OS's name for it
# (/proc/cpuinfo "model name", or "Model" on Arm), else the CPUID brand string; and its count.
cpuline=$("$E" devices 2>/dev/null | grep -A1 '^  cpu ' | tail -1)
model=$(grep -m1 -E '^(model name|Model)[[:space:]]*:' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
ncpu=$(getconf _NPROCESSORS_ONLN)
if [ -n "$model" ]; then
  case "$cpuline" in
    *"host CPU: $model, $ncpu logical CPUs; "*" kernels"*) ok "engine devices names the CPU as the OS does: $model, $ncpu logical CPUs" ;;
    *) bad "engine devices cpu line: '$cpuline' (want the OS's name '$model', $ncpu logical CPUs)" ;;
  esac
else
  case "$cpuline" in
    *"host CPU: "?*", $ncpu logical CPUs; "*) ok "engine devices names the CPU (the OS gives no name; CPUID brand): $cpuline" ;;
    *) bad "engine devices cpu line: '$cpuline' (want a name and $ncpu logical CPUs)" ;;
  esac
fi
expect_fail() { # name, expected exit, args...
  local name=$1 code=$2; shift 2
  out=$("$E" "$@" 2>&1); rc=$?
  if [ $rc -eq "$code" ] && [ -n "$out" ]; then ok "$name (exit $rc)"; else bad "$name: exit $rc: $out"; fi
}
expect_fail "-n 0 rejected" 2 run -m "$M" -p hi -n 0
expect_fail "unknown flag rejected" 2 run -m "$M" -p hi --bogus
expect_fail "missing model file" 1 run -m /nonexistent.gguf -p hi
expect_fail "directory instead of file" 1 run -m "$D" -p hi
expect_fail "prompt longer than the context" 1 run -m "$M" -p "Once upon a time there was a little girl" -n 10 -c 8
# prompt + -n past the context: generates what fits (-c 8, a 7-token prompt: 2 tokens) and says so
errf=$(mktemp)
out=$("$E" run -m "$M" -p "Once upon a time there was" -n 10 -c 8 --temp 0 --ids 2>"$errf"); rc=$?
[ $rc -eq 0 ] && [ "$(echo "$out" | wc -w)" -eq 2 ] && grep -q "generating at most 2 tokens" "$errf" \
  && ok "prompt + -n past the context: the 2 tokens that fit, and a note" || bad "prompt + -n past -c: exit $rc '$out': $(cat "$errf")"
rm -f "$errf"
expect_fail "unknown policy before loading" 2 run -m /nonexistent.gguf -p hi --policy warp
expect_fail "vocab-only file" 1 run -m "$D/vocab/ggml-vocab-qwen2.gguf" -p hi
expect_fail "unknown command" 2 frobnicate
n_bad=0
for f in $(find "$D" -name '*.gguf'); do "$E" inspect "$f" > /dev/null 2>&1 || n_bad=$((n_bad+1)); done
[ $n_bad -eq 0 ] && ok "inspect reads every .gguf of the shared data" || bad "inspect failed on $n_bad files"
"$E" inspect "$D/qwen3/qwen3-micro-q8_0.gguf" | grep -q 'tokenizer.ggml.tokens.*\[151936 x string\]' && ok "inspect summarizes long arrays" || bad "inspect array summary"
T=$(mktemp); head -c 1000 "$M" > "$T"
expect_fail "inspect of a truncated file" 1 inspect "$T"; rm -f "$T"
# --grammar: on the Qwen3 vocabulary (qwen3-micro, random weights) the text is a sentence of the
# grammar, whole within -n, greedy and sampled; the figures line says what the grammar cost
Q=$D/qwen3/qwen3-micro-q8_0.gguf
G=$(mktemp --suffix=.gbnf)
cat >"$G" <<'EOF'
root ::= "{\"id\": " [1-9] [0-9]{0,3} ", \"tags\": [" tag (", " tag){0,4} "]}"
tag  ::= "\"" [a-z]{1,8} "\""
EOF
for args in "--temp 0" "--temp 1 --seed 3" "--temp 1 --seed 4 --top-k 0"; do
  errf=$(mktemp)
  # shellcheck disable=SC2086
  out=$("$E" run -m "$Q" -p "Give me an object:" -n 40 --grammar "$G" $args 2>"$errf"); rc=$?
  if [ $rc -eq 0 ] && echo "$out" | grep -Eqx '\{"id": [1-9][0-9]{0,3}, "tags": \["[a-z]{1,8}"(, "[a-z]{1,8}"){0,4}\]\}' &&
     grep -q '^grammar: .* ms choosing and matching .* tokens' "$errf"; then
    ok "--grammar ($args): $out"
  else
    bad "--grammar ($args): exit $rc, '$out': $(cat "$errf")"
  fi
  rm -f "$errf"
done
printf 'root ::= item\n' >"$G"
expect_fail "--grammar with an undefined rule names it" 1 run -m "$Q" -p hi --grammar "$G"
out=$("$E" run -m "$Q" -p hi --grammar "$G" 2>&1)
case $out in *"line 1: rule 'item' is used but not defined"*) ok "the grammar error names the line and the rule" ;;
  *) bad "grammar error: $out" ;; esac
expect_fail "--grammar of a missing file" 1 run -m "$Q" -p hi --grammar /nonexistent.gbnf
expect_fail "--grammar without a value" 2 run -m "$Q" -p hi --grammar
rm -f "$G"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
