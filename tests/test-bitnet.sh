#!/usr/bin/env bash
# test-bitnet.sh — the two BitNet architectures end to end (docs/bitnet.md): `engine mkmodel
# --arch bitnet` (llama.cpp's) and `--arch bitnet-b1.58` (bitnet.cpp's) at the tiny shape write
# the tensors and keys those loaders read; the engine picks SiLU for the first and relu² for the
# second (and for a key-less bitnet file with the Llama 3 vocabulary), refuses an activation it
# does not know; the same ternary weights as TQ2_0 and as I2_S (bitnet.cpp's format, its scale in
# the tensor's tail) give the same tokens on every backend; `engine diff` passes on every backend
# and every kind of policy present (ref is
# the oracle; cpu, vulkan on lavapipe, npu-sim, splits of them); `engine chat` renders the
# model's template as `bitnet`. The reference no one here wrote is tests/test-bitnet-peer.sh.
# Missing shared data or Vulkan: a skip (exit 77), a failure with CI=true (tests/lib.sh).
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?}
. "$(dirname "$0")/lib.sh"
V=$D/stories260K/stories260K.gguf L3=$D/vocab/ggml-vocab-llama-bpe.gguf
need_file "$V" || finish
T=$(mktemp -d "${TMPDIR:-/tmp}/hx-bitnet-XXXXXX")
export HX_PROFILE_DIR=$T/profiles
trap 'rm -rf "$T"' EXIT
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
ttype() { "$E" inspect "$1" | awk -v n="$2" '$2 == n { print $3 }'; }
tshape() { "$E" inspect "$1" | awk -v n="$2" '$2 == n { sub(/^[^[]*/, ""); sub(/].*/, "]"); gsub(/ /, ""); print }'; }
kv() { "$E" inspect "$1" | awk -v k="$2" '$1 == k { print $3 }'; }
ids() { "$E" run -m "$1" -p "Once upon a time" -n 8 --temp 0 --ids "${@:2}" 2>/dev/null | xargs; }
mk() { "$E" mkmodel --shape tiny --vocab "$V" "$@" 2> "$T/mk.err"; }

# ---- what mkmodel writes ------------------------------------------------------------------------
mk --arch bitnet --type TQ2_0 -o "$T/bn.gguf"; rc1=$?
mk --arch bitnet --type TQ1_0 --scale-tensors -o "$T/bns.gguf"; rc2=$?
mk --arch bitnet-b1.58 --type TQ2_0 -o "$T/b158.gguf"; rc3=$?
mk --arch bitnet-b1.58 --type I2_S -o "$T/b158-i2s.gguf"; rc4=$?
mk --arch bitnet --type I2_S -o "$T/bn-i2s.gguf"; rc5=$?
check "mkmodel bitnet TQ2_0 and I2_S, bitnet TQ1_0 --scale-tensors, bitnet-b1.58 TQ2_0 and I2_S: exit 0" "[ $rc1$rc2$rc3$rc4$rc5 = 00000 ]"
A=$T/bn.gguf B=$T/bns.gguf C=$T/b158.gguf I=$T/b158-i2s.gguf
check "architectures and key prefixes" "[ \"\$(kv $A general.architecture)\" = '\"bitnet\"' ] && [ \"\$(kv $C general.architecture)\" = '\"bitnet-b1.58\"' ] && [ \"\$(kv $C bitnet-b1.58.feed_forward_length)\" = 768 ]"
check "sub-norms: attn_sub_norm [256] (n_embd), ffn_sub_norm [768] (n_ff), F32" "[ \"\$(tshape $A blk.3.attn_sub_norm.weight)\" = '[256]' ] && [ \"\$(tshape $C blk.0.ffn_sub_norm.weight)\" = '[768]' ] && [ \"\$(ttype $A blk.0.ffn_sub_norm.weight)\" = F32 ]"
check "no output.weight (the LM head is the embedding), no QK norms" "[ -z \"\$(ttype $A output.weight)\$(ttype $C output.weight)\$(ttype $A blk.0.attn_q_norm.weight)\" ]"
check "bitnet: no .scale tensors; SiLU said by bitnet.hidden_activation" "[ -z \"\$(ttype $A blk.0.attn_q.scale)\" ] && [ \"\$(kv $A bitnet.hidden_activation)\" = '\"silu\"' ]"
ns=$("$E" inspect "$C" | grep -c '\.scale ')
check "bitnet --scale-tensors and bitnet-b1.58: one F32 [1] .scale per matrix (7 per layer)" "[ \"\$(ttype $B blk.2.ffn_down.scale)\" = F32 ] && [ \"\$(tshape $C blk.0.attn_output.scale)\" = '[1]' ] && [ $ns -eq 28 ]"
check "bitnet-b1.58: no activation key (relu² is the architecture's), like the published file" "[ -z \"\$(kv $C bitnet-b1.58.hidden_activation)\" ]"
check "layer matrices ternary in TQ1_0/TQ2_0, embedding Q8_0" "[ \"\$(ttype $B blk.1.ffn_up.weight)\" = TQ1_0 ] && [ \"\$(ttype $A token_embd.weight)\" = Q8_0 ]"
check "bitnet-b1.58 in I2_S: the scale in the tensor, so no .scale tensors (as the published file)" "[ \"\$(ttype $I blk.0.attn_q.weight)\" = I2_S ] && [ -z \"\$(ttype $I blk.0.attn_q.scale)\" ] && [ \"\$(kv $I general.file_type)\" = 40 ]"
check "the chat template is 2B4T's" "\"$E\" inspect $A | grep -q \"tokenizer.chat_template .*capitalize + ': '.*<|eot_id|>.*'Assistant: '\""

# ---- activation and scales as the loader reads them ----------------------------------------------
act() { "$E" plan -m "$1" 2>&1 | grep -Eo 'relu2_glu|swiglu' | sort -u | xargs; }
check "bitnet runs SiLU (swiglu), bitnet-b1.58 relu² (relu2_glu)" "[ \"\$(act $A)\" = swiglu ] && [ \"\$(act $B)\" = swiglu ] && [ \"\$(act $C)\" = relu2_glu ]"
nqkv() { "$E" plan -m "$1" 2>&1 | grep -c 'L0  matmul    qkv'; }
check "QKV: one fused matmul per phase for bitnet, three when each has its own .scale (fused only when equal)" "[ \$(nqkv $A) -eq 2 ] && [ \$(nqkv $C) -eq 6 ]"
# The key's value or name changed in place (same length, so the file stays valid).
patch() { python3 - "$1" "$2" "$3" "$4" <<'EOF'
import sys
src, dst, old, new = sys.argv[1:]
b = open(src, "rb").read()
assert b.count(old.encode()) == 1, (old, b.count(old.encode()))
open(dst, "wb").write(b.replace(old.encode(), new.encode()))
EOF
}
python3 - "$A" "$T/gelu.gguf" <<'EOF'
import sys
b = open(sys.argv[1], "rb").read()
k = b"bitnet.hidden_activation"
i = b.index(k) + len(k) + 4 + 8
assert b[i:i + 4] == b"silu"
open(sys.argv[2], "wb").write(b[:i] + b"gelu" + b[i + 4:])
EOF
out=$("$E" run -m "$T/gelu.gguf" -p hi -n 2 2>&1); rc=$?
check "an unknown activation (bitnet.hidden_activation = gelu): exit 1, names the key and what is known" "[ $rc -eq 1 ] && grep -q \"key 'bitnet.hidden_activation' = 'gelu' is not an activation hx knows (silu, relu2)\" <<<\"\$out\""
patch "$A" "$T/nokey.gguf" bitnet.hidden_activation bitnet.hidden_activatioX
check "bitnet without the key, small vocabulary: SiLU, the same tokens" "[ \"\$(act $T/nokey.gguf)\" = swiglu ] && [ \"\$(ids $T/nokey.gguf)\" = \"\$(ids $A)\" ]"
if need_file "$L3"; then
  "$E" mkmodel --shape tiny --vocab "$L3" --arch bitnet --type TQ2_0 -o "$T/l3.gguf" 2> /dev/null
  patch "$T/l3.gguf" "$T/l3-nokey.gguf" bitnet.hidden_activation bitnet.hidden_activatioX
  check "bitnet with the Llama 3 vocabulary: SiLU with the key, relu² without (a converted 2B4T)" "[ \"\$(act $T/l3.gguf)\" = swiglu ] && [ \"\$(act $T/l3-nokey.gguf)\" = relu2_glu ]"
fi

# ---- the same weights as TQ2_0 and as I2_S -------------------------------------------------------
# mkmodel's per-tensor magnitudes are fp16-exact, so TQ2_0's d and I2_S's f32 tail hold the same
# s; the cpu kernels apply I2_S's scale where TQ2_0's d goes (docs/cpu.md), ref dequantizes both
# to the same floats. Vulkan has no I2_S shaders yet: its I2_S products run on the cpu.
devs=$("$E" devices 2>/dev/null)
have() { echo "$devs" | grep -q "^  $1 *available"; }
for b in ref cpu vulkan npu-sim; do
  have $b || continue
  same=1
  for p in "Once upon a time" "The little dog"; do
    x=$("$E" run -m "$A" -p "$p" -n 24 --temp 0 --ids --backend $b 2>/dev/null | xargs)
    y=$("$E" run -m "$T/bn-i2s.gguf" -p "$p" -n 24 --temp 0 --ids --backend $b 2>/dev/null | xargs)
    [ -n "$x" ] && [ "$x" = "$y" ] || { same=0; echo "   $b '$p': TQ2_0 $x / I2_S $y"; }
  done
  check "$b: bitnet TQ2_0 and I2_S of the same weights give the same 24 tokens (2 prompts)" "[ $same -eq 1 ]"
done
# I2_S's tensor scales differ per matrix; the fused Q|K|V and gate|up keep one per part
# (hx_weight.n_tparts), so I2_S runs as many products as TQ2_0 (whose scale is in its blocks).
# A tensor split slices the fused rows, parts and all (sched-place.c): each slice's parts must
# start from its own row 0 (with the original row numbers the 24 tokens differed).
same=1
for p in "Once upon a time" "The little dog"; do
  ts="tensor-split:cpu=0.5,ref=0.5"
  x=$("$E" run -m "$A" -p "$p" -n 24 --temp 0 --ids --policy $ts 2>/dev/null | xargs)
  y=$("$E" run -m "$T/bn-i2s.gguf" -p "$p" -n 24 --temp 0 --ids --policy $ts 2>/dev/null | xargs)
  [ -n "$x" ] && [ "$x" = "$y" ] || { same=0; echo "   $ts '$p': TQ2_0 $x / I2_S $y"; }
done
check "tensor-split:cpu=0.5,ref=0.5: bitnet TQ2_0 and I2_S give the same 24 tokens (2 prompts)" "[ $same -eq 1 ]"
nmm() { "$E" plan -m "$1" 2>/dev/null | grep -c " matmul "; }
check "bitnet I2_S fuses Q|K|V and gate|up as TQ2_0 does: $(nmm "$T/bn-i2s.gguf") / $(nmm "$A") products in the plan" "[ \$(nmm \"$T/bn-i2s.gguf\") -eq \$(nmm \"$A\") ] && [ \$(nmm \"$A\") -gt 0 ]"

# ---- every backend and policy against ref --------------------------------------------------------
policies="single:cpu gemm-offload:cpu tensor-split:cpu=0.5,ref=0.5 layer-split:cpu=0.5,ref=0.5
phase-split:cpu,ref op-map:attn=ref,lm_head=ref,default=cpu auto:cpu,ref"
if have vulkan; then
  policies="$policies single:vulkan gemm-offload:vulkan tensor-split:cpu=0.5,vulkan=0.5 layer-split:vulkan=0.5,cpu=0.5 phase-split:vulkan,cpu"
else
  skip "no Vulkan device (lavapipe): the vulkan policies"
fi
if have npu-sim; then
  policies="$policies single:npu-sim gemm-offload:npu-sim phase-split:npu-sim,cpu op-map:qkv=npu-sim,down=npu-sim,default=cpu"
  have vulkan && policies="$policies tensor-split:cpu=0.4,npu-sim=0.3,vulkan=0.3"
else
  na "npu-sim is not built in"
fi
# Under the sanitizers (lib.sh's sanitized: several times slower) the four models take the policies
# in turn: A and C the odd ones, B and I the even ones; every policy runs on two models, half the
# diffs.
halve=false; sanitized && halve=true
mi=0
for m in "$A" "$B" "$C" "$I"; do
  mi=$((mi + 1)) pi=0
  for p in $policies; do
    pi=$((pi + 1))
    $halve && [ $(((mi + pi) % 2)) -eq 1 ] && continue
    out=$("$E" diff -m "$m" --policy "$p" -n 6 --ops failed 2>&1); rc=$?
    [ $rc -eq 0 ] && ok "diff $(basename "$m") $p" \
      || bad "diff $(basename "$m") $p: exit $rc: $(echo "$out" | grep -E 'FAIL|first op|error|bound' | head -3)"
  done
done
for b in ref cpu vulkan npu-sim; do
  have $b || continue
  n=$(ids "$C" --backend $b | wc -w)
  check "run bitnet-b1.58 on $b: 8 tokens" "[ $n -eq 8 ]"
done

# ---- chat: the model's template is BitNet's ------------------------------------------------------
chat() { printf 'Hello there\nAnd then?\n' | "$E" chat -m "$C" -n 6 --temp 0 "$@" 2>&1; }
c0=$(chat); rc=$?
c1=$(chat --chat-template bitnet); c2=$(chat --chat-template llama2)
check "engine chat on bitnet-b1.58: two turns, exit 0" "[ $rc -eq 0 ] && [ \$(grep -o '> ' <<<\"\$c0\" | wc -l) -ge 3 ]"
check "the detected template answers exactly as --chat-template bitnet, not as llama2" "[ \"\$c0\" = \"\$c1\" ] && [ \"\$c0\" != \"\$c2\" ]"

# ---- mkmodel usage errors ------------------------------------------------------------------------
expect2() { out=$("$E" mkmodel --vocab "$V" -o "$T/x.gguf" "${@:2}" 2>&1); rc=$?
  check "$1" "[ $rc -eq 2 ] && [ ! -e '$T/x.gguf' ]"; }
expect2 "bitnet at qwen3-0.6b (16 x 128 heads != 1024 wide): usage error" --shape qwen3-0.6b --arch bitnet --type TQ2_0
expect2 "bitnet with --output-type: usage error" --shape tiny --arch bitnet --type TQ2_0 --output-type Q8_0
expect2 "--scale-tensors on qwen3: usage error" --shape tiny --arch qwen3 --type TQ2_0 --scale-tensors
expect2 "tiny has no default type: usage error" --shape tiny --arch bitnet
expect2 "--scale-tensors with I2_S (which keeps its scale itself): usage error" --shape tiny --arch bitnet --type I2_S --scale-tensors
finish
