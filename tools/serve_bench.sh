#!/usr/bin/env bash
# The long load test of `cis2 serve` (`make serve-load`, docs/serve.md): the server on
# MODEL_DIR (default the SmolLM2-135M-shaped bench checkpoint) on 127.0.0.1, then
# tools/serve_load.mjs with CLIENTS x REQUESTS (default 32 x 8) over eight prompts of
# mixed lengths (4 to ~130 tokens, max_tokens 4 to 32), a third streamed, an eighth
# disconnecting after their first text; every completed receipt must equal the same
# prompt run alone (`cis2 run --receipt`, made here first). Then one client alone, for
# the sequential baseline. Prints the metrics; exit status 0 only when every check passed.
#   tools/serve_bench.sh [MODEL_DIR] [CLIENTS] [REQUESTS]    env: THREADS (2), BATCH (8)
set -u
cd "$(dirname "$0")/.."
M="${1:-models/bench-135m}"; CLIENTS="${2:-32}"; REQ="${3:-8}"
THREADS="${THREADS:-2}"; BATCH="${BATCH:-8}"; export CIS2="${CIS2:-./cis2}"
T="tests/tmp/serve-bench"; rm -rf "$T"; mkdir -p "$T"
[ -f "$M/model.safetensors" ] || { echo "serve_bench: no $M (make bench-model)"; exit 2; }
command -v node >/dev/null || { echo "serve_bench: node is not installed"; exit 2; }

echo "== solo receipts (cis2 run --receipt, one per case)"
python3 - "$M" "$T/cases.json" "$CIS2" "$THREADS" <<'EOF' || exit 1
import json, subprocess, sys
model, out, cis2, threads = sys.argv[1:5]
story = ("Once upon a time there was a little robot who wanted to learn how to paint. "
         "Every morning it rolled to the window and looked at the colours of the sky. ")
prompts = ["Hello", "The capital of France is", story, "def fibonacci(n):", story * 3,
           "Write a short poem about the sea.", "1, 2, 3, 4, 5,", "Question: what is 2 + 2? Answer:"]
cases = []
for i, p in enumerate(prompts):
    n = [16, 8, 32, 16, 4, 32, 8, 16][i]
    subprocess.run([cis2, 'run', '--model', model, '--prompt', p, '-n', str(n), '--stop-at-eos',
                    '--backend', 'fast', '--threads', threads, '--receipt', out + '.r'],
                   check=True, capture_output=True)
    ids = open(out + '.r').read().split('\nprompt-token-ids ')[1].split('\n')[0].count(',') + 1
    cases.append({'prompt': p, 'max_tokens': n, 'receipt': open(out + '.r').read()})
    print(f'  case {i}: {ids} prompt tokens, max_tokens {n}')
json.dump(cases, open(out, 'w'))
EOF

source tools/serve_start.sh
serve_start "$T/serve.log" --model "$M" --threads "$THREADS" --max-batch "$BATCH" --queue 64
trap 'kill $SPID 2>/dev/null; wait 2>/dev/null' EXIT
[ -n "$PORT" ] || { echo "serve_bench: the server did not start: $(tail -2 "$T/serve.log")"; exit 1; }
head -1 "$T/serve.log"
U="http://127.0.0.1:$PORT"
echo "== $CLIENTS clients x $REQ requests (max-batch $BATCH, $THREADS threads, $(nproc) cores)"
node tools/serve_load.mjs --url "$U" --model "$(basename "$M")" --cases "$T/cases.json" \
    --clients "$CLIENTS" --requests "$REQ" --slots "$BATCH" --pid $SPID; rc=$?
echo "== 1 client x $REQ requests (sequential baseline)"
node tools/serve_load.mjs --url "$U" --model "$(basename "$M")" --cases "$T/cases.json" \
    --clients 1 --requests "$REQ" --warmup 0 --pid $SPID; rc2=$?
[ $rc -eq 0 ] && [ $rc2 -eq 0 ]
