#!/usr/bin/env bash
# test-attn-paths.sh — each attention kernel of the GPU backends forced, against ref:
# test-backend-ops' attention cases with HX_VK_ATTN / HX_HIP_ATTN = flash on the batches that
# auto runs per row (fewer than 16 rows: decode, short chunks, mixed sequences) and = rows on
# those auto runs flash-style (16 rows and more, continuing a cached context, mixed sequences),
# on lavapipe and on the HIP emulator (hx-hip-emu.so). test-backend-ops itself covers auto.
# On Vulkan the debug log shows the forced kernel's pipeline was the one created. A bad knob
# value is refused with a clear error. Not applicable (exit 0) for a backend the
# build turned off; skipped (77; a failure in CI) when the build has it but cannot run it here.
set -u
E=${HX_ENGINE:?} B=${HX_BUILD:-$(dirname "$E")}
T=$B/tests/test-backend-ops
. "$(dirname "$0")/lib.sh"
[ -x "$T" ] || { bad "$T not built"; finish; }

small=1,5,7,10,15   # auto: per row
large=16,17,33,40,48,64,130  # auto: flash (512 is left to test-backend-ops)
if sanitized; then  # CI's sanitizer run: a tile edge, pos > 0, mixed sequences
    small=7,10,15 large=17,40
fi
run() { # name, backend, m list, env...
    local name=$1 be=$2 ms=$3; shift 3
    local out rc last
    out=$(env "$@" "$T" --backend "$be" --op attn --m "$ms" -q 2>&1); rc=$?
    last=$(echo "$out" | tail -1)
    if [ $rc -eq 0 ] && echo "$last" | grep -Eq '^[1-9][0-9]* passed, 0 failed'; then ok "$name: $last"
    else bad "$name, exit $rc: $last"; echo "$out" | grep -E '^FAIL' | head -10; fi
}
refused() { # name, backend, expected message, env...
    local name=$1 be=$2 want=$3; shift 3
    local out
    out=$(env "$@" "$T" --backend "$be" --op attn --m 1 2>&1)
    if echo "$out" | grep -q "$want"; then ok "$name refused: $want"
    else bad "$name: no '$want' in: $(echo "$out" | grep -iE 'error|skip|fail' | head -3 | xargs)"; fi
}
# Vulkan creates a pipeline when it first dispatches it and logs that (debug), before the
# case's result line: the forced kernel's pipeline must come before the first case, and the
# other only for a case that cannot take the forced one (flash: head_dim 4..128 dividing 128)
vk_forced() { # name, m list, knob value, pipeline that must run, pipeline that must not
    local out v
    out=$(HX_LOG_LEVEL=debug HX_VK_ATTN=$3 "$T" --backend vulkan --op attn --m "$2" 2>&1)
    v=$(echo "$out" | awk -v want="pipeline $4 created" -v other="pipeline $5 created" -v fl="$4" '
        index($0, want) { seen = 1 }
        index($0, other) { pend = 1 }
        / attn +h=/ {
            n++
            if (!seen) { print "no " want " before: " $0; exit }
            if (pend) {
                pend = 0
                hd = $0; sub(/.*hd=/, "", hd); sub(/ .*/, "", hd)
                if (fl == "attn_flash" && hd + 0 >= 4 && hd + 0 <= 128 && 128 % hd == 0) {
                    print other " for a case flash takes: " $0; exit
                }
                if (fl == "attn") { print other " with rows forced: " $0; exit }
            }
        }
        END { if (!n) print "no attention case ran" }')
    if [ -z "$v" ]; then ok "$1: the $4 pipeline ran${6:-}"
    else bad "$1: $v"; fi
}
if grep -qs '^HX_BACKEND_VULKAN:[A-Z]*=OFF' "$B/CMakeCache.txt"; then
    na "Vulkan backend disabled in this build"
elif ! "$E" devices 2>/dev/null | grep -q '^  vulkan *available'; then
    skip "no usable Vulkan device: $("$E" devices 2>&1 | grep -A1 '^  vulkan' | tr -s ' ' | head -2 | xargs)"
else
    run "vulkan, HX_VK_ATTN=flash, m $small" vulkan "$small" HX_VK_ATTN=flash
    run "vulkan, HX_VK_ATTN=rows, m $large" vulkan "$large" HX_VK_ATTN=rows
    vk_forced "vulkan, HX_VK_ATTN=flash, m 7" 7 flash attn_flash attn "; attn only for heads flash cannot take"
    vk_forced "vulkan, HX_VK_ATTN=rows, m 40" 40 rows attn attn_flash ", attn_flash never"
    refused "HX_VK_ATTN=bogus" vulkan "HX_VK_ATTN=bogus: expected flash, rows or auto" HX_VK_ATTN=bogus
fi

emu=$B/hx-hip-emu.so
if [ ! -f "$emu" ]; then
    na "no $emu (HIP backend or its emulator not configured)"
else
    run "hip (emulated), HX_HIP_ATTN=flash, m $small" hip "$small" HX_HIP_MODULE="$emu" HX_HIP_ATTN=flash
    run "hip (emulated), HX_HIP_ATTN=rows, m $large" hip "$large" HX_HIP_MODULE="$emu" HX_HIP_ATTN=rows
    refused "HX_HIP_ATTN=bogus" hip "HX_HIP_ATTN=bogus: expected auto, flash or rows" HX_HIP_MODULE="$emu" HX_HIP_ATTN=bogus
fi
finish
