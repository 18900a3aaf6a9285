#!/usr/bin/env bash
# ci-xrt.sh — CI's check of the NPU backend's XRT glue against the real XRT API: compile (not
# link: there is no libxrt_coreutil here) backends/npu/npu-xrt.cpp against XRT 2.26's public
# headers from the shared third-party folder, with g++ and clang++, warnings as errors, flags
# as the module is built (C++17, -O2, -fPIC, hidden visibility).
#
#   scripts/ci-xrt.sh
#
# Environment: HX_XRT_INCLUDE (default ../shared/third_party/xrt-2.26-include, see its
# README); CI=true makes a missing folder a failure instead of a SKIP. The headers are passed
# with -isystem: warnings inside XRT are not ours to fix, warnings in npu-xrt.cpp fail.
set -euo pipefail
cd "$(dirname "$0")/.."
inc=${HX_XRT_INCLUDE:-$PWD/../shared/third_party/xrt-2.26-include}
ci=${CI:-false}

die() { printf '\n########## XRT GLUE CHECK FAILED: %s ##########\n' "$1" >&2; exit 1; }

if [ ! -f "$inc/xrt/xrt_hw_context.h" ]; then
    msg="XRT >= 2.15 headers not found at $inc (xrt/xrt_hw_context.h; set HX_XRT_INCLUDE)"
    if [ "$ci" = true ]; then die "$msg"; fi
    echo "SKIP: $msg"
    exit 77
fi
version=$(cat "$inc/xrt/detail/version-slim.h" "$inc/xrt/detail/version.h" 2>/dev/null |
    sed -n 's/.*xrt_build_version\[\] *= *"\([0-9.]*\)".*/\1/p' | head -n 1 || true)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for cxx in g++ clang++; do
    if ! command -v "$cxx" >/dev/null; then
        if [ "$ci" = true ]; then die "$cxx not installed"; fi
        echo "SKIP: $cxx not installed"
        continue
    fi
    echo "== xrt: $cxx, backends/npu/npu-xrt.cpp against XRT ${version:-?} ($inc)"
    "$cxx" -std=c++17 -O2 -fPIC -fvisibility=hidden -c -o "$out/npu-xrt.o" \
        -Wall -Wextra -Wshadow -Werror -isystem "$inc" -Iinclude -Icore -Ibackends/npu \
        backends/npu/npu-xrt.cpp ||
        die "$cxx cannot compile backends/npu/npu-xrt.cpp against XRT ${version:-?}"
done
echo "xrt: npu-xrt.cpp compiles against XRT ${version:-?}"
