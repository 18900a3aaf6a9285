#!/usr/bin/env bash
# test-lint.sh — scripts/lint.sh checked on planted inputs in a scratch tree (it does not lint
# or build the real tree): a banned call in core/ is caught with its file and line; the same
# names inside comments and strings, in core/alloc.c and in app/ are not; a file in app/ that
# includes a path into core/ is caught too, hx-internal.h is not; a shell test that calls a
# function it does not define, on a branch no run here takes, is caught; a clean tree passes;
# a misformatted file is counted, and fails only with --format-strict.
# tests/lib.sh: a test that calls a command that does not exist (a lost helper), in its main
# body, a function, $(...), a pipeline, a subshell or a condition, fails with a FAIL line
# naming it and its line; probing with `command -v` or `which` does not.
# And scripts/check-docs.py: on planted docs it names each missing path, brace alternative,
# page, heading and hx_ name, and not what lies outside the tree; then on the real tree, where
# every path and name README.md and docs/ mention must exist.
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
    free(p); /* lint: allow (a library's own allocation) */
    free(p); /* lint: allow () */
    return p != NULL;
}
EOF

out=$(bash "$tmp/scripts/lint.sh" --no-build 2>&1)
rc=$?
check "banned call fails the run" '[ $rc -ne 0 ]'
check "banned call named with file and line" 'grep -q "backends/x/bad.c:5: char \*p = malloc(4);" <<<"$out"'
check "a line saying why with lint: allow is exempt" '! grep -q "backends/x/bad.c:6:" <<<"$out"'
check "  but not without a reason" 'grep -q "backends/x/bad.c:7:" <<<"$out"'
check "comments and strings are not calls" '! grep -q "core/good.c" <<<"$out"'
check "core/alloc.c is exempt" '! grep -q "core/alloc.c" <<<"$out"'
check "app/ may print" '! grep -q "app/main.c" <<<"$out"'
check "app/ including core/ by path is named" 'grep -q "app/leak.c:1:#include \"../core/registry.h\"" <<<"$out"'
check "but not hx-internal.h" '! grep -q "app/leak.c:2" <<<"$out"'

# a shell test calling a helper it does not define, only where a device exists: lint finds it
# although no run here would; a probed optional tool, here-document text, strings and a
# helper of the sourced lib.sh are fine
mkdir -p "$tmp/tests"
cp "$src/scripts/check-sh-calls.py" "$tmp/scripts/"
printf 'helper() { :; }\n' >"$tmp/tests/lib.sh"
cat >"$tmp/tests/test-x.sh" <<'EOF'
. "$(dirname "$0")/lib.sh"
shown() { echo "$1"; }
if [ -e /dev/hx-no-such-device ]; then
    refusedd "a lost helper" | tail -1
fi
command -v hx-optional-tool >/dev/null && hx-optional-tool --version
cat <<EOT
hx_not_a_call here
EOT
x=$(shown "hx_nor_this"; helper)
shown 'hx_nor; this'
EOF
out=$(bash "$tmp/scripts/lint.sh" --no-build 2>&1)
rc=$?
check "a shell test's undefined call fails the run" '[ $rc -ne 0 ]'
check "  named with file and line ($out)" 'grep -q "^  tests/test-x.sh:4: refusedd: " <<<"$out"'
check "  and nothing else" '[ "$(grep -c "^  tests/test-x.sh:" <<<"$out")" -eq 1 ]'
sed -i 's/refusedd/shown/' "$tmp/tests/test-x.sh"

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

# ---- tests/lib.sh: missing commands ---------------------------------------------------------
cat >"$tmp/missing.sh" <<EOF
. "$src/tests/lib.sh"
ok "a passing check"
helper() { hx_no_such_fn_b "\$@"; }
command -v hx_no_such_tool >/dev/null || na "probing an optional tool is fine"
which hx_no_such_tool >/dev/null 2>&1 || na "with which too"
hx_no_such_fn_a
helper x
out=\$(hx_no_such_fn_c 2>/dev/null)
hx_no_such_fn_d | cat
( hx_no_such_fn_e )
if hx_no_such_fn_f; then ok "never"; fi
finish
EOF
out=$(bash "$tmp/missing.sh" 2>/dev/null)
rc=$?
check "lib.sh: a missing command fails the test (exit $rc)" '[ $rc -eq 1 ]'
for w in a:6 b:3 c:8 d:9 e:10 f:11; do
    check "lib.sh: FAIL line for hx_no_such_fn_${w%:*} at line ${w#*:} ($out)" \
        'grep -q "^FAIL command not found: hx_no_such_fn_${w%:*} (missing.sh:${w#*:})$" <<<"$out"'
done
check "lib.sh: each counted as a failure ($out)" 'grep -q "^1 passed, 6 failed, 0 skipped$" <<<"$out"'
sed -i -e '/hx_no_such_fn/d' -e '/^helper/d' "$tmp/missing.sh"
out=$(bash "$tmp/missing.sh" 2>&1)
rc=$?
check "lib.sh: the probes alone pass ($out)" '[ $rc -eq 0 ] && grep -q "^1 passed, 0 failed, 0 skipped$" <<<"$out"'

# ---- scripts/check-docs.py ------------------------------------------------------------------
d="$tmp/docs-tree"
mkdir -p "$d/scripts" "$d/core" "$d/docs"
cp "$src/scripts/check-docs.py" "$d/scripts/"
printf '/* a.c */\nint hx__thing(void);\nint hx_detok_push(void);\n' >"$d/core/a.c"
cat >"$d/docs/x.md" <<'EOF'
# Title

`core/a.c` has `hx__thing()`; `hx_detok_*` and `core/*.c` match; see [the title](#title).
Outside the tree: `../shared/docs/style.md`, `build/tests/test-x`, `$dir/core/none.c`.
Stale: `core/a.{c,h}`, core/gone.c, `hx__gone`, [a page](nope.md), [a heading](#nothing).
EOF
out=$(python3 "$d/scripts/check-docs.py" "$d" 2>&1)
rc=$?
check "check-docs: stale mentions fail the run" '[ $rc -eq 1 ]'
check "check-docs: a missing brace alternative" 'grep -q "^docs/x.md:5: no such path: core/a.h$" <<<"$out"'
check "check-docs: a missing file" 'grep -q "^docs/x.md:5: no such path: core/gone.c$" <<<"$out"'
check "check-docs: a missing name" 'grep -q "^docs/x.md:5: no such name: hx__gone$" <<<"$out"'
check "check-docs: a missing page" 'grep -q "^docs/x.md:5: no such link: nope.md$" <<<"$out"'
check "check-docs: a missing heading" 'grep -q "^docs/x.md:5: no such heading: #nothing$" <<<"$out"'
check "check-docs: those five and nothing else ($out)" '[ "$(grep -c "^docs/" <<<"$out")" -eq 5 ]'
sed -i '5d' "$d/docs/x.md"
out=$(python3 "$d/scripts/check-docs.py" "$d" 2>&1)
rc=$?
check "check-docs: the fixed docs pass ($out)" '[ $rc -eq 0 ]'
out=$(python3 "$src/scripts/check-docs.py" "$src" 2>&1)
rc=$?
check "check-docs: every path and name in README.md and docs/ exists: $out" '[ $rc -eq 0 ]'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
