#!/usr/bin/env bash
# serve-cache.sh — what prompt caching buys `engine serve`: the time to first token of a chat's
# second turn, the first turn having been about 1,500 prompt tokens, with the slot's cached
# prefix ("cache_prompt": true, the default) and without ("cache_prompt": false), on a
# Qwen3-0.6B-shaped Q8_0 model (made with `engine mkmodel` if missing, where
# bench/busy-neighbour.sh keeps it). Every round is a new conversation (its first turn begins
# with the round's number, so no round finds another's prefix): the first turn, then its second
# turn cold and cached, in alternating order (a cache_prompt: false request leaves no cache
# behind, so the cached turn finds only the first turn's prefix either way). Each second turn streams 8 greedy tokens; its TTFT
# is the client's time from sending the request to the first chunk after the role chunk (the
# one sent when the prompt is accepted). The cached and cold second turns must give the same
# token ids, or the script fails. Prints the medians over the rounds and their ratio.
#
#   bash bench/serve-cache.sh [-r ROUNDS=5] [-p PROMPT_TOKENS=1500] [-t THREADS=1]
#        [--backend B | --policy P] [-m MODEL]
#
# THREADS defaults to 1: on a shared 2-core machine two threads measure contention.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
E=${HX_ENGINE:-$here/../build/engine}
VOCAB=${HX_VOCAB:-$here/../../shared/data/vocab/ggml-vocab-qwen2.gguf}
rounds=5 nprompt=1500 threads=1 model="" extra=()
while [ $# -gt 0 ]; do
  case $1 in
    -r) rounds=$2; shift 2 ;;
    -p) nprompt=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -m) model=$2; shift 2 ;;
    --backend|--policy) extra+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "serve-cache: unknown argument $1" >&2; exit 2 ;;
  esac
done
for v in "$rounds" "$nprompt" "$threads"; do
  case $v in ''|*[!0-9]*) echo "serve-cache: not a count: $v" >&2; exit 2 ;; esac
done
[ "$rounds" -ge 1 ] && [ "$nprompt" -ge 64 ] ||
  { echo "serve-cache: -r must be at least 1 and -p at least 64" >&2; exit 2; }
if [ -z "$model" ]; then
  dir=${TMPDIR:-/tmp}/hx-peer-models
  mkdir -p "$dir"
  model=$dir/qwen3-0.6b-Q8_0.gguf
  [ -f "$model" ] || "$E" mkmodel --shape qwen3-0.6b --type Q8_0 --vocab "$VOCAB" -o "$model" >&2
fi
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
log=$(mktemp)
"$E" serve -m "$model" --port "$port" --threads "$threads" --parallel 4 --ctx 4096 \
  --chat-template qwen3 "${extra[@]}" 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 600); do
  curl -sf "127.0.0.1:$port/health" >/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
echo "engine: $("$E" --version 2>/dev/null | head -1); model: $model; threads $threads; $(grep -o 'policy [^;]*; devices: [^)]*' "$log" | head -1)"
python3 - "http://127.0.0.1:$port" "$rounds" "$nprompt" <<'EOF'
import json, random, statistics, sys, time, urllib.request

url, rounds, nprompt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# common English words, each one token with its leading space in Qwen2's vocabulary
vocab = ("the of and to in is was for on that with as by at from his her they this have had "
         "not but are were one all we when there can an your which their said if do will each "
         "about how up out them then she many some so these would other into has more two like "
         "him see time could no make than first been its who now people my made over did down "
         "only way find use may water long little very after words called just where most know "
         "get through back much go good new write our me man too any day same right look think "
         "also around another came come work three word must because does part even place well "
         "such here take why things help put years different away again off went old number").split()

def post(body, stream):
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    r = urllib.request.urlopen(req, timeout=600)
    if not stream:
        return json.loads(r.read()), None
    ttft, ids, usage = None, None, None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        j = json.loads(line[6:])
        if j.get("usage"):
            usage = j["usage"]
        for c in j.get("choices", []):
            if ttft is None and (c.get("delta", {}).get("content") or c.get("finish_reason")) \
                    and "role" not in c.get("delta", {}):
                ttft = time.perf_counter() - t0
            if c.get("token_ids") is not None:
                ids = c["token_ids"]
    return {"ids": ids, "usage": usage}, ttft

def turn(msgs, cache, max_tokens, stream):
    return post({"messages": msgs, "max_tokens": max_tokens, "temperature": 0, "stream": stream,
                 "stream_options": {"include_usage": True}, "return_token_ids": True,
                 "cache_prompt": cache}, stream)

cold, warm, n1s, n2s, cached = [], [], [], [], []
for r in range(rounds):
    rnd = random.Random(r)
    # the system message and the template take 23 tokens
    words = [rnd.choice(vocab) for _ in range(nprompt - 23)]
    msgs = [{"role": "system", "content": f"Conversation {r}. You are a helpful assistant."},
            {"role": "user", "content": " ".join(words)}]
    first, _ = turn(msgs, True, 8, False)
    n1s.append(first["usage"]["prompt_tokens"])
    msgs += [{"role": "assistant", "content": first["choices"][0]["message"]["content"]},
             {"role": "user", "content": "Now say the same again in fewer words, please."}]
    res = {}
    for cache in ([False, True] if r % 2 == 0 else [True, False]):
        res[cache] = turn(msgs, cache, 8, True)
    (a, ta), (b, tb) = res[False], res[True]
    if a["ids"] != b["ids"] or a["ids"] is None:
        sys.exit(f"round {r}: cached and cold second turns differ: {b['ids']} vs {a['ids']}")
    cold.append(ta), warm.append(tb)
    n2s.append(b["usage"]["prompt_tokens"]), cached.append(b["usage"]["prompt_tokens_details"]["cached_tokens"])
    print(f"round {r}: first turn {n1s[-1]} prompt tokens; second turn {n2s[-1]} "
          f"({cached[-1]} cached): TTFT cold {ta * 1000:.0f} ms, cached {tb * 1000:.0f} ms; "
          f"same {len(a['ids'])} greedy ids", flush=True)
mc, mw = statistics.median(cold), statistics.median(warm)
print(f"median TTFT of the second turn over {rounds} rounds: cache_prompt false {mc * 1000:.0f} ms, "
      f"cached {mw * 1000:.0f} ms: {mc / mw:.1f}x lower with the cache")
EOF
