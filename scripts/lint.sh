#!/usr/bin/env bash
# lint.sh — the checks style.md asks of every change, in one command:
#
#   1. warnings as errors: the whole tree built with gcc and with clang, -DHX_WERROR=ON, in
#      build-lint-gcc/ and build-lint-clang/ (a compiler that is not installed is reported
#      and skipped). The GPU modules (hipcc, nvcc) do not depend on the host compiler: the
#      clang build leaves them to the gcc build. --gcc-build DIR reuses a gcc -Werror build
#      already configured in DIR (CI's main build) instead of a second one;
#   2. formatting: `clang-format --dry-run` over the C sources against .clang-format, reporting
#      how many files (and lines) would change; nothing is rewritten;
#   3. banned calls in core/ and backends/ (style.md §9, like curl's checksrc): printf,
#      fprintf, malloc, calloc, realloc, free, exit, abort, strcpy, atoi. Library code goes
#      through hx_malloc/hx_free and HX_LOG_*; core/alloc.c (the allocator hooks),
#      core/log.c (the default log sink and the assert handler) and the hx-hip-rtc program
#      (backends/hip/hip-rtc-helper.c) are the only exceptions, besides a line whose comment
#      says why: "lint: allow (REASON)" (another library's allocation given back with free);
#   4. the engine program's one way into the core: no file in app/ includes a path into core/
#      ("../core/registry.h"). The build keeps core/ off app/'s include path; what app/ may
#      use of the core is core/internal/hx-internal.h;
#   5. shell tests call only what exists: every command tests/*.sh and tests/*/*.sh run by name
#      is a function they define (or tests/lib.sh's, or a sourced file's), a bash builtin, a
#      command on PATH, or an optional tool they probe for (command -v); on every branch, also
#      those this machine does not take (scripts/check-sh-calls.py says what it reads).
#
# Usage: scripts/lint.sh [--no-build] [--gcc-build DIR] [--format-strict] [--files] [-j N]
#   --no-build       skip 1 (formatting, banned calls, app/'s includes, the shell tests'
#                    calls; a few seconds)
#   --gcc-build DIR  the gcc check builds DIR (must be configured with gcc, -DHX_WERROR=ON)
#   --format-strict  formatting differences fail the run (default: reported only, because
#                    the tree predates .clang-format)
#   --files          list every file clang-format would change
#   -j N             ninja jobs (default 1: the build machines are shared)
# Exit status: 0 clean, 1 if a build, the banned-call, include or shell-call check, or (strict)
# formatting failed.
set -uo pipefail
cd "$(dirname "$0")/.."

build=1 strict=0 list=0 jobs=1 gcc_dir=""
while [ $# -gt 0 ]; do
    case "$1" in
    --no-build) build=0 ;;
    --gcc-build) gcc_dir="${2:?--gcc-build needs a build directory}"; shift ;;
    --format-strict) strict=1 ;;
    --files) list=1 ;;
    -j) jobs="${2:?-j needs a number}"; shift ;;
    -j*) jobs="${1#-j}" ;;
    -h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lint: unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

fail=0
note() { printf 'lint: %s\n' "$*"; }

# C sources of the tree: tracked and new (not ignored) files; generated tables excluded.
# C sources of the tree: tracked and new (not ignored) files, or every file outside build*/
# when this is not a git checkout; the generated Unicode tables are excluded.
c_sources() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        { git ls-files -- '*.c' '*.h'; git ls-files --others --exclude-standard -- '*.c' '*.h'; }
    else
        find . -path './build*' -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print |
            sed 's|^\./||'
    fi | sort -u | grep -v -e '^core/unicode-data\.c$' -e '^build' |
        while read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done
}

# ---- 1. gcc and clang, -Werror -------------------------------------------------------------
lint_build() {
    local cc=$1 cxx=$2 dir=build-lint-$1
    shift 2
    if ! command -v "$cc" >/dev/null 2>&1; then
        note "$cc: not installed, skipped"
        return 0
    fi
    local log=$dir/lint.log
    mkdir -p "$dir"
    if ! cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHX_WERROR=ON \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" "$@" >"$log" 2>&1; then
        note "$cc: configure FAILED (see $log)"
        tail -n 20 "$log"
        return 1
    fi
    if ! ninja -C "$dir" -j "$jobs" >>"$log" 2>&1; then
        note "$cc: build with -Werror FAILED (see $log); first errors:"
        grep -E 'error|warning' "$log" | head -n 20
        return 1
    fi
    note "$cc: clean with -Werror ($("$cc" --version | head -n 1))"
}

# An existing gcc -Werror build (CI's main one): built (a no-op when current) and reported.
lint_reuse() {
    local dir=$1 cache=$1/CMakeCache.txt
    if ! grep -q '^HX_WERROR:BOOL=ON' "$cache" 2>/dev/null ||
        ! grep -Eq '^CMAKE_C_COMPILER:[A-Z]+=(.*/)?(gcc|cc)(-[0-9]+)?$' "$cache"; then
        note "--gcc-build $dir: not a gcc build configured with -DHX_WERROR=ON ($cache)"
        return 1
    fi
    if ! ninja -C "$dir" -j "$jobs" >"$dir/lint.log" 2>&1; then
        note "gcc: build with -Werror FAILED in $dir (see $dir/lint.log); first errors:"
        grep -E 'error|warning' "$dir/lint.log" | head -n 20
        return 1
    fi
    note "gcc: clean with -Werror in $dir ($(gcc --version | head -n 1))"
}

if [ "$build" = 1 ]; then
    if [ -n "$gcc_dir" ]; then
        lint_reuse "$gcc_dir" || fail=1
    else
        lint_build gcc g++ || fail=1
    fi
    lint_build clang clang++ -DHX_HIP_AMD=OFF -DHX_HIP_NV=OFF || fail=1
fi

# ---- 2. clang-format ------------------------------------------------------------------------
if command -v clang-format >/dev/null 2>&1; then
    total=0 changed=0 lines=0 changed_files=""
    while read -r f; do
        total=$((total + 1))
        n=$(clang-format --style=file "$f" | diff -- "$f" - | grep -c '^[<>]')
        if [ "$n" -gt 0 ]; then
            changed=$((changed + 1)) lines=$((lines + n))
            changed_files="$changed_files $f($n)"
        fi
    done < <(c_sources)
    note "clang-format ($(clang-format --version | sed 's/.*version //')): $changed of $total C files would change ($lines diff lines); nothing was rewritten"
    if [ "$list" = 1 ] && [ -n "$changed_files" ]; then
        printf '  %s\n' $changed_files
    fi
    if [ "$changed" -gt 0 ]; then
        note "  see one: clang-format --style=file FILE | diff FILE -"
        [ "$strict" = 1 ] && fail=1
    fi
else
    note "clang-format not installed: formatting not checked (apt-get install clang-format)"
    [ "$strict" = 1 ] && fail=1
fi

# ---- 3. banned calls in library code --------------------------------------------------------
banned='printf|fprintf|malloc|calloc|realloc|free|exit|abort|strcpy|atoi'
# Strip comments and string literals first (so "call abort()" in a message is fine), then
# look for a banned name called as a function, not as a member or part of a longer name.
# Exceptions: core/alloc.c, core/log.c, and backends/hip/hip-rtc-helper.c (the hx-hip-rtc
# program: a process of its own whose main reports on stdout/stderr); and a line that says
# why with a "lint: allow (REASON)" comment (a library's own allocation given back with free).
hits=$(c_sources | grep -E '^(core|backends)/.*\.[ch]$' |
    grep -v -e '^core/alloc\.c$' -e '^core/log\.c$' -e '^backends/hip/hip-rtc-helper\.c$' |
    while read -r f; do
        sed -e 's://.*$::' -e 's:/\*.*\*/::g' -e 's:"\([^"\\]\|\\.\)*":"":g' "$f" |
            grep -nE "(^|[^A-Za-z0-9_.>])($banned)[[:space:]]*\(" |
            grep -vE '^[0-9]+:[[:space:]]*\*' | cut -d: -f1 |
            while read -r n; do sed -n "${n}p" "$f" | grep -q 'lint: allow (.*[a-z].*)' && continue; printf '%s:%s: %s\n' "$f" "$n" "$(sed -n "${n}p" "$f" | sed 's/^[[:space:]]*//')"; done
    done)
if [ -n "$hits" ]; then
    note "banned calls in core/ or backends/ (use hx_malloc/hx_free, HX_LOG_*, return a status):"
    printf '%s\n' "$hits" | sed 's/^/  /'
    fail=1
else
    note "banned calls: none in core/ and backends/"
fi

# ---- 4. app/ reaches core/ only through core/internal/hx-internal.h -------------------------
leaks=$(c_sources | grep -E '^app/' | while read -r f; do
    grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*core/' "$f" | sed "s|^|$f:|"
done)
if [ -n "$leaks" ]; then
    note "app/ includes core/ by path (what it needs of the core goes in core/internal/hx-internal.h):"
    printf '%s\n' "$leaks" | sed 's/^/  /'
    fail=1
else
    note "app/ reaches core/ only through core/internal/hx-internal.h"
fi

# ---- 5. shell tests call only what exists ---------------------------------------------------
if ! command -v python3 >/dev/null 2>&1; then
    note "python3 not installed: the shell tests' calls not checked"
elif calls=$(python3 scripts/check-sh-calls.py . 2>&1); then
    note "shell tests: every command they call by name exists"
else
    note "shell tests call what does not exist (a helper lost or misspelt?):"
    printf '%s\n' "$calls" | sed 's/^/  /'
    fail=1
fi

if [ "$fail" = 0 ]; then note "OK"; else note "FAILED"; fi
exit "$fail"
