# tests/lib.sh — sourced by the shell tests: pass/fail/skip counters and the skip rule of
# tests/harness.h, so a shell test reports like a C one.
#   ok MSG / bad MSG      one check passed / failed
#   skip MSG              something the test needs is missing (the shared data, a Vulkan
#                         device, the validation layer, a toolchain the setup installs, node):
#                         counted as a skip, and in CI (CI=true), which has all of these, a
#                         failure
#   na MSG                the check does not apply to this build or machine (a backend the
#                         build turned off): printed, not counted
#   finish                counts the missing commands called (below) as failures, prints
#                         "N passed, N failed, N skipped" and exits 1 if anything failed,
#                         else 77 (CTest: skipped, never passed) if anything was skipped,
#                         else 0
#   skip_test MSG         the whole test cannot run: exit 77, or FAIL and exit 1 in CI
#   exit_with STATUS      exit STATUS (1 if a missing command was called): tests without finish
#   need_file PATH        skip (and return 1) unless PATH exists: `need_file "$M" || ...`
#   sanitized             true when the engine under test is the sanitizer build (HX_SANITIZE
#                         in $HX_BUILD's CMakeCache: CI's second run, several times slower)
# A command that does not exist is a failure: a helper lost in a refactor or misspelt would
# otherwise print "command not found" and let the checks around it pass. Bash calls
# command_not_found_handle for it, in a child process and also inside the test's functions,
# subshells, pipelines and $(...); the handler prints a FAIL line on stderr and appends the
# name and place to $hx_missing (one file per test, by the test's $$), and finish counts each
# line as a failure. Probing an optional tool with `command -v X` or `which X` calls no
# handler; running X directly where it may be missing does, so probe first. Not covered: a
# separate `bash -c`/`bash script` (it does not inherit the function; one that sources lib.sh
# has its own), `exec X`, a test that exits without finish, and a branch the run does not take:
# scripts/lint.sh checks every branch statically (scripts/check-sh-calls.py).
pass=0 fail=0 skips=0
hx_missing=${TMPDIR:-/tmp}/hx-lib-missing.$$
rm -f "$hx_missing"
command_not_found_handle() {
  local at="${BASH_SOURCE[1]##*/}:${BASH_LINENO[0]}"
  echo "FAIL command not found: $1 ($at)" >&2
  echo "$1 ($at)" >> "$hx_missing"
  return 127
}
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
in_ci() { [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; }
skip() {
  if in_ci; then bad "skipped in CI (CI=true), which has everything this test needs: $*"
  else skips=$((skips + 1)); echo "SKIP $*"; fi
}
# skip_test MSG: the whole test cannot run (its data or a tool is missing): exit 77 at once,
# or in CI (CI=true), which has everything, FAIL and exit 1. For tests that stop rather than
# count skips (the server tests).
skip_test() {
  rm -f "$hx_missing"
  if in_ci; then echo "FAIL $* (CI=true: CI must have it)"; exit 1; fi
  echo "SKIP: $*"; exit 77
}
# exit_with STATUS: for a test that keeps its own verdict rather than calling finish: exits
# STATUS, or 1 if a command it called does not exist (as finish counts them)
exit_with() {
  local st=$1 m
  if [ -s "$hx_missing" ]; then
    while read -r m; do echo "FAIL command not found: $m"; done < "$hx_missing"
    st=1
  fi
  rm -f "$hx_missing"
  exit "$st"
}
na() { echo "N/A  $*"; }
sanitized() { grep -qs '^HX_SANITIZE:BOOL=ON' "${HX_BUILD:-/nonexistent}/CMakeCache.txt"; }
need_file() { [ -e "$1" ] && return 0; skip "missing $1"; return 1; }
finish() {
  local m
  if [ -s "$hx_missing" ]; then
    while read -r m; do bad "command not found: $m"; done < "$hx_missing"
  fi
  rm -f "$hx_missing"
  echo "$pass passed, $fail failed, $skips skipped"
  [ "$fail" -gt 0 ] && exit 1
  [ "$skips" -gt 0 ] && exit 77
  exit 0
}
