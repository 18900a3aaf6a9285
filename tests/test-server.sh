#!/usr/bin/env bash
# test-server.sh — `engine serve` end to end on loopback: unit self-test, health, completions
# (greedy output equals `engine run --temp 0`), chat streaming, error shapes, API key, with curl
# only. The OpenAI-client tests are test-server-openai.sh, the wrk load run test-server-load.sh.
set -u
E=${HX_ENGINE:?HX_ENGINE}; D=${HX_DATA:?HX_DATA}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
S=$D/stories260K/stories260K.gguf; Q=$D/qwen3/qwen3-micro-q8_0.gguf
fail=0; check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
"$E" serve --self-test || exit 1
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
start() { # model port extra...
  local m=$1 p=$2; shift 2
  "$E" serve -m "$m" --port "$p" --threads 1 "$@" 2>>"$tmp/server.log" &
  for _ in $(seq 100); do curl -sf "127.0.0.1:$p/health" >/dev/null && return 0; sleep 0.1; done
  return 1
}
P1=$(port); start "$S" "$P1" --parallel 4 || { echo "server did not start"; exit 1; }; PID1=$!
U=127.0.0.1:$P1
want=$("$E" run -m "$S" -p "Once upon a time" -n 24 --temp 0 2>/dev/null)
got=$(curl -s $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0}' |
      python3 -c 'import json,sys;print(json.load(sys.stdin)["choices"][0]["text"],end="")')
check "greedy completion equals engine run" '[ "$got" = "$want" ]'
check "x-hx-devices header" 'curl -si $U/v1/models | grep -qi "^x-hx-devices:"'
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
check "malformed JSON 400" '[ $(code $U/v1/completions -d "{") = 400 ]'
check "wrong type 400" '[ $(code $U/v1/completions -d "{\"prompt\":1}") = 400 ]'
check "n=2 400" '[ $(code $U/v1/completions -d "{\"prompt\":\"a\",\"n\":2}") = 400 ]'
check "unknown model 404" '[ $(code $U/v1/completions -d "{\"prompt\":\"a\",\"model\":\"nope\"}") = 404 ]'
check "unknown route 404" '[ $(code $U/nope) = 404 ]'
check "wrong method 405" '[ $(code $U/v1/completions) = 405 ]'
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
kill -TERM $PID1; wait $PID1; rc=$?; check "SIGTERM exits 0 (got $rc)" '[ $rc = 0 ]'
P2=$(port); start "$Q" "$P2" --api-key sekret || { echo "qwen server did not start"; exit 1; }; PID2=$!
U=127.0.0.1:$P2
check "missing API key 401" '[ $(code $U/v1/chat/completions -d "{}") = 401 ]'
check "wrong API key 401" '[ $(code $U/v1/chat/completions -H "Authorization: Bearer x" -d "{}") = 401 ]'
check "chat with key 200" '[ $(code $U/v1/chat/completions -H "Authorization: Bearer sekret" -d "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4}") = 200 ]'
kill -INT $PID2; wait $PID2; rc=$?; check "SIGINT exits 0 (got $rc)" '[ $rc = 0 ]'
exit $fail
