#!/usr/bin/env bash
# tests/npu/run.sh — the NPU backend on a real AMD XDNA / XDNA2 machine, end to end:
#
#   1. probe: the NPU's PCI id, /dev/accel/accel0 and its permissions, the amdxdna driver and
#      firmware, the memlock limit, XRT (xrt-smi examine);
#   2. build with the XRT glue (HX_NPU_XRT=ON: configure fails if XRT >= 2.15 is missing);
#   3. kernels: $HX_NPU_KERNELS (or --kernels DIR), a folder with manifest.json and the
#      compiled xclbin/insts files; or, with $MLIR_AIE_DIR, build the same shapes as the
#      simulator's kernels with mlir-aie's whole_array matmul (i8 -> i32, B column-major) and
#      write manifest.json for them;
#   4. `engine devices --npu-kernels DIR` (manifest, kernels, the GEMMs they cover);
#   5. the GEMM correctness tests on the hardware (tests/test-npu-sim.c with
#      HX_NPU_TEST_DEVICE=npu: every weight type against the float64 oracle with the INT8
#      bounds, padding oracles, greedy ids against ref on the test models);
#   6. the benchmark: host overhead per GEMM by stage and measured device time, M = 1 and 128.
#
# Usage: tests/npu/run.sh [--kernels DIR] [--build DIR] [--no-build]
# Environment: HX_NPU_KERNELS, MLIR_AIE_DIR, XILINX_XRT (e.g. /opt/xilinx/xrt),
#   HX_MLIR_AIE_MAKE_ARGS (extra make arguments for the mlir-aie build), HX_DATA (test data,
#   default ../shared/data next to the repository).
# Exit status: 0 when every step that ran passed; the summary lists each step.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build-npu
KERNELS=${HX_NPU_KERNELS:-}
DO_BUILD=1
while [ $# -gt 0 ]; do
  case $1 in
    --kernels) KERNELS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --no-build) DO_BUILD=0; shift ;;
    -h|--help) sed -n 2,24p "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)"; exit 2 ;;
  esac
done
export HX_DATA=${HX_DATA:-$ROOT/../shared/data}
LOG=$BUILD/npu-run-logs
mkdir -p "$LOG"
pass=0 fail=0 summary=""
step() { echo; echo "== $*"; }
ok() { pass=$((pass + 1)); summary+="  ok    $1"$'\n'; echo "ok: $1"; }
bad() { fail=$((fail + 1)); summary+="  FAIL  $1"$'\n'; echo "FAIL: $1"; }
finish() {
  echo; echo "== summary ($pass passed, $fail failed; logs in $LOG)"; printf '%s' "$summary"
  [ "$fail" -eq 0 ]; exit $?
}

# ---- 1. probe ----------------------------------------------------------------------------------
step "1. probe the NPU"
GEN=0
dev_id=$(cat /sys/class/accel/accel0/device/device 2>/dev/null || true)
rev=$(cat /sys/class/accel/accel0/device/revision 2>/dev/null || true)
case $dev_id in
  0x1502) GEN=3; echo "NPU1 (Phoenix/Hawk Point), PCI 1022:1502 rev $rev" ;;
  0x17f0) GEN=4; echo "NPU2 (Strix/Strix Halo/Krackan), PCI 1022:17f0 rev $rev" ;;
  "") echo "no /sys/class/accel/accel0: no XDNA NPU, or the amdxdna driver is not loaded"
      lspci -nn 2>/dev/null | grep -i -E '1022:(1502|17f0)' || true ;;
  *) echo "accel0 is PCI device $dev_id (not a known XDNA NPU)" ;;
esac
if [ -e /dev/accel/accel0 ]; then
  if [ -r /dev/accel/accel0 ] && [ -w /dev/accel/accel0 ]; then ok "/dev/accel/accel0 present and accessible"
  else bad "/dev/accel/accel0 not accessible: add $(id -un) to the 'render' group and log in again"; fi
else
  bad "/dev/accel/accel0 missing (amdxdna driver: Linux >= 6.14 or the xdna-driver DKMS build)"
fi
lsmod 2>/dev/null | grep -q '^amdxdna' && echo "amdxdna module loaded" || echo "amdxdna module not listed by lsmod"
ls /usr/lib/firmware/amdnpu/ 2>/dev/null | sed 's/^/firmware: /' || true
ml=$(ulimit -l)
echo "memlock limit: $ml (KiB)"
if [ "$ml" != "unlimited" ] && [ "$ml" -lt 4194304 ] 2>/dev/null; then
  echo "warning: large weight BOs need 'ulimit -l unlimited' (memlock in /etc/security/limits.d)"
fi
XRT=${XILINX_XRT:-/opt/xilinx/xrt}
if [ -f "$XRT/setup.sh" ] && [ -z "${XILINX_XRT:-}" ]; then
  # shellcheck disable=SC1091
  source "$XRT/setup.sh" >/dev/null 2>&1 || true
fi
if command -v xrt-smi >/dev/null 2>&1; then
  xrt-smi examine > "$LOG/xrt-smi.txt" 2>&1 && ok "xrt-smi examine" || bad "xrt-smi examine (see $LOG/xrt-smi.txt)"
  grep -i -E 'version|npu|xrt' "$LOG/xrt-smi.txt" | head -12
else
  bad "xrt-smi not found: install XRT >= 2.18 with the NPU plugin (libxrt-npu2 / xrt_plugin-amdxdna)"
fi
[ "$GEN" -eq 0 ] && GEN=4

# ---- 2. build -----------------------------------------------------------------------------------
step "2. build with the XRT glue in $BUILD"
if [ $DO_BUILD -eq 1 ]; then
  if cmake -S "$ROOT" -B "$BUILD" -G Ninja -DHX_NPU_XRT=ON ${XILINX_XRT:+-DXILINX_XRT=$XILINX_XRT} \
       > "$LOG/configure.txt" 2>&1 && ninja -C "$BUILD" > "$LOG/build.txt" 2>&1; then
    ok "configure + build (XRT glue: $(grep -o 'NPU XRT glue module built.*' "$LOG/configure.txt"))"
  else
    bad "build (see $LOG/configure.txt, $LOG/build.txt)"; tail -20 "$LOG/configure.txt" "$LOG/build.txt"
    finish
  fi
fi
E=$BUILD/engine
[ -x "$E" ] || { bad "no engine at $E"; finish; }
[ -f "$BUILD/libhx-npu-xrt.so" ] && ok "libhx-npu-xrt.so built" || bad "libhx-npu-xrt.so missing"

# ---- 3. kernels ---------------------------------------------------------------------------------
step "3. kernels"
# The shapes the simulator's synthetic kernels use, from the generated manifest: one line each
# "name M K N m k n columns".
shapes() {
  awk 'match($0, /"name": "[^"]*"/) { name = substr($0, RSTART + 9, RLENGTH - 10) }
       /"M":/ { line = $0; gsub(/[",:{}]/, " ", line); n = split(line, f, " ");
                for (i = 1; i < n; i++) v[f[i]] = f[i + 1];
                print name, v["M"], v["K"], v["N"], v["m"], v["k"], v["n"], v["columns"] }' \
      "$BUILD/npu-kernels/manifest.json"
}
write_manifest() { # DIR: a manifest for every final_<M>x<K>x<N>_<m>x<k>x<n>_<c>c.xclbin with its insts
  local dir=$1 first=1
  {
    printf '{\n  "format": "hx-npu-kernels",\n  "version": 1,\n  "device_generation": %d,\n' "$GEN"
    printf '  "description": "mlir-aie whole_array i8->i32 GEMMs built by tests/npu/run.sh",\n  "kernels": [\n'
    for x in "$dir"/final_*x*x*_*x*x*_*c.xclbin; do
      [ -f "$x" ] || continue
      local s=${x##*/final_}; s=${s%.xclbin}
      local M K N m k n c
      M=${s%%x*}; s=${s#*x}; K=${s%%x*}; s=${s#*x}; N=${s%%_*}; s=${s#*_}
      m=${s%%x*}; s=${s#*x}; k=${s%%x*}; s=${s#*x}; n=${s%%_*}; s=${s#*_}; c=${s%c}
      local insts="insts_${M}x${K}x${N}_${m}x${k}x${n}_${c}c.bin"
      [ -f "$dir/$insts" ] || insts="insts_${M}x${K}x${N}_${m}x${k}x${n}_${c}c.txt"
      [ $first -eq 1 ] || printf ',\n'; first=0
      printf '    {"name": "k%sn%s", "xclbin": "%s", "insts": "%s", "M": %s, "K": %s, "N": %s, "m": %s, "k": %s, "n": %s, "columns": %s, "dtype_in": "i8", "dtype_out": "i32", "b_layout": "col_major", "c_layout": "row_major", "ninstr": "words"}' \
        "$K" "$N" "${x##*/}" "$insts" "$M" "$K" "$N" "$m" "$k" "$n" "$c"
    done
    printf '\n  ]\n}\n'
  } > "$dir/manifest.json"
}
if [ -z "$KERNELS" ] && [ -n "${MLIR_AIE_DIR:-}" ]; then
  KERNELS=$BUILD/npu-kernels-hw
  mkdir -p "$KERNELS"
  MM=$MLIR_AIE_DIR/programming_examples/basic/matrix_multiplication/whole_array
  echo "building kernels with mlir-aie in $MM (device generation $GEN)"
  while read -r name M K N m k n c; do
    [ $GEN -eq 3 ] && [ "$c" -gt 4 ] && c=4
    args="M=$M K=$K N=$N m=$m k=$k n=$n n_aie_cols=$c dtype_in=i8 dtype_out=i32 b_col_maj=1 ${HX_MLIR_AIE_MAKE_ARGS:-}"
    echo "  $name: make $args"
    # shellcheck disable=SC2086
    if (cd "$MM" && make $args > "$LOG/mlir-aie-$name.txt" 2>&1); then
      cp "$MM"/build/final_"${M}x${K}x${N}_${m}x${k}x${n}_${c}c".xclbin "$MM"/build/insts_"${M}x${K}x${N}_${m}x${k}x${n}_${c}c".* "$KERNELS"/ \
        && ok "mlir-aie kernel $name" || bad "mlir-aie kernel $name: artifacts not where expected (see $LOG/mlir-aie-$name.txt)"
    else
      bad "mlir-aie kernel $name (see $LOG/mlir-aie-$name.txt)"
    fi
  done < <(shapes)
  write_manifest "$KERNELS"
fi
if [ -z "$KERNELS" ] || [ ! -f "$KERNELS/manifest.json" ]; then
  bad "no kernels: set HX_NPU_KERNELS (or --kernels DIR) to a folder with manifest.json, or MLIR_AIE_DIR to build them"
  echo "the shapes to build (name M K N m k n columns), i8 -> i32, B column-major:"; shapes | sed 's/^/  /'
  finish
fi
ok "kernels in $KERNELS"

# ---- 4. devices ---------------------------------------------------------------------------------
step "4. engine devices"
"$E" devices --npu-kernels "$KERNELS" -m "$HX_DATA/qwen3/qwen3-micro-q8_0.gguf" 2>&1 | tee "$LOG/devices.txt"
grep -q '^  npu  *available' "$LOG/devices.txt" && ok "npu backend available" || { bad "npu backend unavailable (see above)"; finish; }
if grep -A1 '^  npu kernels' "$LOG/devices.txt" | grep -q 'kernels: unusable'; then
  bad "the npu device rejected the kernels (see above)"; finish
fi

# ---- 5. correctness on the hardware ----------------------------------------------------------------
step "5. GEMM correctness and greedy ids on the NPU"
if HX_NPU_TEST_DEVICE=npu HX_NPU_KERNELS=$KERNELS HX_BUILD=$BUILD "$BUILD/tests/test-npu-sim" > "$LOG/test.txt" 2>&1; then
  ok "test-npu-sim on npu ($(tail -1 "$LOG/test.txt"))"
else
  bad "test-npu-sim on npu ($(tail -1 "$LOG/test.txt"); see $LOG/test.txt)"
fi
grep -E '^\[ (FAIL|SKIP) \]|greedy|flip|FAIL' "$LOG/test.txt" | head -40
for m in stories260K/stories260K.gguf qwen3/qwen3-tern-tq2_0.gguf; do
  want=$("$E" run -m "$HX_DATA/$m" -p "Once upon a time" -n 16 --temp 0 --ids --backend ref 2>/dev/null | xargs)
  got=$("$E" run -m "$HX_DATA/$m" -p "Once upon a time" -n 16 --temp 0 --ids --backend npu --npu-kernels "$KERNELS" 2>"$LOG/run.txt" | xargs)
  [ -n "$got" ] && [ "$got" = "$want" ] && ok "engine run --backend npu $m: 16 greedy ids equal ref" \
    || bad "engine run --backend npu $m: '$got' vs ref '$want' (a near-tie flip is explained in $LOG/test.txt)"
done

# ---- 6. benchmark --------------------------------------------------------------------------------
step "6. host overhead and device time per GEMM"
"$E" bench --kernels --backend npu --npu-kernels "$KERNELS" -m 1,128 -r 20 2>&1 | tee "$LOG/bench.md"
grep -q '^| 1024→4096 | 1 ' "$LOG/bench.md" && ok "benchmark" || bad "benchmark (see $LOG/bench.md)"
"$E" bench --kernels --backend npu --npu-kernels "$KERNELS" -m 1,128 -r 20 -o json > "$LOG/bench.json" 2>&1 || true
finish
