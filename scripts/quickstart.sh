#!/usr/bin/env bash
# quickstart.sh — the README's first command: on a fresh Debian 12 machine (as root), install
# what hx builds with (scripts/setup-debian.sh), configure and build it in build/, list the
# devices it can run on, and run the main job: greedy generation from stories260K, a real
# trained model in the shared test data next to the repository (no download).
# Options: --no-install (the packages are there already), -n N (tokens to generate, 64).
set -euo pipefail
cd "$(dirname "$0")/.."
install=1 n=64
while [ $# -gt 0 ]; do
    case "$1" in
    --no-install) install=0 ;;
    -n) n="${2:?-n needs a number}"; shift ;;
    *) echo "quickstart.sh: unknown option '$1' (--no-install, -n N)" >&2; exit 2 ;;
    esac
    shift
done
M=../shared/data/stories260K/stories260K.gguf
if [ ! -f "$M" ]; then
    echo "quickstart.sh: $M is missing: the shared test data must sit next to the repository" >&2
    exit 1
fi
[ $install -eq 1 ] && bash scripts/setup-debian.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
./build/engine devices
./build/engine run -m "$M" -p "Once upon a time" -n "$n" --temp 0
