#!/usr/bin/env bash
# ci-fuzz.sh — CI's fuzzing step: build the libFuzzer targets of tests/fuzz/ with clang under
# ASan+UBSan and run each for a bounded time over its committed seed corpus
# (tests/fuzz/corpus/<name>/); any crash, sanitizer report, leak, timeout or OOM fails.
#
#   scripts/ci-fuzz.sh [SECONDS]      (default 60 per target; the targets run side by side)
#
# Environment: HX_FUZZ_BUILD (build folder, default build-fuzz), HX_DATA (shared test data,
# default ../shared/data: the vocabularies of fuzz-request and fuzz-grammar, and every .gguf there replayed once
# through fuzz-gguf), CI=true (missing data fails instead of skipping). New inputs found go to
# $HX_FUZZ_BUILD/fuzz-corpus/<name>/ (kept between local runs), crash reproducers to
# $HX_FUZZ_BUILD/fuzz-artifacts/. docs/testing.md, "Fuzzing", says how to reproduce and keep them.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-${HX_FUZZ_SECONDS:-60}}
build=${HX_FUZZ_BUILD:-build-fuzz}
data=${HX_DATA:-$PWD/../shared/data}
ci=${CI:-false}

rule=################################################################
banner() { printf '\n%s\n%s\n%s\n' "$rule" "$1" "$rule" >&2; }
die() { banner "FUZZ STEP FAILED: $1"; exit 1; }

echo "== fuzz: build ($build: clang, ASan+UBSan, libFuzzer)"
mkdir -p "$build"
CC=clang cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHX_FUZZ=ON \
    -DHX_SANITIZE=ON -DHX_BACKEND_VULKAN=OFF -DHX_BACKEND_HIP=OFF -DHX_SERVER=ON -DHX_WERROR=ON \
    -DHX_DATA_DIR="$data" >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; die "configure failed"; }
cmake --build "$build" -j2 --target fuzz-gguf fuzz-http fuzz-request fuzz-grammar || die "build failed"

targets=(fuzz-gguf fuzz-http fuzz-request fuzz-grammar)
if [ ! -f "$data/vocab/ggml-vocab-qwen2.gguf" ]; then
    if [ "$ci" = true ]; then die "fuzz-request and fuzz-grammar need the shared test data ($data/vocab/)"; fi
    echo "SKIP: fuzz-request, fuzz-grammar (no shared test data at $data; set HX_DATA)"
    targets=(fuzz-gguf fuzz-http)
fi

rm -rf "$build/fuzz-artifacts"
mkdir -p "$build/fuzz-logs" "$build/fuzz-artifacts"
# Real files first: every .gguf of the shared data, once each, through the GGUF target.
mapfile -t real < <(find "$data" -name '*.gguf' -size -64M 2>/dev/null | sort)
if [ ${#real[@]} -gt 0 ]; then
    echo "== fuzz: fuzz-gguf over ${#real[@]} real GGUF files from $data"
    "$build/tests/fuzz/fuzz-gguf" -error_exitcode=1 -rss_limit_mb=4096 \
        -artifact_prefix="$build/fuzz-artifacts/fuzz-gguf-" "${real[@]}" \
        >"$build/fuzz-logs/fuzz-gguf-real.log" 2>&1 ||
        { tail -n 60 "$build/fuzz-logs/fuzz-gguf-real.log" >&2; die "fuzz-gguf: a real file"; }
fi

echo "== fuzz: ${targets[*]} for ${secs} s each, side by side"
declare -A pid
for t in "${targets[@]}"; do
    name=${t#fuzz-}
    args=()
    if [ -f "tests/fuzz/$name.dict" ]; then args+=(-dict="tests/fuzz/$name.dict"); fi
    mkdir -p "$build/fuzz-corpus/$name"
    "$build/tests/fuzz/$t" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2560 \
        -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 "${args[@]}" \
        -artifact_prefix="$build/fuzz-artifacts/$t-" \
        "$build/fuzz-corpus/$name" "tests/fuzz/corpus/$name" >"$build/fuzz-logs/$t.log" 2>&1 &
    pid[$t]=$!
done
failed=()
for t in "${targets[@]}"; do
    rc=0
    wait "${pid[$t]}" || rc=$?
    log=$build/fuzz-logs/$t.log
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n 1 || true)
    if [ "$rc" -eq 0 ]; then
        echo "fuzz: $t ok: ${runs:-?} runs, $cov"
    else
        failed+=("$t")
        banner "FUZZ FAILURE: $t (exit $rc) — its report:"
        grep -v -E '^#[0-9]+.*(NEW|REDUCE|pulse)' "$log" | tail -n 80 >&2
        for a in "$build/fuzz-artifacts/$t-"*; do
            [ -f "$a" ] || continue
            echo "reproducer $a ($(stat -c %s "$a") bytes), base64:" >&2
            head -c 4096 "$a" | base64 -w 100 >&2
        done
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    die "${failed[*]} — reproduce with: $build/tests/fuzz/<target> $build/fuzz-artifacts/<file>"
fi
echo "fuzz: all targets ok"
