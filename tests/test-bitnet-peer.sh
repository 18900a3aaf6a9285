#!/usr/bin/env bash
# test-bitnet-peer.sh — BitNet (and Q5_K weights) checked against a reference no one here wrote: llama.cpp (its
# CPU backend, through the prebuilt binaries of the npm package node-llama-cpp; test tooling
# only) loads the tiny `bitnet` models `engine mkmodel` writes — TQ2_0, TQ1_0, and TQ2_0 with
# per-tensor .scale tensors — and its greedy ids must be the engine's (docs/bitnet.md "Checked
# against llama.cpp"):
#   - every backend and policy here, on the file as it is (int8 activations in llama.cpp and in
#     all but ref): ids equal up to llama.cpp's first near tie, a step whose exact margin (the
#     chosen token's logit over every other, llama.cpp in f32 on an F32 copy of the weights, on
#     the same history) is below 4 sigma, sigma being llama.cpp's own measured rounding noise on
#     a top-2 gap (TQ file vs F32 copy, rms over all steps);
#   - `ref` (f32 arithmetic) against llama.cpp's greedy run of the F32 copy: ids equal up to the
#     first gap below 1e-3 of the top logit (the two f32 computations differ by ~4e-7).
# The prompt's tokens must be llama.cpp's too. node-llama-cpp (package.json of tests/peer, exact
# versions, the linux-x64 CPU binaries only) is installed into tests/peer/node_modules on first
# use and kept. Missing shared data, node, the package (npm failing) or lavapipe: a skip (exit 77),
# a failure with CI=true (tests/lib.sh), as for the openai package of test-server-openai.
# Not registered in the sanitizer build (tests/CMakeLists.txt): test-bitnet takes its engine paths
# there; the comparison is the Release run's.
set -u
E=${HX_ENGINE:?} D=${HX_DATA:?}
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/peer" && pwd)
V=$D/stories260K/stories260K.gguf
need_file "$V" || finish
command -v node > /dev/null || { skip "node is not installed (llama.cpp runs through node-llama-cpp)"; finish; }
node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)' ||
  { skip "node $(node --version) is too old (node-llama-cpp needs node >= 18)"; finish; }
[ "$(uname -sm)" = "Linux x86_64" ] ||
  { skip "node-llama-cpp's prebuilt binaries used here are for Linux x86_64, not $(uname -sm)"; finish; }
have() { node -e 'const d = process.argv[1];
for (const [n, v] of Object.entries(require(d + "/package.json").dependencies)) {
    let got = ""; try { got = require(`${d}/node_modules/${n}/package.json`).version } catch {}
    if (got !== v) process.exit(1);
}' "$here" 2> /dev/null; }
if ! have; then
  if ! command -v npm > /dev/null; then skip "node-llama-cpp is not installed and npm is missing"; finish; fi
  # flock: the Release and the ASan runs may start this at the same time. No lock file: the
  # registry's lock would name every platform's optional binaries; --omit=optional installs only
  # the two packages of package.json (about 85 MB) and their dependencies.
  if ! (flock 9 && { have || {
          echo "installing node-llama-cpp (tests/peer/package.json) into tests/peer/node_modules"
          cd "$here" && npm install --no-audit --no-fund --ignore-scripts --omit=optional \
            --no-package-lock --loglevel=error; }; }) 9> "${TMPDIR:-/tmp}/hx-peer-install.lock"; then
    skip "npm could not install node-llama-cpp (is the npm registry reachable?)"; finish
  fi
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/hx-bitnet-peer-XXXXXX")
export HX_PROFILE_DIR=$T/profiles
trap 'rm -rf "$T"' EXIT

devs=$("$E" devices 2> /dev/null)
hasdev() { echo "$devs" | grep -q "^  $1 *available"; }
policies="single:ref single:cpu tensor-split:cpu=0.5,ref=0.5"
if hasdev vulkan; then policies="$policies single:vulkan layer-split:cpu=0.5,vulkan=0.5"
else skip "no Vulkan device (lavapipe): the vulkan policies"; fi
if hasdev npu-sim; then policies="$policies single:npu-sim gemm-offload:npu-sim"
else na "npu-sim is not built in"; fi
prompts=("Once upon a time" "The little dog" "Lily and Tom went to the park" "Tim had a red ball"
         "One day, a big bird" "The sun was hot")
N=24

# "qwen3-tern Q5_K": the same check for Q5_K (docs/weights.md), on the shared trained Qwen3
# model (qwen3-tern-f16.gguf, whose confident steps leave enough before near ties; a random
# model's do not) quantized by hx: llama.cpp decodes the bytes hx's quantizer wrote and the F32
# copy is hx's own decoding of them, so a layout hx got wrong shows as llama.cpp disagreeing
# with both.
for spec in "bitnet TQ2_0" "bitnet TQ1_0" "bitnet TQ2_0 --scale-tensors" "qwen3-tern Q5_K"; do
  arch=${spec%% *} spec=${spec#* }
  name="$arch ${spec/ --/ +}"
  M=$T/m.gguf X=$T/m-f32.gguf
  if [ "$arch" = qwen3-tern ]; then
    need_file "$D/qwen3/qwen3-tern-f16.gguf" || continue
    make_model() { "$E" quantize "$D/qwen3/qwen3-tern-f16.gguf" "$M" $spec; }
  else make_model() { "$E" mkmodel --arch "$arch" --shape tiny --vocab "$V" --type $spec -o "$M"; }; fi
  make_model > /dev/null 2> "$T/err" &&
    "$E" quantize "$M" "$X" F32 --embd-type F32 2>> "$T/err" ||
    { bad "$name: mkmodel/quantize: $(cat "$T/err")"; continue; }
  if ! node "$here/greedy-ref.mjs" "$M" "$X" $N "${prompts[@]}" > "$T/ref.json" 2> "$T/node.err"; then
    # llama.cpp refusing the file is the failure this test exists for; a package that cannot
    # run at all on this machine is reported as such
    if grep -q 'failed to load model\|llama_model_load\|error loading model' "$T/node.err"; then
      bad "$name: llama.cpp cannot load the file: $(tail -3 "$T/node.err")"
    else skip "node-llama-cpp does not run here: $(tail -2 "$T/node.err")"; fi
    continue
  fi
  for p in "${prompts[@]}"; do "$E" tokenize -m "$M" -p "$p" --add-special; done > "$T/tok"
  for pol in $policies; do
    for p in "${prompts[@]}"; do
      "$E" run -m "$M" -p "$p" -n $N --temp 0 --ids --policy "$pol" 2> /dev/null | xargs
    done > "$T/ids.$pol"
  done
  python3 - "$T" "$name" $policies > "$T/report" <<'EOF'
import json, sys
T, name, policies = sys.argv[1], sys.argv[2], sys.argv[3:]
ref = json.load(open(f"{T}/ref.json"))
P = ref["prompts"]
tok = [json.loads(l) for l in open(f"{T}/tok")]
def report(ok, msg):
    print(("ok   " if ok else "FAIL ") + f"{name}: {msg}")
bad = [p["prompt"] for p, t in zip(P, tok) if t != p["prompt_ids"]]
report(not bad, "the prompts' tokens are llama.cpp's" + (f" (not for {bad})" if bad else ""))
k = [p["first_near_tie"] for p in P]
ke = [p["exact_first_near_tie"] for p in P]
print(f"     llama.cpp sigma {ref['sigma']:.4g}, near tie below an exact margin of {ref['near_tie_below']:.4g}; "
      f"steps before the first near tie per prompt: {k} (f32: {ke})")
# Vacuous if llama.cpp's own noise left nothing to compare.
report(sum(k) >= 4 and sum(ke) >= 48, f"enough steps before near ties to compare ({sum(k)} >= 4, f32 {sum(ke)} >= 48)")
for pol in policies:
    got = [[int(x) for x in l.split()] for l in open(f"{T}/ids.{pol}")]
    agree, fails = [], []
    for p, g, kk in zip(P, got, k):
        want = [s["id"] for s in p["steps"]]
        a = next((i for i in range(len(want)) if i >= len(g) or g[i] != want[i]), len(want))
        agree.append(a)
        if a < kk: fails.append(f"'{p['prompt']}' step {a}: {g[a] if a < len(g) else None} != {want[a]} "
                                f"(exact margin {p['steps'][a]['exact_margin']:.4g})")
    report(not fails, f"{pol}: ids = llama.cpp's up to the near ties; agreement {agree} of {len(P[0]['steps'])}"
           + ("; " + "; ".join(fails) if fails else ""))
    if pol == "single:ref":
        agree, fails = [], []
        for p, g, kk in zip(P, got, ke):
            want = [s["id"] for s in p["exact_steps"]]
            a = next((i for i in range(len(want)) if i >= len(g) or g[i] != want[i]), len(want))
            agree.append(a)
            if a < kk: fails.append(f"'{p['prompt']}' step {a}: {g[a] if a < len(g) else None} != {want[a]}")
        report(not fails, f"ref = llama.cpp in f32 (the F32 copy) up to gaps < 1e-3; agreement {agree}"
               + ("; " + "; ".join(fails) if fails else ""))
EOF
  [ $? -eq 0 ] || bad "$name: the comparison did not run"
  cat "$T/report"
  pass=$((pass + $(grep -c '^ok ' "$T/report"))) fail=$((fail + $(grep -c '^FAIL' "$T/report")))
done
finish
