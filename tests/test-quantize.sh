#!/usr/bin/env bash
# test-quantize.sh — `engine quantize` and `engine mkmodel` end to end: stories260K (a real
# trained model) to Q8_0 and back keeps llama2.c's greedy ids, re-quantizing the round trip
# is byte-identical, every type loads and runs, the ternary test model converts to bitnet.cpp's
# I2_S and ggml's Q2_0 and back exactly, mkmodel is deterministic for a seed, and bad input
# (malformed I2_S and PrismML-layout Q2_0 files among it) fails cleanly with a message, a
# non-zero exit and an untouched output file.
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?}
M=$D/stories260K/stories260K.gguf
VOC=$M   # a 512-token SentencePiece vocabulary keeps the mkmodel tests fast
T=$(mktemp -d "${TMPDIR:-/tmp}/hx-quantize-XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass+1)); echo "ok   $1"; }
bad() { fail=$((fail+1)); echo "FAIL $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
# tensor type of NAME in FILE, from `engine inspect`
ttype() { "$E" inspect "$1" | awk -v n="$2" '$2 == n { print $3 }'; }
kv() { "$E" inspect "$1" | awk -v k="$2" '$1 == k { print $3 }'; }
ids() { "$E" run -m "$1" -p "Once upon a time" -n "${2:-60}" --temp 0 --ids 2>/dev/null | xargs; }

want=$(grep '^generated_ids' "$D/stories260K/reference.txt" | cut -d: -f2 | xargs)

# ---- quantize: Q8_0 and back ---------------------------------------------------------------
"$E" quantize "$M" "$T/q8.gguf" Q8_0 --progress 2> "$T/q8.err"; rc=$?
check "quantize to Q8_0 exits 0" "[ $rc -eq 0 ]"
check "Q8_0 is smaller than a third of F32" "[ \$(stat -c %s '$T/q8.gguf') -lt \$(( \$(stat -c %s '$M') / 3 + 4096 )) ]"
check "progress shows tensor 48/48 and MB" "grep -q 'tensor 48/48 .* MB' '$T/q8.err'"
check "summary gives sizes before and after" "grep -q 'size 1.1[0-9] MB -> 0.3[0-9] MB' '$T/q8.err'"
check "rows of 172 fall back to F16, and it says so" "grep -q 'blk.0.ffn_down.weight has rows of 172.*stored as F16' '$T/q8.err'"
check "matrices are Q8_0" "[ \"\$(ttype '$T/q8.gguf' blk.3.attn_q.weight)\" = Q8_0 ] && [ \"\$(ttype '$T/q8.gguf' output.weight)\" = Q8_0 ]"
check "the fallback tensor is F16" "[ \"\$(ttype '$T/q8.gguf' blk.0.ffn_down.weight)\" = F16 ]"
check "norms stay F32" "[ \"\$(ttype '$T/q8.gguf' blk.0.attn_norm.weight)\" = F32 ] && [ \"\$(ttype '$T/q8.gguf' output_norm.weight)\" = F32 ]"
check "general.file_type = 7 (MOSTLY_Q8_0), quantization_version 2" "[ \"\$(kv '$T/q8.gguf' general.file_type)\" = 7 ] && [ \"\$(kv '$T/q8.gguf' general.quantization_version)\" = 2 ]"
check "alignment 32 and every other key kept" "$E inspect '$T/q8.gguf' | grep -q 'alignment 32, 21 metadata keys, 48 tensors'"
got=$(ids "$T/q8.gguf")
check "Q8_0 greedy ids equal llama2.c's reference (60 tokens)" "[ \"$got\" = \"$want\" ]"
[ "$got" = "$want" ] || echo "   got:  $got"
"$E" quantize "$T/q8.gguf" "$T/back.gguf" F32 2> /dev/null
check "back to F32: the original's size (give or take the two new keys)" "[ \$(( \$(stat -c %s '$T/back.gguf') - \$(stat -c %s '$M') )) -ge 0 ] && [ \$(( \$(stat -c %s '$T/back.gguf') - \$(stat -c %s '$M') )) -le 128 ]"
check "back to F32: file_type 0, no quantization_version" "[ \"\$(kv '$T/back.gguf' general.file_type)\" = 0 ] && [ -z \"\$(kv '$T/back.gguf' general.quantization_version)\" ]"
check "back to F32: greedy ids equal the Q8_0 model's" "[ \"\$(ids '$T/back.gguf')\" = \"$got\" ]"
for b in cpu ref; do
  check "back to F32 on $b: ids equal the reference" "[ \"\$($E run -m '$T/back.gguf' -p 'Once upon a time' -n 60 --temp 0 --ids --backend $b 2>/dev/null | xargs)\" = \"$want\" ]"
done
"$E" quantize "$T/back.gguf" "$T/q8b.gguf" Q8_0 2> /dev/null
check "F32 -> Q8_0 -> F32 -> Q8_0 is byte-identical to the first Q8_0" "cmp -s '$T/q8.gguf' '$T/q8b.gguf'"
"$E" quantize "$M" "$T/q8t1.gguf" Q8_0 --threads 1 2> /dev/null
check "the thread count does not change the bytes" "cmp -s '$T/q8.gguf' '$T/q8t1.gguf'"
"$E" quantize "$M" "$T/plain.gguf" Q8_0 2> "$T/plain.err"
check "no progress line when stderr is not a terminal" "! grep -q 'tensor 1/48' '$T/plain.err' && grep -q 'size' '$T/plain.err'"

# ---- every type, and the per-tensor overrides ---------------------------------------------
for ty in F16 BF16 Q4_0 Q4_K Q5_K Q6_K TQ1_0 TQ2_0 Q1_0 Q2_0 I2_S; do
  "$E" quantize "$M" "$T/$ty.gguf" $ty 2> "$T/$ty.err"; rc=$?
  n=$("$E" run -m "$T/$ty.gguf" -p "Once upon a time" -n 8 --temp 0 --ids 2>/dev/null | wc -w)
  check "quantize to $ty: exit 0, loads and generates 8 ids" "[ $rc -eq 0 ] && [ $n -eq 8 ]"
done
check "F16 keeps the greedy ids of F32" "[ \"\$(ids '$T/F16.gguf' 30)\" = \"\$(echo $want | cut -d' ' -f1-30)\" ]"
check "Q4_K on rows of 64 falls back to Q4_0" "[ \"\$(ttype '$T/Q4_K.gguf' blk.0.attn_q.weight)\" = Q4_0 ] && grep -q 'stored as Q4_0' '$T/Q4_K.err'"
check "TQ2_0: token_embd and output default to Q8_0" "[ \"\$(ttype '$T/TQ2_0.gguf' token_embd.weight)\" = Q8_0 ] && [ \"\$(ttype '$T/TQ2_0.gguf' output.weight)\" = Q8_0 ]"
check "TQ2_0 file_type 37" "[ \"\$(kv '$T/TQ2_0.gguf' general.file_type)\" = 37 ]"
"$E" quantize "$M" "$T/mix.gguf" Q4_0 --embd-type Q8_0 --output-type F16 2> /dev/null
check "--embd-type and --output-type apply" "[ \"\$(ttype '$T/mix.gguf' token_embd.weight)\" = Q8_0 ] && [ \"\$(ttype '$T/mix.gguf' output.weight)\" = F16 ] && [ \"\$(ttype '$T/mix.gguf' blk.1.ffn_up.weight)\" = Q4_0 ]"
"$E" quantize "$D/qwen3/qwen3-tern-f16.gguf" "$T/tern.gguf" TQ2_0 --embd-type Q8_0 2> /dev/null
check "ternary F16 -> TQ2_0: 14 TQ2_0 matrices, greedy ids of the reference TQ2_0 model" \
  "[ \"\$($E inspect '$T/tern.gguf' | awk '\$3 == \"TQ2_0\"' | wc -l)\" -eq 14 ] && [ \"\$(ids '$T/tern.gguf' 16)\" = \"\$(ids '$D/qwen3/qwen3-tern-tq2_0.gguf' 16)\" ]"
check "I2_S on rows of 64 and 172 falls back to Q8_0, and says so" "[ \"\$(ttype '$T/I2_S.gguf' blk.0.attn_q.weight)\" = Q8_0 ] && grep -q 'not a multiple of I2_S.s block of 128: stored as Q8_0' '$T/I2_S.err'"
check "Q2_0 on rows of 64: Q2_0" "[ \"\$(ttype '$T/Q2_0.gguf' blk.0.attn_q.weight)\" = Q2_0 ]"
check "Q5_K on rows of 64 falls back to Q8_0; file_type 16" "[ \"\$(ttype '$T/Q5_K.gguf' blk.0.attn_q.weight)\" = Q8_0 ] && [ \"\$(kv '$T/Q5_K.gguf' general.file_type)\" = 16 ]"
"$E" quantize "$D/qwen3/qwen3-tern-f16.gguf" "$T/tern-q5k.gguf" Q5_K 2> /dev/null
"$E" quantize "$T/tern-q5k.gguf" "$T/tern-q5k-f32.gguf" F32 2> /dev/null
"$E" quantize "$T/tern-q5k-f32.gguf" "$T/tern-q5k2.gguf" Q5_K 2> /dev/null
check "ternary F16 -> Q5_K: 15 Q5_K tensors; Q5_K -> F32 -> Q5_K gives the same ids" \
  "[ \"\$($E inspect '$T/tern-q5k.gguf' | awk '\$3 == \"Q5_K\"' | wc -l)\" -eq 15 ] && [ \"\$(ids '$T/tern-q5k2.gguf' 16)\" = \"\$(ids '$T/tern-q5k.gguf' 16)\" ]"

# ---- bitnet.cpp's I2_S and ggml's Q2_0 on the ternary test model (one scale per matrix) ----
TF=$D/qwen3/qwen3-tern-f16.gguf TQ=$D/qwen3/qwen3-tern-tq2_0.gguf
for ty in I2_S Q2_0; do
  "$E" quantize "$TF" "$T/tern-$ty.gguf" $ty --embd-type Q8_0 2> /dev/null; rc=$?
  n=$("$E" run -m "$T/tern-$ty.gguf" -p "Once upon a time" -n 16 --temp 0 --ids 2>/dev/null | wc -w)
  check "ternary F16 -> $ty: exit 0, 14 $ty matrices, generates 16 ids" "[ $rc -eq 0 ] && [ \"\$($E inspect '$T/tern-$ty.gguf' | awk '\$3 == \"$ty\"' | wc -l)\" -eq 14 ] && [ $n -eq 16 ]"
  "$E" quantize "$T/tern-$ty.gguf" "$T/tern-$ty-f16.gguf" F16 --embd-type Q8_0 2> /dev/null
  "$E" quantize "$T/tern-$ty-f16.gguf" "$T/tern-$ty-again.gguf" $ty --embd-type Q8_0 2> /dev/null
  check "$ty -> F16 -> $ty is byte-identical" "cmp -s '$T/tern-$ty.gguf' '$T/tern-$ty-again.gguf'"
done
# I2_S is bit for bit the TQ2_0 model here (test-qwen3 compares the logits): the same greedy ids
check "ternary I2_S: the greedy ids of the TQ2_0 model, on cpu and on ref" "[ \"\$(ids '$T/tern-I2_S.gguf' 16)\" = \"\$(ids '$TQ' 16)\" ] && [ \"\$($E run -m '$T/tern-I2_S.gguf' -p 'Once upon a time' -n 16 --temp 0 --ids --backend ref 2>/dev/null | xargs)\" = \"\$(ids '$TQ' 16)\" ]"
check "an I2_S matrix is n/4 + 32 bytes (attn_q [256, 256]: 16416), Q2_0 18 per 64 (18432)" "$E inspect '$T/tern-I2_S.gguf' | grep -q 'blk.0.attn_q.weight  *I2_S  *\[256, 256\]  *16416 ' && $E inspect '$T/tern-Q2_0.gguf' | grep -q 'blk.0.attn_q.weight  *Q2_0  *\[256, 256\]  *18432 '"
check "general.file_type: I2_S 40 (bitnet.cpp's MOSTLY_I2_S), Q2_0 41" "[ \"\$(kv '$T/tern-I2_S.gguf' general.file_type)\" = 40 ] && [ \"\$(kv '$T/tern-Q2_0.gguf' general.file_type)\" = 41 ]"
"$E" quantize "$TQ" "$T/tq-i2s.gguf" I2_S --embd-type Q8_0 2> /dev/null
"$E" quantize "$T/tq-i2s.gguf" "$T/tq-back.gguf" TQ2_0 --embd-type Q8_0 2> /dev/null
check "the TQ2_0 model -> I2_S -> TQ2_0 is the reference file byte for byte" "cmp -s '$TQ' '$T/tq-back.gguf'"

# ---- mkmodel --------------------------------------------------------------------------------
mk() { "$E" mkmodel --shape tiny --vocab "$VOC" "$@"; }
mk --type Q8_0 --seed 7 -o "$T/m1.gguf" --threads 2 2> "$T/m1.err"; rc=$?
mk --type Q8_0 --seed 7 -o "$T/m2.gguf" --threads 1 2> /dev/null
mk --type Q8_0 --seed 8 -o "$T/m3.gguf" 2> /dev/null
check "mkmodel tiny exits 0 and reports what it wrote" "[ $rc -eq 0 ] && grep -q 'qwen3 tiny, Q8_0 matrices.*tied' '$T/m1.err'"
check "mkmodel: same seed, identical bytes (2 threads vs 1)" "cmp -s '$T/m1.gguf' '$T/m2.gguf'"
check "mkmodel: another seed, other bytes" "! cmp -s '$T/m1.gguf' '$T/m3.gguf'"
check "mkmodel: the shape's hparams" "[ \"\$(kv '$T/m1.gguf' qwen3.embedding_length)\" = 256 ] && [ \"\$(kv '$T/m1.gguf' qwen3.block_count)\" = 4 ] && [ \"\$(kv '$T/m1.gguf' qwen3.attention.head_count_kv)\" = 2 ] && [ \"\$(kv '$T/m1.gguf' qwen3.feed_forward_length)\" = 768 ]"
check "mkmodel: vocabulary copied" "$E inspect '$T/m1.gguf' | grep -q 'tokenizer.ggml.tokens .*512 x string' && [ \"\$(kv '$T/m1.gguf' tokenizer.ggml.model)\" = '\"llama\"' ]"
check "mkmodel: tied (no output.weight), QK norms present" "[ -z \"\$(ttype '$T/m1.gguf' output.weight)\" ] && [ \"\$(ttype '$T/m1.gguf' blk.3.attn_k_norm.weight)\" = F32 ]"
for ty in F16 Q4_K TQ1_0 TQ2_0 Q1_0; do
  mk --type $ty -o "$T/m-$ty.gguf" 2> /dev/null; rc=$?
  n=$("$E" run -m "$T/m-$ty.gguf" -p "Once upon a time" -n 8 --temp 0 --ids 2>/dev/null | wc -w)
  check "mkmodel tiny $ty: loads and generates" "[ $rc -eq 0 ] && [ $n -eq 8 ]"
done
check "mkmodel TQ2_0: token_embd Q8_0 by default" "[ \"\$(ttype '$T/m-TQ2_0.gguf' token_embd.weight)\" = Q8_0 ] && [ \"\$(ttype '$T/m-TQ2_0.gguf' blk.0.ffn_down.weight)\" = TQ2_0 ]"
# ternary values survive TQ2_0 -> F16 -> TQ2_0 exactly
"$E" quantize "$T/m-TQ2_0.gguf" "$T/m-tq-f16.gguf" F16 --embd-type Q8_0 --output-type Q8_0 2> /dev/null
"$E" quantize "$T/m-tq-f16.gguf" "$T/m-tq-again.gguf" TQ2_0 2> /dev/null
check "mkmodel ternary weights: TQ2_0 -> F16 -> TQ2_0 is byte-identical" "cmp -s '$T/m-TQ2_0.gguf' '$T/m-tq-again.gguf'"
mk --arch llama --type Q8_0 --output-type Q6_K -o "$T/ml.gguf" 2> /dev/null; rc=$?
n=$("$E" run -m "$T/ml.gguf" -p "Once upon a time" -n 8 --temp 0 --ids 2>/dev/null | wc -w)
check "mkmodel --arch llama with an untied Q6_K output" "[ $rc -eq 0 ] && [ $n -eq 8 ] && [ \"\$(ttype '$T/ml.gguf' output.weight)\" = Q6_K ] && [ -z \"\$(ttype '$T/ml.gguf' blk.0.attn_q_norm.weight)\" ]"

# ---- bad input: message, exit status, OUT untouched --------------------------------------------
printf 'keep me' > "$T/keep.gguf"
printf 'GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' > "$T/kv-only.gguf"   # no keys
expect_fail() { # name, expected exit, message regex, args...
  local name=$1 code=$2 re=$3; shift 3
  out=$("$E" "$@" 2>&1); rc=$?
  if [ $rc -eq "$code" ] && echo "$out" | grep -Eq "$re" && [ "$(cat "$T/keep.gguf")" = "keep me" ]; then
    ok "$name (exit $rc)"
  else
    bad "$name: exit $rc: $out"
  fi
}
expect_fail "quantize: missing input file" 1 "no-such.gguf.*No such file" quantize "$T/no-such.gguf" "$T/keep.gguf" Q8_0
expect_fail "quantize: unknown type" 2 "unknown type 'Q9_9'.*known: F32" quantize "$M" "$T/keep.gguf" Q9_9
expect_fail "quantize: unknown --embd-type" 2 "unknown type 'X'" quantize "$M" "$T/keep.gguf" Q8_0 --embd-type X
expect_fail "quantize: output directory missing" 1 "no-dir/out.gguf.*No such file" quantize "$M" "$T/no-dir/out.gguf" Q8_0
expect_fail "quantize: IN == OUT" 2 "same file" quantize "$T/keep.gguf" "$T/keep.gguf" Q8_0
expect_fail "quantize: IN == OUT through another path" 2 "same file" quantize "$T/q8.gguf" "$T/../$(basename "$T")/q8.gguf" F32
check "quantize: IN == OUT left the input as it was" "cmp -s '$T/q8.gguf' '$T/q8b.gguf'"
expect_fail "quantize: input is not GGUF (OUT kept)" 1 "too short for a GGUF header" quantize "$T/keep.gguf" "$T/x.gguf" Q8_0
head -c 5000 "$M" > "$T/trunc.gguf"
expect_fail "quantize: truncated input, existing OUT kept" 1 "trunc.gguf.*(ends|outside)" quantize "$T/trunc.gguf" "$T/keep.gguf" Q8_0
expect_fail "quantize: a directory as input" 1 "not a regular file" quantize "$D" "$T/keep.gguf" Q8_0
expect_fail "quantize: a directory as output" 1 "is a directory" quantize "$M" "$T" Q8_0
expect_fail "quantize: missing arguments" 2 "need IN OUT TYPE" quantize "$M" "$T/keep.gguf"
expect_fail "quantize: unknown option" 2 "unknown option" quantize "$M" "$T/keep.gguf" Q8_0 --bogus
expect_fail "quantize: --threads 0" 2 "threads" quantize "$M" "$T/keep.gguf" Q8_0 --threads 0
expect_fail "mkmodel: unknown shape" 2 "unknown --shape 'huge'" mkmodel --shape huge --type Q8_0 --vocab "$VOC" -o "$T/keep.gguf"
expect_fail "mkmodel: unknown arch" 2 "unknown --arch 'gpt9'" mkmodel --arch gpt9 --shape tiny --type Q8_0 --vocab "$VOC" -o "$T/keep.gguf"
expect_fail "mkmodel: unknown type" 2 "unknown type 'Q3'" mkmodel --shape tiny --type Q3 --vocab "$VOC" -o "$T/keep.gguf"
expect_fail "mkmodel: missing vocab file" 1 "no-vocab.gguf.*No such file" mkmodel --shape tiny --type Q8_0 --vocab "$T/no-vocab.gguf" -o "$T/keep.gguf"
expect_fail "mkmodel: vocab file is not GGUF" 1 "trunc.gguf.*(ends|outside)" mkmodel --shape tiny --type Q8_0 --vocab "$T/trunc.gguf" -o "$T/keep.gguf"
expect_fail "mkmodel: vocab file without tokens" 1 "no tokenizer.ggml.tokens" mkmodel --shape tiny --type Q8_0 --vocab "$T/kv-only.gguf" -o "$T/keep.gguf"
expect_fail "mkmodel: missing -o" 2 "missing -o" mkmodel --shape tiny --type Q8_0 --vocab "$VOC"
expect_fail "mkmodel: output directory missing" 1 "no-dir/m.gguf.*No such file" mkmodel --shape tiny --type Q8_0 --vocab "$VOC" -o "$T/no-dir/m.gguf"
expect_fail "mkmodel: output is the vocabulary" 2 "is the vocabulary" mkmodel --shape tiny --type Q8_0 --vocab "$T/keep.gguf" -o "$T/keep.gguf"
# the ids forks disagree on (docs/weights.md): the seed corpus's malformed ternary files
C=${HX_SOURCE:-.}/tests/fuzz/corpus/gguf
if [ -e "$C/bad-i2s-span-short" ]; then
  expect_fail "inspect: I2_S tensor short of n/4 + 32" 1 "tensor 'blk.0.attn_q.weight' has type 36, I2_S .*n/4 \+ 32 = 224 bytes.*spans 160 bytes" inspect "$C/bad-i2s-span-short"
  expect_fail "run: I2_S tensor with 64 bytes too many" 1 "tensor 'blk.0.attn_q.weight' has type 36.*spans 160 bytes" run -m "$C/bad-i2s-span-long" -p hi -n 1
  expect_fail "quantize: I2_S rows of 192" 1 "tensor 'blk.0.attn_q.weight': ne\[0\] = 192 is not a multiple of I2_S's block of 128" quantize "$C/bad-i2s-row-192" "$T/keep.gguf" Q8_0
  expect_fail "inspect: type 42 in PrismML's 34-per-128 layout" 1 "tensor 'blk.0.ffn_gate.weight' has type 42 .*PrismML" inspect "$C/bad-q2_0-prismml-128"
else
  bad "the seed corpus is missing at $C"
fi

# ---- outputs are written only as regular files (core/outfile.c) ------------------------------
# A FIFO, a directory, a device node and a dangling link are refused and left as they were; a
# link is written through to its target (the link stays a link); an existing file keeps its
# permission bits. All in $T: a regression can only damage these stand-ins.
O=$T/out; mkdir -p "$O"
mkfifo "$O/fifo"
expect_fail "quantize onto a FIFO is refused" 1 "is a FIFO" quantize "$M" "$O/fifo" Q8_0
check "  and the FIFO is still a FIFO" "[ -p '$O/fifo' ]"
mkdir "$O/dir"
expect_fail "quantize onto a directory is refused" 1 "is a directory" quantize "$M" "$O/dir" Q8_0
check "  and the directory is still there, empty" "[ -d '$O/dir' ] && [ -z \"\$(ls -A '$O/dir')\" ]"
if mknod "$O/null" c 1 3 2>/dev/null; then
  expect_fail "quantize onto a character device is refused" 1 "is a character device" quantize "$M" "$O/null" Q8_0
  check "  and the device node is still a character device" "[ -c '$O/null' ]"
  expect_fail "mkmodel onto a character device is refused" 1 "is a character device" mkmodel --shape tiny --type Q8_0 --vocab "$VOC" -o "$O/null"
else
  echo "N/A  a device node cannot be made here (not root): the FIFO stands in for special files"
fi
ln -s "$O/missing.gguf" "$O/dangling"
expect_fail "quantize through a dangling link is refused" 1 "symbolic link to a missing file" quantize "$M" "$O/dangling" Q8_0
check "  and nothing was created at its target" "[ ! -e '$O/missing.gguf' ] && [ -L '$O/dangling' ]"
echo old > "$O/target.gguf"; chmod 0600 "$O/target.gguf"; ln -s target.gguf "$O/link.gguf"
"$E" quantize "$M" "$O/link.gguf" Q8_0 > /dev/null 2>&1; rc=$?
check "quantize through a symlink writes its target (exit 0)" "[ $rc -eq 0 ] && [ -L '$O/link.gguf' ] && [ \"\$(readlink '$O/link.gguf')\" = target.gguf ]"
check "  the target is the new model, loadable" "[ -n \"\$(ids '$O/target.gguf' 4)\" ]"
check "  and keeps its 0600 permissions" "[ \"\$(stat -c %a '$O/target.gguf')\" = 600 ]"
echo old > "$O/plain.gguf"; chmod 0640 "$O/plain.gguf"
"$E" mkmodel --shape tiny --type Q8_0 --vocab "$VOC" -o "$O/plain.gguf" > /dev/null 2>&1; rc=$?
check "mkmodel over a 0640 file: exit 0, mode still 0640" "[ $rc -eq 0 ] && [ \"\$(stat -c %a '$O/plain.gguf')\" = 640 ]"
check "no temporary files left behind" "[ -z \"\$(ls '$T' '$O' | grep '\.tmp\.')\" ]"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
