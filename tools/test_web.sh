#!/usr/bin/env bash
# `make test-web`: serve web/ on 127.0.0.1 (a random free port) and
# drive the page in Debian's Chromium, headless, via playwright-core:
# load a fixture model, verify a good receipt made by the native
# `cis2 run --receipt` (PASS), verify a doctored one (shows which field
# fails), run a prompt and check its downloaded receipt equals native's,
# the same for a sampled receipt (v1+sampling: verifies; a changed seed fails,
# naming sampler and seed) and a sampled run,
# check the engine-worker SHA-256 (?hash=wasm) gives the hash worker's hashes,
# and take screenshots into $TESTTMP (default tests/tmp/). Prints PASS/FAIL
# lines, then "N passed, N failed"; exit status 0 only when all pass.
#
# Needs: node >= 18, npm (first run: `npm ci` in web/test), /usr/bin/chromium
# (or $CHROMIUM), python3, a native ./cis2 (or $CIS2), and the wasm32
# toolchain of tools/build_wasm.sh.
set -u
cd "$(dirname "$0")/.."
TESTTMP="${TESTTMP:-$PWD/tests/tmp}"
mkdir -p "$TESTTMP"; source tests/py3_path.sh
CIS2="${CIS2:-./cis2}"
T="$TESTTMP/web"
rm -rf "$T"; mkdir -p "$T"
log="$T/test_web.log"; : > "$log"
say() { echo "$*" | tee -a "$log"; }
finish() {
    local p f
    p=$(grep -c '^PASS' "$log"); f=$(grep -c '^FAIL' "$log")
    echo "$p passed, $f failed"
    [ "$f" -eq 0 ] && [ "$p" -gt 0 ]
    exit $?
}
need_fail() { say "FAIL test-web-setup: $1"; finish; }

command -v node >/dev/null 2>&1 || need_fail "node is not installed (apt-get install -y nodejs npm)"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] || need_fail "$CHROMIUM not found (apt-get install -y chromium)"
[ -x "$CIS2" ] || need_fail "native $CIS2 not built (run make first)"
if [ ! -f web/test/node_modules/playwright-core/package.json ]; then
    command -v npm >/dev/null 2>&1 || need_fail "npm is not installed (apt-get install -y npm)"
    (cd web/test && npm ci --no-audit --no-fund --loglevel=error) >> "$log" 2>&1 || need_fail "npm ci in web/test failed (see $log)"
fi
t0=$(date +%s)
bash tools/build_wasm.sh >> "$log" 2>&1; brc=$?
[ $brc -eq 0 ] || need_fail "tools/build_wasm.sh exited $brc: $(tail -3 "$log")"
say "PASS wasm-build web/cis2.wasm"

# The llama fixture of tests/fixtures/llama.vector, a receipt made natively, a doctored copy.
M="$T/model"
margs=$(sed -n 's/^#   python3 tools\/make_model.py DIR //p' tests/fixtures/llama.vector)
python3 tools/make_model.py "$M" $margs >> "$log" 2>&1 || need_fail "make_model.py $margs failed"
ids=$(grep '^prompt_token_ids=' tests/fixtures/llama.vector | cut -d= -f2)
n=$(grep '^gen_toks=' tests/fixtures/llama.vector | cut -d= -f2)
"$CIS2" run --model "$M" --prompt-ids "$ids" -n "$n" --receipt "$T/good.receipt" >> "$log" 2>&1 || need_fail "native cis2 run failed"
awk '/^witness-digest /{ c=substr($2,1,1); $2=(c=="0"?"1":"0") substr($2,2) } { print }' "$T/good.receipt" > "$T/doctored.receipt"
PROMPT="Once upon a time"
"$CIS2" run --model "$M" --prompt "$PROMPT" -n 5 --receipt "$T/run.receipt" >> "$log" 2>&1 || need_fail "native cis2 run --prompt failed"
# Sampled receipts (docs/sampling.md): one to verify (and tamper with), one the page's run must give.
"$CIS2" run --model "$M" --prompt-ids "$ids" -n "$n" --temperature 1.5 --top-p 0.95 --min-p 0.01 --seed 3 \
    --receipt "$T/sampled.receipt" >> "$log" 2>&1 || need_fail "native sampled cis2 run failed"
"$CIS2" run --model "$M" --prompt "$PROMPT" -n 5 --temperature 0.8 --top-k 40 --seed 18446744073709551615 \
    --receipt "$T/sampled-run.receipt" >> "$log" 2>&1 || need_fail "native sampled cis2 run --prompt failed"

# A model whose tokenizer.json the library cannot load (config.json's bytes): prompt-hex cannot
# be checked there, natively or in the page. Its receipt is put together from `cis2 run`'s
# digests (--receipt refuses to write one without prompt bytes); `cis2 verify` must say
# "not checked here: prompt-hex", and so must the page.
NT="$T/model-notok"; mkdir -p "$NT"
cp "$M/config.json" "$M/model.safetensors" "$NT/"; cp "$M/config.json" "$NT/tokenizer.json"
"$CIS2" run --model "$NT" --prompt-ids 5,17,42 -n 2 > "$T/notok.out" 2>> "$log" || need_fail "native cis2 run on $NT failed"
kv() { sed -n "s/^$1=//p" "$T/notok.out"; }
sha() { sha256sum "$NT/$1" | cut -c1-64; }
printf 'CIS-2-RECEIPT v1\nspec-version 0.3b\nweights-sha256 %s\nconfig-sha256 %s\ntokenizer-sha256 %s\nprompt-hex 00\nprompt-token-ids %s\ngen-toks 2\ndtype fp32\ntable-digest %s\ninv-freq-table-digest %s\ngenerated-token-ids %s\nargmax-digest %s\nwitness-digest %s\n' \
    "$(sha model.safetensors)" "$(sha config.json)" "$(sha tokenizer.json)" "$(kv prompt_token_ids)" "$(kv table_digest)" \
    "$(kv inv_freq_table_digest)" "$(kv generated_token_ids)" "$(kv argmax_digest)" \
    "$(sed -n 's/^CIS2_REF digest=\([0-9a-f]*\) .*/\1/p' "$T/notok.out")" > "$T/notok.receipt"
nt_cli=$("$CIS2" verify "$T/notok.receipt" --model "$NT" 2>&1 | tail -1)
case "$nt_cli" in *"not checked here: prompt-hex") ;; *) need_fail "native verify of $T/notok.receipt: $nt_cli" ;; esac

# Serve web/ on a free port, bound to loopback only.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
python3 -m http.server --bind 127.0.0.1 --directory web "$port" >> "$T/http.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null' EXIT
up=0
for _ in $(seq 1 50); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/index.html', timeout=1)" 2>/dev/null; then up=1; break; fi
    sleep 0.2
done
[ $up -eq 1 ] || need_fail "http.server did not come up on 127.0.0.1:$port"

# Optional: CIS2_WEB_BIG_MODEL=DIR (e.g. models/bench-135m from `make bench-model`, or the real
# SmolLM2-135M) also loads a ~270 MB checkpoint in the page and verifies a 16-token native
# receipt, printing the time it took (a measurement, not a pass/fail limit).
BIG_ENV=()
if [ -n "${CIS2_WEB_BIG_MODEL:-}" ]; then
    "$CIS2" run --model "$CIS2_WEB_BIG_MODEL" --prompt "$PROMPT" -n 16 --receipt "$T/big.receipt" >> "$log" 2>&1 || need_fail "native run on $CIS2_WEB_BIG_MODEL failed"
    BIG_ENV=(BIG_MODEL_DIR="$CIS2_WEB_BIG_MODEL" BIG_RECEIPT="$T/big.receipt")
fi
env "${BIG_ENV[@]}" SAMPLED_RECEIPT="$T/sampled.receipt" SAMPLED_RUN_RECEIPT="$T/sampled-run.receipt" NOTOK_DIR="$NT" NOTOK_RECEIPT="$T/notok.receipt" CHROMIUM="$CHROMIUM" timeout 1200 node web/test/page_test.mjs "http://127.0.0.1:$port/index.html" "$M" \
    "$T/good.receipt" "$T/doctored.receipt" "$PROMPT" 5 "$T/run.receipt" "$T" 2>&1 | tee -a "$log"
prc=${PIPESTATUS[0]}
# A page test that dies before its checks (a syntax error, a timeout) has printed no FAIL line.
[ "$prc" -eq 0 ] || say "FAIL page-test: node web/test/page_test.mjs exited $prc"
say "test-web: $(( $(date +%s) - t0 )) s (log: $log)"
finish
