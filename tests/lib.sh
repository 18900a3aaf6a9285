# tests/lib.sh — sourced by the shell tests: pass/fail/skip counters and the skip rule of
# tests/harness.h, so a shell test reports like a C one.
#   ok MSG / bad MSG      one check passed / failed
#   skip MSG              something the test needs is missing (the shared data, a Vulkan
#                         device, the validation layer, a toolchain the setup installs, node):
#                         counted as a skip, and in CI (CI=true), which has all of these, a
#                         failure
#   na MSG                the check does not apply to this build or machine (a backend the
#                         build turned off): printed, not counted
#   finish                prints "N passed, N failed, N skipped" and exits 1 if anything
#                         failed, else 77 (CTest: skipped, never passed) if anything was
#                         skipped, else 0
#   need_file PATH        skip (and return 1) unless PATH exists: `need_file "$M" || ...`
#   sanitized             true when the engine under test is the sanitizer build (HX_SANITIZE
#                         in $HX_BUILD's CMakeCache: CI's second run, several times slower)
pass=0 fail=0 skips=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
in_ci() { [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; }
skip() {
  if in_ci; then bad "skipped in CI (CI=true), which has everything this test needs: $*"
  else skips=$((skips + 1)); echo "SKIP $*"; fi
}
na() { echo "N/A  $*"; }
sanitized() { grep -qs '^HX_SANITIZE:BOOL=ON' "${HX_BUILD:-/nonexistent}/CMakeCache.txt"; }
need_file() { [ -e "$1" ] && return 0; skip "missing $1"; return 1; }
finish() {
  echo "$pass passed, $fail failed, $skips skipped"
  [ "$fail" -gt 0 ] && exit 1
  [ "$skips" -gt 0 ] && exit 77
  exit 0
}
