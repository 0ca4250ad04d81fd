#!/usr/bin/env bash
# The page of `cis2 serve` (GET /, web/serve/) in headless Chromium: streamed text, the
# receipt equal to `cis2 run --receipt`, Stop mid-stream, "Verify on this server", and "Verify in the
# browser" through the wasm verifier served at /verifier/ (tests/serve/page_test.mjs).
# SKIPs (with the reason) without node, Chromium or playwright-core (web/test: npm ci, as
# `make test-web` does); without a wasm32 toolchain only the in-browser verification.
# UPDATE_SCREENSHOT=1 copies the page's screenshot to docs/img/serve-page.png.
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/serve-page"; rm -rf "$T"; mkdir -p "$T"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
PW="$PWD/web/test/node_modules/playwright-core/index.mjs"
command -v node >/dev/null || { skip serve.page "node is not installed"; exit 0; }
[ -x "$CHROMIUM" ] || { skip serve.page "$CHROMIUM not found (apt-get install chromium)"; exit 0; }
[ -f "$PW" ] || { skip serve.page "playwright-core not installed (cd web/test && npm ci)"; exit 0; }
probe=$("$CIS2" serve --model /nonexistent 2>&1)
case "$probe" in *"without libmicrohttpd"*) skip serve.page "$probe"; exit 0;; esac

python3 tools/make_model.py "$T/fx" --arch llama --heads 9 --kv-heads 3 --hidden 72 --inter 100 \
    --layers 3 --theta 100000 >/dev/null || { fail serve.page.fixture "make_model.py failed"; exit 0; }
P="hello world"; N=12
"$CIS2" run --model "$T/fx" --prompt "$P" -n $N --stop-at-eos --receipt "$T/solo.txt" > "$T/solo.out"
python3 -c 'import json,sys; print(json.loads(sys.argv[1]), end="")' \
    "$(sed -n 's/^text=//p' "$T/solo.out")" > "$T/solo-text.txt"

# The browser verifier (web/ + a fresh cis2.wasm) for /verifier/, when wasm32 builds here.
V=0
bout=$(WASM_BUILD="$T/wasm-obj" WASM_OUT="$T/verifier/cis2.wasm" bash tools/build_wasm.sh 2>&1); brc=$?
if [ $brc -eq 0 ]; then
    cp web/index.html web/app.js web/cis2.js web/worker.js web/hash_worker.js "$T/verifier/" && V=1
elif [ $brc -eq 3 ]; then
    skip serve.page.browser-verifier "no wasm32 toolchain: $(printf '%s\n' "$bout" | head -1)"
else
    fail serve.page.wasm-build "$(printf '%s\n' "$bout" | tail -3)"
fi
VARGS=(); [ $V -eq 1 ] && VARGS=(--verifier-dir "$T/verifier")

# Stop: a model slow enough (~100 tokens/s here) that a 3000-token completion is still
# streaming when the page stops it, on a second server with one slot; the solo receipt of the
# completion run after it.
python3 tools/make_model.py "$T/slow" --hidden 512 --inter 1536 --layers 8 --heads 8 --kv-heads 2 \
    --vocab 600 --max-pos 4096 >/dev/null || { fail serve.page.fixture "make_model.py (slow) failed"; exit 0; }
"$CIS2" run --model "$T/slow" --prompt "$P" -n 5 --stop-at-eos --receipt "$T/slow-solo.txt" > /dev/null

source tools/serve_start.sh
serve_start "$T/serve-slow.log" --model "$T/slow" --threads 1 --max-batch 1
SLOWPID=$SPID SLOWPORT=$PORT
trap 'kill $SLOWPID 2>/dev/null; wait 2>/dev/null' EXIT
[ -n "$SLOWPORT" ] || { fail serve.page.start "$(tail -3 "$T/serve-slow.log")"; exit 0; }
serve_start "$T/serve.log" --model "$T/fx" --threads 1 "${VARGS[@]}"
trap 'kill $SPID $SLOWPID 2>/dev/null; wait 2>/dev/null' EXIT
[ -n "$PORT" ] || { fail serve.page.start "$(tail -3 "$T/serve.log")"; exit 0; }

STOP_URL="http://127.0.0.1:$SLOWPORT/" STOP_RECEIPT="$T/slow-solo.txt" \
PLAYWRIGHT="$PW" CHROMIUM="$CHROMIUM" timeout 600 node tests/serve/page_test.mjs \
    "http://127.0.0.1:$PORT/" "$P" $N "$T/solo.txt" "$T/solo-text.txt" "$T/fx" "$T" $V 2>&1 \
    || fail serve.page.run "exit status $?"
if [ "${UPDATE_SCREENSHOT:-0}" = 1 ] && [ -f "$T/serve-page.png" ]; then
    cp "$T/serve-page.png" docs/img/serve-page.png
fi
