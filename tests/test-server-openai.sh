#!/usr/bin/env bash
# test-server-openai.sh — `engine serve` through the official OpenAI client (npm `openai`):
# tests/server/*.test.mjs under node's test runner. The client (and ajv, the JSON-Schema
# validator structured.test.mjs checks outputs with) is installed into tests/server/node_modules
# on first use (npm ci, from package-lock.json, the exact versions of package.json) and kept. Without node, or without the client (npm missing or the install
# failing), the test prints `SKIP: <reason>` and exits 77; with CI=true, where both are
# expected, the same is a FAILURE (exit 1). Missing shared data: the same rule.
set -u
E=${HX_ENGINE:?HX_ENGINE}; D=${HX_DATA:?HX_DATA}
here=$(cd "$(dirname "$0")/server" && pwd)
# Missing prerequisites: lib.sh's skip_test (exit 77; a failure in CI, which has them).
# shellcheck source=tests/lib.sh
. "$here/../lib.sh"
for f in stories260K/stories260K.gguf qwen3/qwen3-micro-q8_0.gguf qwen3/qwen3-tern-tq2_0.gguf; do
    [ -f "$D/$f" ] || skip_test "the shared test data is missing ($D/$f)"
done
command -v node >/dev/null || skip_test "node is not installed (the OpenAI-client tests need node >= 18)"
node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)' ||
    skip_test "node $(node --version) is too old (the OpenAI-client tests need node >= 18)"
# every dependency of package.json installed at its exact version
have() { node -e 'const d = process.argv[1];
for (const [n, v] of Object.entries(require(d + "/package.json").dependencies)) {
    let got = ""; try { got = require(`${d}/node_modules/${n}/package.json`).version } catch {}
    if (got !== v) process.exit(1);
}' "$here" 2>/dev/null; }
if ! have; then
    command -v npm >/dev/null || skip_test "the openai package is not installed and npm is missing"
    # flock: the plain and the ASan test runs may start this at the same time; the second
    # finds the first one's install
    if ! (flock 9 && { have || {
            echo "installing the test packages of tests/server/package.json into node_modules"
            cd "$here" && npm ci --no-audit --no-fund --loglevel=error; }; }) \
            9>"${TMPDIR:-/tmp}/hx-openai-install.lock"; then
        skip_test "npm could not install the openai package (is the npm registry reachable?)"
    fi
fi
(cd "$here" && node -e 'require.resolve("openai"); require.resolve("ajv")') ||
    skip_test "the openai or ajv package is not importable"
cd "$here" && HX_ENGINE=$E HX_DATA=$D node --test --test-reporter=spec --test-concurrency=1 \
    api.test.mjs badinput.test.mjs concurrency.test.mjs structured.test.mjs tools.test.mjs
exit_with $?
