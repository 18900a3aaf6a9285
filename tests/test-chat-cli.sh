#!/usr/bin/env bash
# test-chat-cli.sh — `engine chat`: multi-turn over stdin, EOF ends with exit 0, Ctrl-C (SIGINT)
# stops the current answer but not the program, a model without a chat template is a clear error.
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?}
M=$D/qwen3/qwen3-micro-q8_0.gguf
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass+1)); echo "ok   $1"; }
bad() { fail=$((fail+1)); echo "FAIL $1"; }
out=$(printf 'Hello there\nTell me more\n' | "$E" chat -m "$M" -n 8 --temp 0 2>&1); rc=$?
n=$(grep -o '> ' <<<"$out" | wc -l)
[ $rc -eq 0 ] && [ "$n" -ge 3 ] && ok "two turns then EOF (exit $rc, $n prompts)" || bad "multi-turn: rc=$rc prompts=$n"
mkfifo "$T/in"
"$E" chat -m "$M" -n 100000 -c 4096 --temp 0 < "$T/in" > "$T/out" 2>&1 &
pid=$!
exec 7>"$T/in"
echo "Write forever" >&7
sleep 1.5
kill -INT $pid 2>/dev/null
sleep 0.5
alive=0; kill -0 $pid 2>/dev/null && alive=1
echo "second turn" >&7
exec 7>&-
wait $pid; rc=$?
[ $alive -eq 1 ] && [ $rc -eq 0 ] && ok "Ctrl-C stops the answer, not the program" || bad "after SIGINT: alive=$alive rc=$rc"
out=$(printf 'hi\n' | "$E" chat -m "$D/stories260K/stories260K.gguf" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q 'known templates' <<<"$out" && ok "no chat template: clear error" || bad "no template: rc=$rc $out"
out=$(printf 'hi\n' | "$E" chat -m "$M" --chat-template nosuch 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q 'qwen3' <<<"$out" && ok "unknown --chat-template lists known ones" || bad "unknown template: rc=$rc $out"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
