#!/usr/bin/env bash
# test-server.sh — `engine serve` end to end on loopback with curl and python3: unit self-test,
# health, completions (greedy output equals `engine run --temp 0`), chat streaming, error
# shapes, API key; options refused before listening; unique response ids across restarts;
# prompts of 1x, 1x+1 and 3x the batch size and one that nearly fills the context, under
# several --batch sizes; chunks that arrive while the generation runs; a disconnect logged with
# the tokens /metrics counted; a shutdown that cuts streams short says so. The slow generations
# use the engine's fault injector (HX_FAULT mode=slow: every cpu split sleeps first), so the
# timing checks compare the server with itself, never with a fixed figure.
# The OpenAI-client tests are test-server-openai.sh, the wrk load run test-server-load.sh.
set -u
E=${HX_ENGINE:?HX_ENGINE}; D=${HX_DATA:?HX_DATA}
here=$(cd "$(dirname "$0")" && pwd)
src=${HX_SOURCE:-$(cd "$here/.." && pwd)}
# Missing prerequisites: lib.sh's skip_test (exit 77; a failure in CI, which has them).
# shellcheck source=tests/lib.sh
. "$here/lib.sh"
S=$D/stories260K/stories260K.gguf; Q=$D/qwen3/qwen3-micro-q8_0.gguf
[ -f "$S" ] && [ -f "$Q" ] || skip_test "the shared test data is missing ($S, $Q)"
for t in curl python3; do
    command -v $t >/dev/null || skip_test "$t is not installed (scripts/setup-debian.sh installs it)"
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
"$E" serve --self-test -m "$Q" || exit 1
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
start() { # model port extra... (the server's stderr goes to $tmp/server.log)
  local m=$1 p=$2; shift 2
  "$E" serve -m "$m" --port "$p" --threads 1 "$@" 2>>"$tmp/server.log" &
  for _ in $(seq 200); do curl -sf "127.0.0.1:$p/health" >/dev/null && return 0; sleep 0.1; done
  return 1
}
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
# json FILE EXPR: evaluate the python expression EXPR with j = the JSON in FILE (a tuple prints
# its items separated by spaces)
json() {
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); r=eval(sys.argv[2])
print(" ".join(map(str, r)) if isinstance(r, tuple) else r)' "$@"
}
metric() { curl -s "$1/metrics" | awk -v k="$2" '$1 == k { print $2 }'; }

# ---- options the engine can judge are refused before anything listens (exit 2) ----------------
for bad in "--chat-template bogus" "--policy bogus" "--backend bogus" "--fallback cpu,bogus" \
           "--batch 0"; do
    # shellcheck disable=SC2086
    timeout 20 "$E" serve -m "$S" --port "$(port)" $bad >"$tmp/bad.out" 2>&1; rc=$?
    check "serve $bad: exit 2 before listening (rc $rc)" \
        '[ $rc = 2 ] && ! grep -q listening "$tmp/bad.out" && grep -q "bogus\|--batch" "$tmp/bad.out"'
done
timeout 20 "$E" serve -m "$tmp/no-such.gguf" --port "$(port)" >"$tmp/bad.out" 2>&1; rc=$?
check "serve with a missing model: exit 1 before listening (rc $rc)" \
    '[ $rc = 1 ] && ! grep -q listening "$tmp/bad.out"'

P1=$(port); start "$S" "$P1" --parallel 4 || { echo "server did not start"; exit 1; }; PID1=$!
U=127.0.0.1:$P1
check "the startup line names the policy and the devices" \
    'grep -q "model loaded (stories260K; policy single .*devices: cpu)" "$tmp/server.log"'
want=$("$E" run -m "$S" -p "Once upon a time" -n 24 --temp 0 2>/dev/null)
curl -s $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0}' >"$tmp/c1.json"
got=$(json "$tmp/c1.json" 'j["choices"][0]["text"]' | head -c -1)
check "greedy completion equals engine run" '[ "$got" = "$want" ]'
check "x-hx-devices header" 'curl -si $U/v1/models | grep -qi "^x-hx-devices: cpu"'
check "malformed JSON 400" '[ $(code $U/v1/completions -d "{") = 400 ]'
check "wrong type 400" '[ $(code $U/v1/completions -d "{\"prompt\":1}") = 400 ]'
check "n=2 400" '[ $(code $U/v1/completions -d "{\"prompt\":\"a\",\"n\":2}") = 400 ]'
check "unknown model 404" '[ $(code $U/v1/completions -d "{\"prompt\":\"a\",\"model\":\"nope\"}") = 404 ]'
check "unknown route 404" '[ $(code $U/nope) = 404 ]'
check "wrong method 405" '[ $(code $U/v1/completions) = 405 ]'
# stories260K has no chat template: not the client's fault (501, naming --chat-template)
curl -s $U/v1/chat/completions -d '{"messages":[{"role":"user","content":"hi"}]}' -o "$tmp/chat.json" -w '%{http_code}' >"$tmp/chat.code"
check "chat without a usable template: 501 naming --chat-template" \
    '[ "$(cat $tmp/chat.code)" = 501 ] && grep -q "chat-template" "$tmp/chat.json" && grep -q "engine serve: /v1/chat/completions will answer 501" "$tmp/server.log"'
head -c 5000000 /dev/zero | tr '\0' a > "$tmp/big"
check "huge body 413" '[ $(code $U/v1/completions --data-binary @$tmp/big -H "Expect:") = 413 ]'
sse=$(curl -sN $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":8,"stream":true,"stream_options":{"include_usage":true}}')
check "SSE stream ends with [DONE] and usage" 'echo "$sse" | grep -q "data: \[DONE\]" && echo "$sse" | grep -q "\"usage\""'
# concurrent streams + disconnects mid-stream
for i in $(seq 16); do curl -sN $U/v1/completions -d '{"prompt":"Once","max_tokens":64,"stream":true}' -o /dev/null & done
for i in $(seq 4); do timeout 0.05 curl -sN $U/v1/completions -d '{"prompt":"Once","max_tokens":200,"stream":true}' -o /dev/null & done
wait $(jobs -p | grep -v "^$PID1$") 2>/dev/null
check "alive after concurrent streams and disconnects" '[ $(code $U/health) = 200 ]'
check "metrics in Prometheus text" 'curl -s $U/metrics | grep -q "^hx_requests_total{route=\"/v1/completions\",status=\"200\"} [0-9]"'
for i in 1 2 3; do json "$tmp/c1.json" 'j["id"]' >>"$tmp/ids"; curl -s $U/v1/completions -d '{"prompt":"a","max_tokens":1}' -o "$tmp/c1.json"; done
kill -TERM $PID1; wait $PID1; rc=$?; check "SIGTERM exits 0 (got $rc)" '[ $rc = 0 ]'

# ---- chat roles: the error lists exactly the roles docs/server.md lists -----------------------
P2=$(port); start "$Q" "$P2" --api-key sekret || { echo "qwen server did not start"; exit 1; }; PID2=$!
U=127.0.0.1:$P2
check "missing API key 401" '[ $(code $U/v1/chat/completions -d "{}") = 401 ]'
check "wrong API key 401" '[ $(code $U/v1/chat/completions -H "Authorization: Bearer x" -d "{}") = 401 ]'
check "chat with key 200" '[ $(code $U/v1/chat/completions -H "Authorization: Bearer sekret" -d "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4}") = 200 ]'
curl -s $U/v1/chat/completions -H "Authorization: Bearer sekret" -o "$tmp/role.json" \
    -d '{"messages":[{"role":"wizard","content":"hi"}]}'
roles_err=$(json "$tmp/role.json" '" ".join(sorted(w for w in j["error"]["message"].split("must be ")[1].replace(",", " ").split() if w != "or"))')
roles_doc=$(sed -n 's/.*(string content or `text` parts; roles \([a-z/]*\)).*/\1/p' "$src/docs/server.md" | tr / '\n' | sort | tr '\n' ' ' | sed 's/ $//')
check "role error lists the roles of docs/server.md ('$roles_err' vs '$roles_doc')" \
    '[ -n "$roles_doc" ] && [ "$roles_err" = "$roles_doc" ]'
# a tool result answers an earlier assistant tool call (docs/server.md "Tool calls")
call='{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},'
for r in $roles_err; do
    pre=; id=; [ "$r" = tool ] && pre=$call && id=',"tool_call_id":"c1"'
    check "role $r is accepted" '[ $(code $U/v1/chat/completions -H "Authorization: Bearer sekret" -d "{\"messages\":[$pre{\"role\":\"$r\",\"content\":\"hi\"$id},{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1}") = 200 ]'
done
kill -INT $PID2; wait $PID2; rc=$?; check "SIGINT exits 0 (got $rc)" '[ $rc = 0 ]'

# ---- long prompts: 1x, 1x+1, 3x the batch size and nearly the whole context ---------------------
# "the" x k tokenizes to k+1 tokens on stories260K (BOS + one per word); usage shows the count.
ask() { # url words max_tokens(or -) out
    local body
    body=$(python3 -c 'import json, sys
k, mt = int(sys.argv[1]), sys.argv[2]
body = {"prompt": " ".join(["the"] * k), "temperature": 0}
if mt != "-": body["max_tokens"] = int(mt)
print(json.dumps(body))' "$2" "$3")
    python3 "$here/server/http_post.py" "$1" /v1/completions "$body" "$4"
}
N_CTX=2048
cfgs=("--parallel 2" "--parallel 3 --batch 100" "--parallel 3 --batch 7")
for ci in 0 1 2; do
    # shellcheck disable=SC2086
    P=$(port); start "$S" "$P" --ctx $N_CTX ${cfgs[$ci]} ||
        { echo "server ${cfgs[$ci]} did not start"; exit 1; }
    PID=$!; U=http://127.0.0.1:$P
    # the three batch-sized prompts at once: they share the prefill budget of each step
    for k in 511 512 1535; do ask $U $k 8 "$tmp/long-$ci-$k.json" & done
    wait $(jobs -p | grep -v "^$PID$") 2>/dev/null
    ask $U $((N_CTX - 2)) - "$tmp/long-$ci-full.json"     # N_CTX-1 tokens: room for one more
    ask $U $((N_CTX - 1)) - "$tmp/long-$ci-over.json"     # N_CTX tokens: no room
    ask $U 20000 4 "$tmp/long-$ci-huge.json"
    for k in 511 512 1535; do
        f=$tmp/long-$ci-$k.json
        got=$(json $f '(j["status"], j["body"]["usage"]["prompt_tokens"], j["body"]["usage"]["completion_tokens"])')
        check "[${cfgs[$ci]}] prompt of $((k + 1)) tokens: 200, usage $((k + 1)) + 8 ($got)" \
            '[ "$got" = "200 $((k + 1)) 8" ]'
        [ $ci = 0 ] && continue
        text=$(json $f 'j["body"]["choices"][0]["text"]')
        text0=$(json $tmp/long-0-$k.json 'j["body"]["choices"][0]["text"]')
        check "[${cfgs[$ci]}] $((k + 1)) tokens: same text as with --parallel 2" '[ "$text" = "$text0" ]'
    done
    got=$(json $tmp/long-$ci-full.json '(j["status"], j["body"]["usage"]["prompt_tokens"],
          j["body"]["usage"]["completion_tokens"], j["body"]["choices"][0]["finish_reason"])')
    check "[${cfgs[$ci]}] prompt of $((N_CTX - 1)) tokens: one token, finish length ($got)" \
        '[ "$got" = "200 $((N_CTX - 1)) 1 length" ]'
    for w in over huge; do
        got=$(json $tmp/long-$ci-$w.json '(j["status"], j["body"]["error"]["code"])')
        check "[${cfgs[$ci]}] prompt beyond the context ($w): 400 context_length_exceeded" \
            '[ "$got" = "400 context_length_exceeded" ]'
    done
    check "[${cfgs[$ci]}] alive afterwards" '[ $(code $U/health) = 200 ]'
    kill -TERM $PID; wait $PID; rc=$?; check "[${cfgs[$ci]}] SIGTERM exits 0 (got $rc)" '[ $rc = 0 ]'
done
ref512=$("$E" run -m "$S" -c $N_CTX -p "$(python3 -c 'print(" ".join(["the"] * 511))')" -n 8 \
         --temp 0 2>/dev/null)
text=$(json $tmp/long-0-511.json 'j["body"]["choices"][0]["text"]')
check "prompt of 512 tokens: same text as engine run" '[ "$text" = "$ref512" ]'
# every device present and a few split policies: a 701-token prompt in batches of 100 gives
# the text `engine run` gives on the same device or policy with the same batches
for dp in "--backend ref" "--backend vulkan" "--backend npu-sim" \
          "--policy layer-split:cpu=0.5,ref=0.5" "--policy phase-split:ref,cpu"; do
    dev=${dp#* }
    case $dp in --backend*) "$E" devices 2>/dev/null | grep -q "^  $dev *available" || continue ;; esac
    # shellcheck disable=SC2086
    P=$(port); start "$S" "$P" --ctx $N_CTX --batch 100 $dp || { check "server $dp starts" false; continue; }
    PID=$!
    ask http://127.0.0.1:$P 700 4 "$tmp/dev.json"
    # shellcheck disable=SC2086
    want=$("$E" run -m "$S" -c $N_CTX --batch 100 $dp -p "$(python3 -c 'print(" ".join(["the"] * 700))')" \
           -n 4 --temp 0 2>/dev/null)
    got=$(json "$tmp/dev.json" '(j["status"], j["body"]["usage"]["prompt_tokens"])')
    text=$(json "$tmp/dev.json" 'j["body"]["choices"][0]["text"]')
    check "[$dp --batch 100] 701-token prompt: 200 ($got), the text of engine run" \
        '[ "$got" = "200 701" ] && [ -n "$want" ] && [ "$text" = "$want" ]'
    kill -TERM $PID; wait $PID
done
# decode steps split when --batch < --parallel: three greedy streams at once, each as engine run
P=$(port); start "$S" "$P" --parallel 3 --batch 2 || { echo "server --batch 2 did not start"; exit 1; }
PID=$!; U=127.0.0.1:$P
for p in "Once upon a time" "The little dog" "One day"; do
    curl -s $U/v1/completions -d "{\"prompt\":\"$p\",\"max_tokens\":24,\"temperature\":0}" -o "$tmp/b2-${p// /_}.json" &
done
wait $(jobs -p | grep -v "^$PID$") 2>/dev/null
for p in "Once upon a time" "The little dog" "One day"; do
    want=$("$E" run -m "$S" -p "$p" -n 24 --temp 0 2>/dev/null)
    check "[--parallel 3 --batch 2] '$p' equals engine run" \
        '[ "$(json "$tmp/b2-${p// /_}.json" "j[\"choices\"][0][\"text\"]" | head -c -1)" = "$want" ]'
done
kill -TERM $PID; wait $PID

# ---- a slow generation: streaming, disconnects, shutdown mid-stream --------------------------
: >"$tmp/server.log"
P3=$(port)
HX_FAULT='dev=cpu,mode=slow,ms=20' start "$S" "$P3" --parallel 2 --grace 1 || { echo "slow server did not start"; exit 1; }
PID3=$!; U=127.0.0.1:$P3
curl -s $U/v1/completions -d '{"prompt":"a","max_tokens":1}' -o "$tmp/c3.json"
json "$tmp/c3.json" 'j["id"]' >>"$tmp/ids"
check "response ids are unique, also across restarts ($(tr '\n' ' ' <"$tmp/ids"))" \
    '[ $(sort -u "$tmp/ids" | wc -l) = 4 ] && [ $(sed -E "s/^cmpl-(.{16}).*/\1/" "$tmp/ids" | sort -u | wc -l) = 4 ]'
python3 "$here/server/sse_timing.py" "$P3" \
    '{"prompt":"Once upon a time","max_tokens":60,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' \
    >"$tmp/timing.out" 2>&1; rc=$?
cat "$tmp/timing.out"
check "SSE chunks arrive while the generation runs, not all at its end" '[ $rc = 0 ]'
# a client that goes away: its access line counts the tokens /metrics counts
before=$(metric $U hx_completion_tokens_total)
timeout 1 curl -sN $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":400,"stream":true}' -o /dev/null
for _ in $(seq 100); do [ "$(metric $U hx_generations_cancelled_total)" = 1 ] && break; sleep 0.05; done
delta=$(( $(metric $U hx_completion_tokens_total) - before ))
logged=$(sed -n 's/.* status=499 .*gen_tokens=\([0-9]*\) .*/\1/p' "$tmp/server.log")
check "a disconnect's access line counts the tokens /metrics counted ($logged vs $delta)" \
    '[ "$delta" -gt 0 ] && [ "$logged" = "$delta" ]'
# shutdown with a stream and a whole answer in flight; the 1 s grace runs out
{ curl -sN $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":400,"stream":true}' -o "$tmp/cut.sse"; echo $? >"$tmp/cut.rc"; } &
curl -s $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":400}' -o "$tmp/cut.json" -w '%{http_code}' >"$tmp/cut.code" &
for _ in $(seq 100); do [ "$(metric $U hx_active_slots)" = 2 ] && break; sleep 0.05; done
kill -TERM $PID3; wait $PID3; rc=$?
wait
check "SIGTERM with the grace period running out exits 0 (got $rc)" '[ $rc = 0 ]'
check "a stream cut by the shutdown ends cleanly (curl rc $(cat "$tmp/cut.rc"))" '[ "$(cat "$tmp/cut.rc")" = 0 ] && grep -q "^data: {\"id\"" "$tmp/cut.sse"'
check "... with an error event (server_shutdown) as its last event" \
    '[ "$(grep "^data: " "$tmp/cut.sse" | tail -n 1 | grep -c "\"error\":{.*\"code\":\"server_shutdown\"")" = 1 ]'
check "... and neither a finish_reason nor [DONE]" \
    '! grep -q "\"finish_reason\":\"" "$tmp/cut.sse" && ! grep -q "\[DONE\]" "$tmp/cut.sse"'
check "a whole answer cut by the shutdown: 503 server_shutdown ($(cat "$tmp/cut.code"))" \
    '[ "$(cat "$tmp/cut.code")" = 503 ] && [ "$(json "$tmp/cut.json" "j[\"error\"][\"code\"]")" = server_shutdown ]'
# (only the completions: a /health poll while the model loads is a 503 too, logged like any)
cut503() { grep "POST /v1/completions status=503 " "$tmp/server.log"; }
check "the access log marks the cut stream: status 503, truncated" \
    '[ $(cut503 | wc -l) = 2 ] && [ $(cut503 | grep -c " truncated$") = 1 ]'
[ "$(cut503 | wc -l)" = 2 ] || cut503 | sed 's/^/     log: /'
exit_with $fail
