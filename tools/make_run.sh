#!/usr/bin/env bash
# `make run`: the pinned CIS-2 §13.1 vector on the real SmolLM2-135M when we
# have it (or can fetch it); otherwise the same pipeline on the project's
# generated demo checkpoint — and it says so.
set -u
cd "$(dirname "$0")/.."
real=""
for d in "${CIS2_SMOLLM2_DIR:-}" models/SmolLM2-135M ../shared/models/SmolLM2-135M; do
    [ -n "$d" ] && [ -f "$d/model.safetensors" ] && [ -f "$d/config.json" ] && [ -f "$d/tokenizer.json" ] && { real="$d"; break; }
done
if [ -z "$real" ]; then
    echo "make run: SmolLM2-135M not found locally; trying to fetch it (tools/fetch-smollm2.sh)..."
    if timeout 900 bash tools/fetch-smollm2.sh models/SmolLM2-135M; then real=models/SmolLM2-135M; fi
fi
if [ -n "$real" ]; then
    echo "make run: running the pinned CIS-2 §13.1 vector on $real"
    exec ./cis2 conform --model "$real"
fi
echo
echo "make run: OFFLINE — could not get the real SmolLM2-135M weights."
echo "make run: running the same pipeline (hash check, decode twice, compare every pinned value)"
echo "make run: on the project's generated demo checkpoint instead. This is NOT the §13.1 vector."
make -s --no-print-directory demo-model DEMO_MODEL=models/demo >/dev/null \
    || { echo "make run: cannot build the demo checkpoint (python3 needed)"; exit 2; }
./cis2 conform --model models/demo --vector tests/fixtures/llama.vector
