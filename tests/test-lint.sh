#!/usr/bin/env bash
# test-lint.sh — scripts/lint.sh checked on planted inputs in a scratch tree (it does not lint
# or build the real tree): a banned call in core/ is caught with its file and line; the same
# names inside comments and strings, in core/alloc.c and in app/ are not; a file in app/ that
# includes a path into core/ is caught too, hx-internal.h is not; a clean tree passes;
# a misformatted file is counted, and fails only with --format-strict.
set -uo pipefail
src="${HX_SOURCE:-$(cd "$(dirname "$0")/.." && pwd)}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { # name, condition
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1"; fi
}

mkdir -p "$tmp/scripts" "$tmp/core" "$tmp/backends/x" "$tmp/app"
cp "$src/scripts/lint.sh" "$tmp/scripts/"
cp "$src/.clang-format" "$tmp/"
cat >"$tmp/core/good.c" <<'EOF'
/* good.c — a comment may say free() or abort() */
#include "hx-impl.h"

static const char *hx_msg = "run after a TIMEOUT without calling abort()";

int hx__good(void)
{
    char *p = hx_malloc(4);
    hx_free(p);
    return hx_msg[0];
}
EOF
cat >"$tmp/core/alloc.c" <<'EOF'
#include <stdlib.h>

void *hx__malloc(size_t n)
{
    return malloc(n);
}
EOF
cat >"$tmp/app/main.c" <<'EOF'
#include <stdio.h>

int main(void)
{
    printf("hello\n");
    return 0;
}
EOF
cat >"$tmp/app/leak.c" <<'EOF'
#include "../core/registry.h"
#include "hx-internal.h"
EOF
cat >"$tmp/backends/x/bad.c" <<'EOF'
#include <stdlib.h>

int hx__bad(void)
{
    char *p = malloc(4);
    return p != NULL;
}
EOF

out=$(bash "$tmp/scripts/lint.sh" --no-build 2>&1)
rc=$?
check "banned call fails the run" '[ $rc -ne 0 ]'
check "banned call named with file and line" 'grep -q "backends/x/bad.c:5: char \*p = malloc(4);" <<<"$out"'
check "comments and strings are not calls" '! grep -q "core/good.c" <<<"$out"'
check "core/alloc.c is exempt" '! grep -q "core/alloc.c" <<<"$out"'
check "app/ may print" '! grep -q "app/main.c" <<<"$out"'
check "app/ including core/ by path is named" 'grep -q "app/leak.c:1:#include \"../core/registry.h\"" <<<"$out"'
check "but not hx-internal.h" '! grep -q "app/leak.c:2" <<<"$out"'

rm "$tmp/backends/x/bad.c"
out=$(bash "$tmp/scripts/lint.sh" --no-build 2>&1)
rc=$?
check "app/ including core/ by path alone fails the run" '[ $rc -ne 0 ]'
rm "$tmp/app/leak.c"
out=$(bash "$tmp/scripts/lint.sh" --no-build 2>&1)
rc=$?
check "clean tree passes ($out)" '[ $rc -eq 0 ]'

if command -v clang-format >/dev/null 2>&1; then
    check "formatted files are not counted" 'grep -q " 0 of 3 C files would change" <<<"$out"'
    printf 'int hx__ugly( int a ){return a+1;}\n' >"$tmp/core/ugly.c"
    out=$(bash "$tmp/scripts/lint.sh" --no-build --files 2>&1)
    rc=$?
    check "a misformatted file is counted" 'grep -q " 1 of 4 C files would change" <<<"$out"'
    check "and listed with --files" 'grep -q "core/ugly.c" <<<"$out"'
    check "formatting alone does not fail" '[ $rc -eq 0 ]'
    bash "$tmp/scripts/lint.sh" --no-build --format-strict >/dev/null 2>&1
    rc=$?
    check "unless --format-strict" '[ $rc -ne 0 ]'
else
    check "missing clang-format is reported" 'grep -q "clang-format not installed" <<<"$out"'
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
