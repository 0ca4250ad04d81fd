#!/usr/bin/env bash
# `make bench`: cis2 bench for the reference and the fast backend on one
# model, then a small table. Numbers only (no pass/fail); compare ratios
# measured in one run. Usage: bash tools/bench.sh MODEL_DIR [THREADS]
set -u
M="${1:-models/bench-135m}"
TH="${2:-2}"
C="${CIS2:-./cis2}"
OUT="${TMPDIR:-/tmp}/cis2-bench.$$"
mkdir -p "$OUT"
echo "== ref (scalar oracle; few tokens, it is slow)"
"$C" bench --model "$M" --backend ref --prompt-len 16 -n 3 | tee "$OUT/ref"
echo "== ref prefill (64 tokens: the scalar path is per-token constant)"
"$C" bench --model "$M" --backend ref --prompt-len 64 -n 2 | tee "$OUT/ref256" | grep prefill_tok_s
echo "== fast, $TH threads"
"$C" bench --model "$M" --backend fast --threads "$TH" --prompt-len 256 -n 64 --positions 256,2048,8000 | tee "$OUT/fast"
g() { grep -m1 "^$1=" "$2" | cut -d= -f2 | cut -d' ' -f1; }
gp() { grep -m1 "^pos=$1 " "$2" | sed 's/.*decode_tok_s=\([^ ]*\).*/\1/'; }
echo
printf '%-24s %14s %14s\n' metric ref "fast/${TH}t"
for k in load_ms prefill_tok_s decode_tok_s ms_per_token floor_ms_per_token peak_rss_mb weights_mb read_gbs; do
    r=$(g $k "$OUT/ref"); [ "$k" = prefill_tok_s ] && r=$(g $k "$OUT/ref256")
    printf '%-24s %14s %14s\n' "$k" "$r" "$(g $k "$OUT/fast")"
done
for p in 256 2048 8000; do printf '%-24s %14s %14s\n' "decode_tok_s@pos$p" "-" "$(gp $p "$OUT/fast")"; done
rd=$(g decode_tok_s "$OUT/ref"); fd=$(g decode_tok_s "$OUT/fast")
fm=$(g ms_per_token "$OUT/fast"); ff=$(g floor_ms_per_token "$OUT/fast")
awk -v r="$rd" -v f="$fd" -v m="$fm" -v fl="$ff" 'BEGIN {
    if (r > 0) printf "fast/ref decode speedup  %.1fx (target >= 20x)\n", f / r;
    if (fl > 0) printf "fast ms/token vs floor   %.2fx (target <= 1.5x)\n", m / fl }'
rm -rf "$OUT"
