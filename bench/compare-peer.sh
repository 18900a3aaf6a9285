#!/usr/bin/env bash
# compare-peer.sh — engine vs llama.cpp (bench/peer-llama.sh) on the same GGUF files, back to
# back in one run, same thread count, prompt lengths and generation length; prints each side's
# median tokens/s and the ratio. Makes the Qwen3-0.6B-shaped models with `engine mkmodel` if
# they are missing.
#   bash bench/compare-peer.sh [-t 2] [-r 3] [-d MODEL_DIR] [TYPE ...]   (default: Q8_0 TQ2_0)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
E=${HX_ENGINE:-$here/../build/engine}
VOCAB=${HX_VOCAB:-$here/../../shared/data/vocab/ggml-vocab-qwen2.gguf}
t=2 r=3 dir=${TMPDIR:-/tmp}/hx-peer-models
while [ $# -gt 0 ]; do
  case $1 in
    -t) t=$2; shift 2 ;;
    -r) r=$2; shift 2 ;;
    -d) dir=$2; shift 2 ;;
    -*) echo "compare-peer: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
types=${*:-Q8_0 TQ2_0}
mkdir -p "$dir"
out=$(mktemp -d)
for ty in $types; do
  m=$dir/qwen3-0.6b-$ty.gguf
  [ -f "$m" ] || "$E" mkmodel --shape qwen3-0.6b --type "$ty" --vocab "$VOCAB" -o "$m" >&2
  for round in 1 2; do  # alternate the two engines so drifting load hits both
    "$E" bench -m "$m" -p 128,512 -n 64 -r "$r" -t "$t" -o json > "$out/hx-$ty-$round.json"
    bash "$here/peer-llama.sh" "$m" -p 128 -n 64 -r "$r" -t "$t" -o json > "$out/peer-$ty-$round-128.json"
    bash "$here/peer-llama.sh" "$m" -p 512 -n 1 -r "$r" -t "$t" -o json > "$out/peer-$ty-$round-512.json"
  done
done
python3 - "$out" $types <<'PY'
import json, sys, glob, statistics as st
d, types = sys.argv[1], sys.argv[2:]
print("| model | test | hx t/s (median) | llama.cpp t/s (median) | ratio |")
print("|---|---|---|---|---|")
for ty in types:
    hx, peer = {}, {}
    for f in glob.glob(f"{d}/hx-{ty}-*.json"):
        j = json.load(open(f))
        for row in (j if isinstance(j, list) else j.get("rows", [])):
            hx.setdefault(row["test"], []).extend(row.get("samples_ts", [row.get("median_ts", 0)]))
    for f in glob.glob(f"{d}/peer-{ty}-*.json"):
        j = json.load(open(f))
        peer.setdefault(f"pp{j['pp']['n']}", []).extend(j["pp"]["samples"])
        if j["tg"]["n"] > 1: peer.setdefault(f"tg{j['tg']['n']}", []).extend(j["tg"]["samples"])
    for test in ("pp128", "pp512", "tg64"):
        if test in hx and test in peer:
            a, b = st.median(hx[test]), st.median(peer[test])
            print(f"| qwen3-0.6b-{ty} | {test} | {a:.2f} | {b:.2f} | {a/b:.2f}x |")
PY
echo "(raw results: $out)"
