#!/usr/bin/env bash
# test-cli-edges.sh — what a newcomer hits past the usual cases, each from a user's report:
# a tensor-split share that rounds to no rows gives its rows to the others; a phase-split run
# names the devices of both phases; a policy "file" that is a directory, `tokenize` without
# text and `devices -m` of a missing, truncated or directory file are errors; `bench` says when
# its tests go past the model's trained context; the bandwidth probe stays within 1 GiB of
# memory; output that cannot be written (a full disk, a closed stdout) is exit 1 with a reason;
# a prompt with more tokens than bytes runs; run and diff take the prompt from a file or stdin
# (-f), of any length.
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?}
. "$(dirname "$0")/lib.sh"
M=$D/stories260K/stories260K.gguf
need_file "$M" || finish
T=$(mktemp -d "${TMPDIR:-/tmp}/hx-edges-XXXXXX")
trap 'rm -rf "$T"' EXIT

# ---- tensor-split: a 1% share on 64-row matrices rounds to no rows; they go to the other -----
plan=$("$E" plan -m "$M" --policy tensor-split:cpu=0.01,ref=0.99 2>&1); rc=$?
q=$(echo "$plan" | awk '/^phase prefill/{p=1} p && /^  split [0-9]+ on /{dev=$4} p && /L0  matmul +qkv/{print dev; exit}')
[ $rc -eq 0 ] && [ "$q" = "ref:" ] && ok "tensor-split:cpu=0.01,ref=0.99: the qkv matmul runs on ref, which holds all its rows" \
  || bad "tensor-split 1%: qkv on '$q' (exit $rc): $(echo "$plan" | head -8)"
a=$("$E" run -m "$M" -p "Once upon a time" -n 8 --temp 0 --ids --policy tensor-split:cpu=0.01,ref=0.99 2>/dev/null | xargs)
b=$("$E" run -m "$M" -p "Once upon a time" -n 8 --temp 0 --ids --backend ref 2>/dev/null | xargs)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "  and it generates ref's tokens ($a)" || bad "  tensor-split 1% ids '$a' vs ref '$b'"

# ---- phase-split: both phases' devices in run's summary ---------------------------------------
"$E" run -m "$M" -p "Once upon a time" -n 4 --temp 0 --policy phase-split:ref,cpu > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 0 ] && grep -q "devices ref (prefill), cpu (decode)" "$T/err" && ok "run --policy phase-split:ref,cpu names ref (prefill) and cpu (decode)" \
  || bad "phase-split devices (exit $rc): $(tail -1 "$T/err")"

# ---- bad input: clear errors, non-zero exits ----------------------------------------------------
expect() { # name, exit, message regex, args...
  local name=$1 code=$2 re=$3; shift 3
  out=$("$E" "$@" 2>&1); rc=$?
  [ $rc -eq "$code" ] && echo "$out" | grep -Eq "$re" && ok "$name (exit $rc)" || bad "$name: exit $rc: $out"
}
expect "--policy @DIR is refused as a directory" 2 "is a directory, not a file" run -m "$M" -p hi --policy "@$T"
expect "tokenize without -p or -f" 2 "no text given" tokenize -m "$M"
expect "tokenize -p '' is fine: []" 0 '^\[\]$' tokenize -m "$M" -p ""
expect "devices -m of a missing file" 1 "cannot read the model '/nonexistent.gguf'" devices -m /nonexistent.gguf
head -c 100000 "$M" > "$T/cut.gguf"
expect "devices -m of a truncated file: exit 1 too (was 0)" 1 "engine devices: NPU kernel coverage: cannot load .*lies outside the file" devices -m "$T/cut.gguf"
expect "devices -m of a directory" 1 "cannot load .*is not a regular file" devices -m "$T"
expect "devices -m without its value" 2 "option -m needs a value" devices -m
expect "-n 0 says what -n takes" 2 "invalid value '0' for -n \(a whole number from 1 to 16777216\)" run -m "$M" -p hi -n 0
expect "an overflowing -c says what -c takes" 2 "for -c \(a whole number from 1 to" run -m "$M" -p hi -c 99999999999999999999
expect "--top-p 2 says the range" 2 "invalid value '2' for --top-p \(a number from 0 to 1\)" run -m "$M" -p hi --top-p 2
printf 'single:cpu # a comment\n' > "$T/pol"
expect "--policy @FILE with a comment still works" 0 "" run -m "$M" -p hi -n 2 --policy "@$T/pol"

# ---- output that cannot be written (a full disk, a closed stdout) is an error, not exit 0 ------
for args in "run -m $M -p hi -n 200" "run -m $M -p hi -n 4 --ids" "inspect $M" "devices" "tokenize -m $M -p hi" "--version"; do
  # shellcheck disable=SC2086
  "$E" $args > /dev/full 2> "$T/err"; rc=$?
  [ $rc -eq 1 ] && grep -q "cannot write the output to stdout: No space left on device" "$T/err" \
    && ok "engine $(echo "$args" | cut -d' ' -f1) > /dev/full: exit 1, says why" || bad "engine $args > /dev/full: exit $rc: $(tail -1 "$T/err")"
done
"$E" run -m "$M" -p hi -n 4 >&- 2> "$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "cannot write the output to stdout" "$T/err" && ok "run with stdout closed: exit 1, says why" \
  || bad "run with stdout closed: exit $rc: $(tail -1 "$T/err")"

# ---- a prompt with more tokens than bytes: invalid UTF-8 is U+FFFD, 2 tokens per byte in Falcon's
# byte-level BPE; run and diff read past their ids before sizing them by the tokenizer's count ----
F=$T/falcon.gguf
if need_file "$D/vocab/ggml-vocab-falcon.gguf" &&
   "$E" mkmodel --shape tiny --vocab "$D/vocab/ggml-vocab-falcon.gguf" --type Q8_0 -o "$F" > /dev/null 2>&1; then
  P=$(printf '\xff%.0s' $(seq 100))
  want=$("$E" tokenize -m "$F" -p "$P" --add-special | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
  out=$("$E" run -m "$F" -p "$P" -n 4 --temp 0 --ids 2> "$T/err"); rc=$?
  [ "$want" -gt 108 ] && [ $rc -eq 0 ] && [ "$(echo "$out" | wc -w)" -eq 4 ] && grep -q "^prompt: $want tokens" "$T/err" \
    && ok "run: 100 bytes of 0xff are $want tokens (tokenize says so), 4 ids generated" \
    || bad "run 100 x 0xff on a Falcon vocabulary: exit $rc, tokenize $want, '$out': $(tail -1 "$T/err")"
  "$E" diff -m "$F" -p "$P" -n 2 -o json > "$T/diff.json" 2> "$T/err"; rc=$?
  got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompt_tokens"])' "$T/diff.json" 2>/dev/null)
  [ $rc -eq 0 ] && [ "$got" = "$want" ] && ok "diff: the same prompt is $got tokens and passes" \
    || bad "diff 100 x 0xff: exit $rc, prompt_tokens '$got' (want $want): $(tail -1 "$T/err")"
else
  bad "mkmodel with the Falcon vocabulary failed"
fi

# ---- -f FILE / -f -: the prompt from a file or stdin, byte for byte as -p would give it ------------
printf 'Once upon a time' > "$T/p.txt"
a=$("$E" run -m "$M" -p "Once upon a time" -n 8 --temp 0 --ids 2>/dev/null)
b=$("$E" run -m "$M" -f "$T/p.txt" -n 8 --temp 0 --ids 2>/dev/null)
c=$("$E" run -m "$M" -f - -n 8 --temp 0 --ids < "$T/p.txt" 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && ok "run -f FILE and -f - give -p's ids ($a)" || bad "run -f: -p '$a', -f '$b', -f - '$c'"
d=$("$E" diff -m "$M" -f - -n 2 -o json < "$T/p.txt" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt_tokens"])' 2>/dev/null)
[ "$d" = 5 ] && ok "diff -f -: the 5 tokens of BOS + 'Once upon a time'" || bad "diff -f -: prompt_tokens '$d'"
# 150 KB: more than one argument may hold (exec refuses -p with it), read whole and then refused by
# the context, by its token count
python3 -c "print(' '.join(['a'] * 75000), end='')" > "$T/big.txt"
"$E" run -m "$M" -f "$T/big.txt" -n 2 > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "the prompt is 75001 tokens, longer than the context of 2048" "$T/err" \
  && ok "run -f of 150 KB: read whole (75001 tokens), refused by the context" || bad "run -f 150 KB: exit $rc: $(tail -1 "$T/err")"
printf 'a\0b' > "$T/nul.txt"
expect "-f of a file with a NUL byte" 2 "NUL byte at offset 1" run -m "$M" -f "$T/nul.txt"
expect "-f of a directory" 1 "cannot read the prompt from '$T': Is a directory" run -m "$M" -f "$T"
expect "-f and -p together" 2 "either -p TEXT or -f FILE" run -m "$M" -f "$T/p.txt" -p hi

# ---- bench: past the trained context it says so; the probe's buffer is at most 1 GiB ------------
"$E" bench -m "$M" -p 2100 -n 0 -r 1 --bw-gbs 10 --no-verify > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 0 ] && grep -q "trained on a context of 2048 tokens; these tests reach position 2100" "$T/err" \
  && ok "bench -p 2100 on a 2048-context model runs and says it is past the trained context" || bad "bench past context (exit $rc): $(tail -2 "$T/err")"
out=$("$E" bench -m "$M" -p 0 -n 2 -r 1 --no-verify 2>/dev/null); rc=$?
mib=$(echo "$out" | sed -n 's/.* \([0-9]*\) MiB buffer.*/\1/p' | head -1)
[ $rc -eq 0 ] && [ -n "$mib" ] && [ "$mib" -le 1024 ] && ok "bench: the bandwidth probe's buffer is $mib MiB (<= 1 GiB)" || bad "bench probe buffer '$mib' (exit $rc)"
finish
