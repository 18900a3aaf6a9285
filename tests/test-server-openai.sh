#!/usr/bin/env bash
# test-server-openai.sh — `engine serve` through the official OpenAI client (npm `openai`):
# tests/server/*.test.mjs under node's test runner. The client is installed into
# tests/server/node_modules on first use (npm ci, from package-lock.json) and kept; a failed
# install fails this test: it never skips.
set -u
E=${HX_ENGINE:?HX_ENGINE}; D=${HX_DATA:?HX_DATA}
here=$(cd "$(dirname "$0")/server" && pwd)
command -v node >/dev/null || { echo "FAIL node is not installed"; exit 1; }
command -v npm >/dev/null || { echo "FAIL npm is not installed"; exit 1; }
want=$(node -p 'require(process.argv[1]).dependencies.openai' "$here/package.json")
have=$(node -p 'try { require(process.argv[1]).version } catch { "" }' \
       "$here/node_modules/openai/package.json" 2>/dev/null)
if [ "$have" != "$want" ]; then
    echo "installing openai@$want into tests/server/node_modules"
    # flock: the plain and the ASan test runs may start this at the same time
    if ! (flock 9 && cd "$here" && npm ci --no-audit --no-fund --loglevel=error) \
            9>"${TMPDIR:-/tmp}/hx-openai-install.lock"; then
        echo "FAIL npm could not install the openai package (is the npm registry reachable?)"
        exit 1
    fi
fi
(cd "$here" && node -e 'require.resolve("openai")') || { echo "FAIL openai is not importable"; exit 1; }
cd "$here" && HX_ENGINE=$E HX_DATA=$D exec node --test --test-reporter=spec --test-concurrency=1 \
    api.test.mjs badinput.test.mjs concurrency.test.mjs
