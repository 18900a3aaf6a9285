#!/usr/bin/env bash
# test-server-hostile.sh — `engine serve` against a raw-socket client that behaves as old or
# hostile clients do (tests/server/hostile.py): pipelining without reading the answers (the
# server's memory stays bounded), HTTP/1.0 streams (no chunked coding), split and pipelined
# requests, a head that never ends, limits and malformed input, a stream cut by the client.
# Then SIGTERM exits 0. The request-level bad input is tests/server/badinput.test.mjs's.
set -u
E=${HX_ENGINE:?HX_ENGINE}; D=${HX_DATA:?HX_DATA}
here=$(cd "$(dirname "$0")" && pwd)
# Missing prerequisites: lib.sh's skip_test (exit 77; a failure in CI, which has them).
# shellcheck source=tests/lib.sh
. "$here/lib.sh"
S=$D/stories260K/stories260K.gguf
[ -f "$S" ] || skip_test "the shared test data is missing ($S)"
for t in curl python3; do
    command -v $t >/dev/null || skip_test "$t is not installed (scripts/setup-debian.sh installs it)"
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

"$E" serve -m "$S" --port 0 --threads 1 --parallel 2 --timeout 2 2>"$tmp/server.log" &
PID=$!
port=""
for _ in $(seq 200); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$tmp/server.log")
    [ -n "$port" ] && curl -sf "127.0.0.1:$port/health" >/dev/null && break
    sleep 0.05
done
curl -sf "127.0.0.1:$port/health" >/dev/null || { echo "FAIL server did not start"; cat "$tmp/server.log"; exit 1; }
san=; sanitized && san=sanitized
python3 "$here/server/hostile.py" "$port" "$PID" $san || fail=1
check "alive afterwards" '[ "$(curl -s -o /dev/null -w "%{http_code}" 127.0.0.1:$port/health)" = 200 ]'
kill -TERM $PID; wait $PID; rc=$?
check "SIGTERM exits 0 (got $rc)" '[ $rc = 0 ]'
[ $fail = 0 ] || grep -v "^hx-serve: req=" "$tmp/server.log" | tail -n 20
exit_with $fail
