#!/usr/bin/env bash
# peer-llama.sh — run llama.cpp's CPU backend (prebuilt, from the npm package node-llama-cpp)
# on a GGUF file, for same-machine, same-run comparisons with `engine bench`. Installs the
# package once into bench/peer/ (git-ignored). Test tooling: nothing of it enters the engine.
#   bash bench/peer-llama.sh MODEL.gguf [-p 128] [-n 64] [-r 3] [-t 2] [-o md|json]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=$here/peer
if [ ! -d "$dir/node_modules/node-llama-cpp" ]; then
  mkdir -p "$dir"
  (cd "$dir" && npm init -y >/dev/null && npm install --no-audit --no-fund --ignore-scripts node-llama-cpp@3.22.1 >&2)
fi
cp "$here/peer-llama.mjs" "$dir/peer-llama.mjs"
exec node "$dir/peer-llama.mjs" "$@"
