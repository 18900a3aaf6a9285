#!/usr/bin/env bash
# test-server-cache.sh — prompt caching across requests in `engine serve`, plus /props and
# /slots. On every device present and two split policies (stories260K, --batch 100 so prompts
# take several prefill chunks): a request that repeats a prompt, one that extends it (the next
# turn) and one that diverges halfway (the slot's KV truncated mid-cache) report
# usage.prompt_tokens_details.cached_tokens and give the same greedy tokens as the same request
# with "cache_prompt": false (a cold prefill); /metrics counts hits, misses and cached tokens.
# Chat on qwen3-micro: the second turn reuses the first turn's prefix, tokens as a cold run.
# --cache-slots: with one slot running and two that only keep caches, a conversation survives
# another one in between; the access line names the cached tokens.
set -u
E=${HX_ENGINE:?HX_ENGINE}; D=${HX_DATA:?HX_DATA}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib.sh
. "$here/lib.sh"
S=$D/stories260K/stories260K.gguf; Q=$D/qwen3/qwen3-micro-q8_0.gguf
need_file "$S" || finish
need_file "$Q" || finish
for t in curl python3; do command -v $t >/dev/null || { skip "$t is not installed"; finish; }; done
tmp=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$tmp"' EXIT
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
start() { # model port extra... (the server's stderr goes to $tmp/server.log)
    local m=$1 p=$2; shift 2
    "$E" serve -m "$m" --port "$p" --threads 1 "$@" 2>>"$tmp/server.log" &
    PID=$!
    for _ in $(seq 200); do curl -sf "127.0.0.1:$p/health" >/dev/null && return 0; sleep 0.1; done
    return 1
}
stop() { # what: the server's name in the check; its exit status after SIGTERM must be 0
    kill -TERM "$PID"; wait "$PID"; local rc=$?; PID=
    check "$1: SIGTERM exits 0 (got $rc)" '[ $rc = 0 ]'
    [ $rc = 0 ] || tail -30 "$tmp/server.log"
}
metric() { curl -s "$1/metrics" | awk -v k="$2" '$1 == k { print $2 }'; }
# post URL ROUTE BODY-JSON OUT: the response as {"status", "body"}
post() { python3 "$here/server/http_post.py" "$@"; }
# json FILE EXPR: the python expression EXPR with j = the JSON in FILE (tuples space-separated)
json() {
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); r=eval(sys.argv[2])
print(" ".join(map(str, r)) if isinstance(r, tuple) else r)' "$@"
}
# completion body: prompt, max_tokens 12, greedy, token ids back, cache_prompt as given
body() { python3 -c 'import json,sys
print(json.dumps({"prompt": sys.argv[1], "max_tokens": 12, "temperature": 0,
                  "return_token_ids": True, "cache_prompt": sys.argv[2] == "true"}))' "$1" "$2"; }
ids() { json "$1" 'j["body"]["choices"][0]["token_ids"]'; }
cached() { json "$1" 'j["body"]["usage"].get("prompt_tokens_details", {}).get("cached_tokens", -1)'; }
ntok() { json "$1" 'j["body"]["usage"]["prompt_tokens"]'; }

words=$(python3 -c 'import random; r = random.Random(7)
w = "once upon a time there was a little girl named lily she liked to play with her toys in the park one day".split()
print(" ".join(r.choice(w) for _ in range(300)))')
half=$(echo "$words" | cut -d" " -f1-150)

for dp in "--backend cpu" "--backend ref" "--backend vulkan" "--backend npu-sim" \
          "--policy layer-split:cpu=0.5,ref=0.5" "--policy phase-split:ref,cpu"; do
    dev=${dp#* }
    # Under the sanitizers (lib.sh's sanitized) the server's cache books run on cpu, vulkan and
    # a split across two devices; ref and npu-sim alone and the phase split (170 s of the ASan
    # stage with them) are the Release run's.
    if sanitized; then case $dp in *" ref"|*npu-sim|*phase-split*)
        na "[$dp] left to the Release run under the sanitizers"; continue ;; esac
    fi
    case $dp in --backend*)
        if ! "$E" devices 2>/dev/null | grep -q "^  $dev *available"; then
            if "$E" devices 2>/dev/null | grep -q "^  $dev "; then skip "[$dp] no device"
            else na "[$dp] not in this build"; fi
            continue
        fi ;;
    esac
    P=$(port)
    # shellcheck disable=SC2086
    start "$S" "$P" --ctx 1024 --batch 100 --parallel 2 $dp || { bad "[$dp] server starts"; continue; }
    U=http://127.0.0.1:$P
    # 1. first sight of the prompt: a miss; 2. the same prompt cold; 3. again: all but the last
    # token from the cache
    post $U /v1/completions "$(body "$words" true)" "$tmp/a1.json"
    post $U /v1/completions "$(body "$words" false)" "$tmp/a0.json"
    post $U /v1/completions "$(body "$words" true)" "$tmp/a2.json"
    n=$(ntok "$tmp/a1.json")
    check "[$dp] first request: 200, nothing cached ($(json "$tmp/a1.json" 'j["status"]'), $(cached "$tmp/a1.json"))" \
        '[ "$(cached "$tmp/a1.json")" = 0 ]'
    check "[$dp] cache_prompt false: nothing cached" '[ "$(cached "$tmp/a0.json")" = 0 ]'
    check "[$dp] repeated prompt: $((n - 1)) of $n tokens cached ($(cached "$tmp/a2.json"))" \
        '[ "$(cached "$tmp/a2.json")" = $((n - 1)) ]'
    check "[$dp] repeated prompt: the tokens of the cold run" \
        '[ -n "$(ids "$tmp/a0.json")" ] && [ "$(ids "$tmp/a1.json")" = "$(ids "$tmp/a0.json")" ] &&
         [ "$(ids "$tmp/a2.json")" = "$(ids "$tmp/a0.json")" ]'
    # the next turn: the prompt, its answer and more; cached first, then cold in another slot
    next="$words$(json "$tmp/a0.json" 'j["body"]["choices"][0]["text"]') and then the girl went home"
    post $U /v1/completions "$(body "$next" true)" "$tmp/b1.json"
    post $U /v1/completions "$(body "$next" false)" "$tmp/b0.json"
    c=$(cached "$tmp/b1.json")
    check "[$dp] next turn: the first turn's prompt cached ($c of $(ntok "$tmp/b1.json"), first turn $n)" \
        '[ "$c" -ge $((n - 1)) ] && [ "$c" -lt "$(ntok "$tmp/b1.json")" ]'
    check "[$dp] next turn: the tokens of the cold run" \
        '[ -n "$(ids "$tmp/b0.json")" ] && [ "$(ids "$tmp/b1.json")" = "$(ids "$tmp/b0.json")" ]'
    # diverging halfway: a slot's KV is cut back to the common prefix
    post $U /v1/completions "$(body "$half the dog ran to the park to see the big red ball" true)" "$tmp/c1.json"
    post $U /v1/completions "$(body "$half the dog ran to the park to see the big red ball" false)" "$tmp/c0.json"
    c=$(cached "$tmp/c1.json")
    check "[$dp] diverging prompt: about half the first prompt cached ($c of $(ntok "$tmp/c1.json"); first $n)" \
        '[ "$c" -ge $((n / 2 - 20)) ] && [ "$c" -le $((n / 2 + 5)) ]'
    check "[$dp] diverging prompt: the tokens of the cold run" \
        '[ -n "$(ids "$tmp/c0.json")" ] && [ "$(ids "$tmp/c1.json")" = "$(ids "$tmp/c0.json")" ]'
    # 4 requests with cache_prompt on: the first missed, three hit
    want="1 3 $(( $(cached "$tmp/a2.json") + $(cached "$tmp/b1.json") + $(cached "$tmp/c1.json") ))"
    got="$(metric $U hx_prompt_cache_misses_total) $(metric $U hx_prompt_cache_hits_total) $(metric $U hx_prompt_cache_tokens_total)"
    check "[$dp] /metrics: misses, hits, cached tokens ($got; want $want)" '[ "$got" = "$want" ]'
    stop "[$dp]"
done

# ---- /props, /slots, bad input --------------------------------------------------------------------
P=$(port); start "$Q" "$P" --parallel 3 --api-key k || { bad "qwen3-micro server starts"; finish; }
U=http://127.0.0.1:$P
H="Authorization: Bearer k"
curl -s -H "$H" $U/props >"$tmp/props.json"
got=$(json "$tmp/props.json" '(j["model"], j["n_ctx"] > 0, j["total_slots"], j["chat_template"])')
check "/props: model, context, slots, template ($got)" '[ "$got" = "qwen3-micro-q8_0 True 3 qwen3" ]'
check "/props and /slots need the API key" \
    '[ "$(curl -s -o /dev/null -w "%{http_code}" $U/props)" = 401 ] &&
     [ "$(curl -s -o /dev/null -w "%{http_code}" $U/slots)" = 401 ]'
code=$(curl -s -o "$tmp/bad.json" -w '%{http_code}' -H "$H" $U/v1/completions \
       -d '{"prompt":"a","cache_prompt":"yes"}')
check "cache_prompt not a boolean: 400 naming it" \
    '[ "$code" = 400 ] && [ "$(json "$tmp/bad.json" "j[\"error\"][\"param\"]")" = cache_prompt ]'
# chat: the second turn reuses the first turn's prefix and gives the cold run's tokens
chat() { # messages-json cache out
    python3 -c 'import json,sys
print(json.dumps({"messages": json.loads(sys.argv[1]), "max_tokens": 16, "temperature": 0,
                  "return_token_ids": True, "cache_prompt": sys.argv[2] == "true"}))' "$1" "$2" >"$tmp/chat-body"
    python3 - "$U" "$(cat "$tmp/chat-body")" "$3" <<'EOF'
import json, sys, urllib.request
url, body, out = sys.argv[1:4]
req = urllib.request.Request(url + "/v1/chat/completions", body.encode(), {"Authorization": "Bearer k"})
r = urllib.request.urlopen(req, timeout=300)
open(out, "w").write(json.dumps({"status": r.status, "body": json.loads(r.read())}))
EOF
}
sys_msg=$(python3 -c 'print(" ".join(["You are a careful assistant who answers briefly."] * 12))')
t1=$(python3 -c 'import json,sys; print(json.dumps([{"role":"system","content":sys.argv[1]},{"role":"user","content":"Tell me a story."}]))' "$sys_msg")
chat "$t1" true "$tmp/t1.json"
answer=$(json "$tmp/t1.json" 'j["body"]["choices"][0]["message"]["content"]')
t2=$(python3 -c 'import json,sys; m=json.loads(sys.argv[1]); m += [{"role":"assistant","content":sys.argv[2]},{"role":"user","content":"Another one."}]; print(json.dumps(m))' "$t1" "$answer")
chat "$t2" true "$tmp/t2c.json"
chat "$t2" false "$tmp/t2f.json"
n1=$(ntok "$tmp/t1.json"); c=$(cached "$tmp/t2c.json")
check "chat: second turn has the first turn's prompt cached ($c; first turn $n1 tokens)" \
    '[ "$c" -ge $((n1 - 1)) ] && [ "$c" -lt "$(ntok "$tmp/t2c.json")" ] && [ "$(cached "$tmp/t2f.json")" = 0 ]'
check "chat: second turn gives the cold run's tokens" \
    '[ -n "$(ids "$tmp/t2f.json")" ] && [ "$(ids "$tmp/t2c.json")" = "$(ids "$tmp/t2f.json")" ]'
curl -s -H "$H" $U/slots >"$tmp/slots.json"
got=$(json "$tmp/slots.json" '(len(j), sorted(s["cached_tokens"] for s in j)[-1] >= '"$n1"', all(s["state"] == "idle" for s in j), sum(s["cached_tokens"] > 0 for s in j))')
# the cold (cache_prompt false) run's slot was left empty: one slot holds tokens
check "/slots: 3 slots, idle, one holding the chat's tokens, the cold run's emptied ($got)" \
    '[ "$got" = "3 True True 1" ]'
# enable_thinking changes the rendered prompt: only the common tokens are reused
t2x=$(python3 -c 'import json,sys; print(json.dumps({"messages": json.loads(sys.argv[1]), "max_tokens": 4, "temperature": 0, "enable_thinking": False}))' "$t2")
curl -s -H "$H" $U/v1/chat/completions -d "$t2x" >"$tmp/t2x.json"
c=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens_details"]["cached_tokens"])' "$tmp/t2x.json")
n2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' "$tmp/t2x.json")
check "chat: enable_thinking false reuses only the common prefix ($c of $n2)" \
    '[ "$c" -gt 0 ] && [ "$c" -lt $((n2 - 1)) ]'
stop "[qwen3-micro]"

# ---- --cache-slots: KV sequences that only keep prompts ------------------------------------------
# --parallel 1 alone: B's request evicts A's cache (one slot). With --cache-slots 2, A's next
# request finds its prefix in a slot that no request is running in.
other=$(echo "$words" | tr 'a-z' 'b-za' | cut -d" " -f1-200)
for extra in 0 2; do
    P=$(port); start "$S" "$P" --parallel 1 --cache-slots $extra --batch 100 ||
        { bad "stories260K server with --cache-slots $extra starts"; finish; }
    U=http://127.0.0.1:$P
    post "$U" /v1/completions "$(body "$half" true)" "$tmp/k-a1.json"
    post "$U" /v1/completions "$(body "$other" true)" "$tmp/k-b1.json"
    post "$U" /v1/completions "$(body "$words" true)" "$tmp/k-a2.json"
    post "$U" /v1/completions "$(body "$words" false)" "$tmp/k-a2f.json"
    c=$(cached "$tmp/k-a2.json"); na=$(ntok "$tmp/k-a1.json")
    if [ $extra = 0 ]; then
        check "--parallel 1: the request in between evicted the first one's cache ($c cached)" \
            '[ "$c" -lt 16 ]'
    else
        check "--cache-slots 2: the first prompt's cache survived a request in between ($c of $na)" \
            '[ "$c" -ge $((na - 1)) ]'
        check "--cache-slots 2: the cached run gives the cold run's tokens" \
            '[ -n "$(ids "$tmp/k-a2f.json")" ] && [ "$(ids "$tmp/k-a2.json")" = "$(ids "$tmp/k-a2f.json")" ]'
        got=$(curl -s $U/props | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["total_slots"], j["cache_slots"])')
        check "/props: 1 slot that runs, 2 that cache ($got)" '[ "$got" = "1 2" ]'
        check "/slots lists all 3 sequences" \
            '[ "$(curl -s $U/slots | python3 -c "import json,sys; print(len(json.load(sys.stdin)))")" = 3 ]'
        check "the access line names the cached tokens (cached_tokens=$c)" \
            'grep -q "prompt_tokens=$(ntok "$tmp/k-a2.json") cached_tokens=$c gen_tokens=" "$tmp/server.log"'
    fi
    stop "[--cache-slots $extra]"
done
code=$("$E" serve -m "$S" --cache-slots 999 2>/dev/null; echo $?)
check "--cache-slots out of range: usage error, exit 2 ($code)" '[ "$code" = 2 ]'
finish
