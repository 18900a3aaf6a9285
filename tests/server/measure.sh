#!/usr/bin/env bash
# measure.sh — the issue's `engine serve` targets, measured and printed (by hand, not in CI):
#   1. 64 clients for 60 s on qwen3-micro: answers by status, 5xx other than 503, RSS series;
#   2. aggregate decode tokens/s, 8 streams vs 1, --parallel 8 --backend cpu, on a
#      Qwen3-0.6B-shaped Q8_0 model (made with `engine mkmodel` unless HX_BIG_MODEL names one);
#   3. time to first token, server vs `engine run`, medians (qwen3-micro and the 0.6B model).
# usage: HX_ENGINE=build/engine HX_DATA=../shared/data tests/server/measure.sh [THREADS]
# THREADS defaults to 1: on a shared 2-core machine 2 threads measure contention.
set -eu
E=${HX_ENGINE:?HX_ENGINE}; D=${HX_DATA:?HX_DATA}
T=${1:-1}
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$here/node_modules/openai/package.json" ] || (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
big=${HX_BIG_MODEL:-}
if [ -z "$big" ]; then
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    big=$tmp/qwen3-0.6b-q8_0.gguf
    "$E" mkmodel --shape qwen3-0.6b --type Q8_0 --vocab "$D/vocab/ggml-vocab-qwen2.gguf" -o "$big" --threads "$T"
fi
export HX_ENGINE HX_DATA
cd "$here"
node measure.mjs soak --clients 64 --seconds 60 --threads "$T"
node measure.mjs batch --model "$big" --parallel 8 --tokens 32 --threads "$T"
node measure.mjs ttft --runs 15 --threads "$T"
node measure.mjs ttft --model "$big" --runs 9 --threads "$T"
