#!/usr/bin/env bash
# grammar-overhead.sh — what constrained decoding (core/grammar.c) costs in generation speed:
# `engine run` on a Qwen3-0.6B-shaped Q8_0 model (151,936-token vocabulary; made with `engine
# mkmodel` if missing, where bench/busy-neighbour.sh keeps it), the same prompt and -n plain
# and under a JSON grammar (an object of strings, numbers, booleans and an open-ended array of
# strings, so the budget, not the model, ends it), in alternating order, greedy and sampled
# (temperature 0.8, top-k 40). Prints each run's generation tokens/s (as `engine run` reports
# it), the medians and the ratio constrained / plain per mode, and the share of the generation
# time spent choosing and matching tokens under the grammar, which `engine run --grammar`
# measures in the same run (robust to a busy machine, where the tokens/s ratio is not).
#
#   bash bench/grammar-overhead.sh [-r ROUNDS=5] [-n TOKENS=96] [-t THREADS=2] [-m MODEL]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
E=${HX_ENGINE:-$here/../build/engine}
VOCAB=${HX_VOCAB:-$here/../../shared/data/vocab/ggml-vocab-qwen2.gguf}
rounds=5 n=96 threads=2 model=""
while [ $# -gt 0 ]; do
  case $1 in
    -r) rounds=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -m) model=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "grammar-overhead: unknown argument $1" >&2; exit 2 ;;
  esac
done
for v in "$rounds" "$n" "$threads"; do
  case $v in ''|*[!0-9]*) echo "grammar-overhead: not a count: $v" >&2; exit 2 ;; esac
done
[ "$n" -ge 48 ] || { echo "grammar-overhead: -n must be at least 48 (the grammar's shortest sentence fits)" >&2; exit 2; }
if [ -z "$model" ]; then
  dir=${TMPDIR:-/tmp}/hx-peer-models
  mkdir -p "$dir"
  model=$dir/qwen3-0.6b-Q8_0.gguf
  [ -f "$model" ] || "$E" mkmodel --shape qwen3-0.6b --type Q8_0 --vocab "$VOCAB" -o "$model" >&2
fi
g=$(mktemp --suffix=.gbnf)
trap 'rm -f "$g"' EXIT
cat >"$g" <<'EOF'
root   ::= "{" ws "\"name\":" ws string "," ws "\"age\":" ws int "," ws "\"ok\":" ws bool "," ws "\"tags\":" ws "[" ws string ("," ws string)* ws "]" ws "}"
string ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4})* "\""
int    ::= "-"? ([0-9] | [1-9] [0-9]{1,15})
bool   ::= "true" | "false"
ws     ::= [ \t\n]{0,20}
EOF
prompt="Answer with a JSON object describing a person: name, age, ok and a list of tags."
echo "engine: $("$E" --version 2>/dev/null | head -1); model: $model; -n $n; threads $threads"
tps() { # engine run ... → generated tokens, tokens/s, and (under --grammar) its share in %
  "$E" run -m "$model" -p "$prompt" -n "$n" -t "$threads" "$@" 2>&1 >/dev/null |
    sed -n -e 's/.*generation: \([0-9]*\) tokens in [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1 \2/p' \
           -e 's/^grammar: .*, \([0-9.]*\)% of the generation time)/\1/p' | paste -sd' '
}
for mode in greedy sampled; do
  if [ $mode = greedy ]; then args=(--temp 0); else args=(--temp 0.8 --top-k 40 --seed 7); fi
  plain=() cons=() share=()
  for r in $(seq "$rounds"); do
    for which in a b; do
      if { [ $which = a ] && [ $((r % 2)) = 1 ]; } || { [ $which = b ] && [ $((r % 2)) = 0 ]; }; then
        read -r k v < <(tps "${args[@]}"); plain+=("$v"); echo "$mode round $r plain:       $k tokens, $v tokens/s"
      else
        read -r k v pc < <(tps "${args[@]}" --grammar "$g"); cons+=("$v"); share+=("$pc")
        echo "$mode round $r constrained: $k tokens, $v tokens/s ($pc% of the time in the grammar)"
      fi
    done
  done
  python3 - "$mode" "${plain[*]}" "${cons[*]}" "${share[*]}" <<'EOF'
import statistics, sys
mode = sys.argv[1]
p, c, sh = ([float(x) for x in a.split()] for a in sys.argv[2:5])
mp, mc = statistics.median(p), statistics.median(c)
print(f"{mode}: median plain {mp:.2f} tokens/s, constrained {mc:.2f} tokens/s, ratio {mc / mp:.3f} "
      f"(overhead {100 * (1 - mc / mp):.1f}%); time in the grammar, measured in the run itself: "
      f"median {statistics.median(sh):.1f}% of the generation time")
EOF
done
