#!/usr/bin/env bash
# test-server-load.sh — a wrk load run against `engine serve` on loopback: every answer is 200
# or an intended 503 (the bounded queue is full), none is anything else, the server stays up,
# its active slots and queue drain to zero, and SIGTERM afterwards exits 0.
set -u
E=${HX_ENGINE:?HX_ENGINE}; D=${HX_DATA:?HX_DATA}
here=$(cd "$(dirname "$0")" && pwd)
# Missing prerequisites: lib.sh's skip_test (exit 77; a failure in CI, which has them).
# shellcheck source=tests/lib.sh
. "$here/lib.sh"
for f in stories260K/stories260K.gguf qwen3/qwen3-micro-q8_0.gguf; do
    [ -f "$D/$f" ] || skip_test "the shared test data is missing ($D/$f)"
done
for t in wrk curl; do
    command -v $t >/dev/null || skip_test "$t is not installed (scripts/setup-debian.sh installs it)"
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

# start MODEL ARGS...: sets PID and URL
start() {
    local m=$1; shift
    "$E" serve -m "$m" --port 0 --threads 1 "$@" 2>"$tmp/server.log" &
    PID=$!
    local port=""
    for _ in $(seq 200); do
        port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$tmp/server.log")
        [ -n "$port" ] && curl -sf "127.0.0.1:$port/health" >/dev/null && break
        sleep 0.05
    done
    URL=http://127.0.0.1:$port
    curl -sf "$URL/health" >/dev/null || { echo "FAIL server did not start"; cat "$tmp/server.log"; exit 1; }
}
metric() { curl -s "$URL/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }
statuses() { sed -n 's/^statuses: //p' "$tmp/wrk.out"; }
count() { statuses | tr ' ' '\n' | sed -n "s/^$1=//p"; }

# 1. capacity 4 + 8 with 24 connections: some requests must get the intended 503.
start "$D/stories260K/stories260K.gguf" --parallel 4 --queue 8
WRK_BODY='{"prompt":"Once upon a time","max_tokens":24,"temperature":0}' \
    wrk -t2 -c24 -d4s --latency -s "$here/server/wrk-post.lua" "$URL" >"$tmp/wrk.out" 2>&1
sed -n '/statuses:/,$p' "$tmp/wrk.out"
check "wrk ran and got 200s" '[ "$(count 200)" -gt 0 ]'
check "only 200 and 503 answers (other=$(count other))" '[ "$(count other)" = 0 ]'
check "no socket errors" 'grep -q "^errors: connect=0 read=0 write=0 status=[0-9]* timeout=0" "$tmp/wrk.out"'
check "server alive after the load" 'kill -0 $PID && [ "$(curl -s -o /dev/null -w %{http_code} $URL/health)" = 200 ]'
for _ in $(seq 100); do [ "$(metric hx_requests_in_flight)" = 0 ] && break; sleep 0.05; done
check "in-flight, slots and queue drained" '[ "$(metric hx_requests_in_flight)" = 0 ] && [ "$(metric hx_active_slots)" = 0 ] && [ "$(metric hx_queue_depth)" = 0 ]'
check "no 5xx but 503 in the access log" '! grep -E "status=5[0-9][0-9]" "$tmp/server.log" | grep -qv "status=503"'
kill -TERM $PID; wait $PID; rc=$?
check "SIGTERM after the load exits 0 (got $rc)" '[ $rc = 0 ]'

# 2. streaming chat on qwen3-micro with capacity for every connection: 200s only, no 503.
start "$D/qwen3/qwen3-micro-q8_0.gguf" --parallel 4 --queue 16
WRK_PATH=/v1/chat/completions \
WRK_BODY='{"messages":[{"role":"user","content":"hi"}],"max_tokens":16,"stream":true}' \
    wrk -t2 -c16 -d3s -s "$here/server/wrk-post.lua" "$URL" >"$tmp/wrk.out" 2>&1
sed -n '/statuses:/,$p' "$tmp/wrk.out"
check "streaming chat: all answers 200" '[ "$(count 200)" -gt 0 ] && [ -z "$(count 503)" ] && [ "$(count other)" = 0 ]'
kill -TERM $PID; wait $PID; rc=$?
check "SIGTERM exits 0 (got $rc)" '[ $rc = 0 ]'
[ $fail = 0 ] && echo "test-server-load: all passed"
exit_with $fail
