#!/usr/bin/env bash
# test-bad-models.sh — model files whose metadata a converter got wrong, made by patching one
# key of a real file in place: a value no model can have is a load error naming the key (exit
# 1), never a run that quietly generates from NaN logits (a negative RMS-norm epsilon or a RoPE
# base <= 0 made every logit NaN and greedy decoding printed token 0 with exit 0); a context
# length of 0 is taken as absent (4096, with a warning), not as a context that holds nothing;
# a file cut short anywhere is a GGUF error naming the file; NaN weights are an error in run and
# chat (the logits checked), not token 0 repeated.
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?}
. "$(dirname "$0")/lib.sh"
M=$D/stories260K/stories260K.gguf
Q=$D/qwen3/qwen3-micro-q8_0.gguf
need_file "$M" || finish
need_file "$Q" || finish
T=$(mktemp -d "${TMPDIR:-/tmp}/hx-badmodel-XXXXXX")
trap 'rm -rf "$T"' EXIT

# patch SRC DST KEY u32|f32 VALUE: the scalar value of metadata KEY, in place (same size)
patch() {
  python3 - "$@" <<'PY'
import struct, sys
src, dst, key, kind, val = sys.argv[1:6]
b = bytearray(open(src, 'rb').read())
k = key.encode()
i = b.find(struct.pack('<Q', len(k)) + k)
if i < 0: sys.exit('no key ' + key)
p = i + 8 + len(k)
t = struct.unpack_from('<I', b, p)[0]
if t != {'u32': 4, 'f32': 6}[kind]: sys.exit('%s has GGUF type %d' % (key, t))
struct.pack_into('<I' if kind == 'u32' else '<f', b, p + 4, int(val) if kind == 'u32' else float(val))
open(dst, 'wb').write(b)
PY
}
# refused SRC KEY KIND VALUE MESSAGE-REGEX
refused() {
  patch "$1" "$T/p.gguf" "$2" "$3" "$4" || { bad "patching $2"; return; }
  out=$("$E" run -m "$T/p.gguf" -p "Once upon" -n 4 --temp 0 --ids 2>&1); rc=$?
  [ $rc -eq 1 ] && echo "$out" | grep -Eq "$5" && ok "$2 = $4: refused at load ($(echo "$out" | head -1 | sed 's/.*p.gguf: //'))" \
    || bad "$2 = $4: exit $rc: $out"
}
refused "$M" llama.attention.layer_norm_rms_epsilon f32 -1 "layer_norm_rms_epsilon = -1 must be >= 0"
refused "$M" llama.attention.layer_norm_rms_epsilon f32 nan "layer_norm_rms_epsilon' is not finite"
refused "$Q" qwen3.rope.freq_base f32 0 "qwen3.rope.freq_base = 0 must be > 0"
refused "$Q" qwen3.rope.freq_base f32 -10000 "qwen3.rope.freq_base = -10000 must be > 0"
refused "$M" llama.attention.head_count u32 0 "bad hyperparameters"
refused "$M" llama.attention.head_count_kv u32 3 "bad attention shape"
refused "$M" llama.block_count u32 6 "required tensor 'blk.5.attn_norm.weight' is missing"
refused "$M" llama.rope.dimension_count u32 9 "rope.dimension_count 9 invalid for head dim 8"
refused "$M" llama.feed_forward_length u32 4294967295 "expected \[64, 4294967295\]"

# eps = 0 is a legal (if unusual) value: the model still runs and says llama2.c's first words
patch "$M" "$T/e0.gguf" llama.attention.layer_norm_rms_epsilon f32 0
out=$("$E" run -m "$T/e0.gguf" -p "Once upon a time" -n 4 --temp 0 2>/dev/null); rc=$?
[ $rc -eq 0 ] && [ "$out" = ", there was a" ] && ok "eps = 0 runs: '$out'" || bad "eps = 0: exit $rc '$out'"

# context_length 0: as if absent (4096), with a warning; a prompt runs without -c
patch "$M" "$T/c0.gguf" llama.context_length u32 0
out=$("$E" run -m "$T/c0.gguf" -p "Once upon a time" -n 4 --temp 0 2>"$T/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = ", there was a" ] && grep -q "context_length is 0; taking 4096" "$T/err" \
  && ok "context_length 0: runs with the default context and a warning" || bad "context_length 0: exit $rc '$out': $(cat "$T/err")"
plan=$("$E" plan -m "$T/c0.gguf" --summary 2>/dev/null)
want=$("$E" plan -m "$M" -c 4096 --summary 2>/dev/null | grep -o 'kv [0-9.]* [KMG]iB' | head -1)
got=$(echo "$plan" | grep -o 'kv [0-9.]* [KMG]iB' | head -1)
[ -n "$want" ] && [ "$got" = "$want" ] && ok "  and its KV cache is that of -c 4096 ($got)" || bad "context_length 0: plan '$got', -c 4096 '$want'"

# NaN weights (layer 0's attention norm, found by the tensor table's offset): every logit is
# NaN; run and chat say so and exit 1 instead of printing token 0 over and over with exit 0
python3 - "$M" "$T/nan.gguf" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
def u32(p): return struct.unpack_from('<I', b, p)[0]
def u64(p): return struct.unpack_from('<Q', b, p)[0]
n_t, n_kv, p = u64(8), u64(16), 24
def skip_val(p, t):
    if t == 8: return p + 8 + u64(p)                       # string
    if t == 9:                                             # array
        at, n = u32(p), u64(p + 4); p += 12
        for _ in range(n): p = skip_val(p, at)
        return p
    return p + {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}[t]
for _ in range(n_kv):
    p += 8 + u64(p); t = u32(p); p = skip_val(p + 4, t)
tensors = {}
for _ in range(n_t):
    name = b[p + 8:p + 8 + u64(p)].decode(); p += 8 + u64(p)
    nd = u32(p); p += 4 + 8 * nd + 4
    tensors[name] = u64(p); p += 8
data = (p + 31) // 32 * 32
off = data + tensors['blk.0.attn_norm.weight']
for i in range(64): struct.pack_into('<f', b, off + 4 * i, float('nan'))
open(sys.argv[2], 'wb').write(b)
PY
out=$("$E" run -m "$T/nan.gguf" -p "Once upon a time" -n 4 --temp 0 --ids 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "prefill: the logit of token 0 is nan" && ok "NaN weights: run exits 1 naming the NaN logit" \
  || bad "NaN weights: run exit $rc: $out"
out=$(printf 'hi\n' | "$E" chat -m "$T/nan.gguf" --chat-template llama2 -n 4 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "the logit of token 0 is nan" && ok "NaN weights: chat exits 1 naming the NaN logit" \
  || bad "NaN weights: chat exit $rc: $out"

# cut short at offsets in the header, the metadata, the tensor table and the data
sz=$(stat -c %s "$M")
for off in 0 7 24 1000 10000 100000 $((sz / 2)) $((sz - 1)); do
  head -c "$off" "$M" > "$T/cut.gguf"
  out=$("$E" run -m "$T/cut.gguf" -p hi -n 2 2>&1); rc=$?
  [ $rc -eq 1 ] && echo "$out" | grep -q "cannot load model: .*gguf: " && ok "cut at byte $off: exit 1, a GGUF error" \
    || bad "cut at byte $off: exit $rc: $out"
done
finish
