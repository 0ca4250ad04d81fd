#!/usr/bin/env bash
# The software FTZ/DAZ of the wasm build (src/core/fparith.h) against this CPU's
# hardware pin, operation by operation, on ~100k operand pairs from
# web/test/ftz_cases.py (incl. results at the flush edge). Output:
# PASS/FAIL/SKIP lines. Usage: ftz_diff.sh WORKDIR (CIS2_WASM set).
set -u
W="$1"
if [ "$(uname -m)" != x86_64 ]; then
    echo "SKIP wasm-ftz-vs-hardware: the emulation reproduces x86-64 MXCSR FTZ+DAZ (tininess after rounding); this is $(uname -m)"
    exit 0
fi
# Self-contained (src/core/fpenv.c only), so sanitizer builds' libraries are not involved.
cc -std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -fno-math-errno -Iinclude -Isrc web/test/ftz_native.c src/core/fpenv.c -o "$W/ftz_native" \
    || { echo "FAIL wasm-ftz-vs-hardware: cannot build web/test/ftz_native.c"; exit 0; }
python3 web/test/ftz_cases.py > "$W/ftz_cases.txt"
"$W/ftz_native" < "$W/ftz_cases.txt" > "$W/ftz_hw.txt"
"$W/ftz_native" raw < "$W/ftz_cases.txt" > "$W/ftz_ieee.txt"
node web/test/ftz_cases.mjs < "$W/ftz_cases.txt" > "$W/ftz_wasm.txt" || { echo "FAIL wasm-ftz-vs-hardware: node failed"; exit 0; }
n=$(wc -l < "$W/ftz_cases.txt")
# NaN results compare as "both NaN" (wasm leaves NaN sign/payload unspecified; no decode-path digest depends on it).
report=$(python3 - "$W" <<'PY'
import sys
w = sys.argv[1]
rd = lambda f: open(f"{w}/{f}").read().split("\n")
cases, hw, wa, ie = rd("ftz_cases.txt"), rd("ftz_hw.txt"), rd("ftz_wasm.txt"), rd("ftz_ieee.txt")
isnan = lambda v: (v & 0x7F800000) == 0x7F800000 and (v & 0x7FFFFF) != 0
bad = edge = sub = 0
ex = ""
for c, h, x, i in zip(cases, hw, wa, ie):
    if not c: continue
    h, x, i = int(h, 16), int(x, 16), int(i, 16)
    if h != x and not (isnan(h) and isnan(x)):
        bad += 1
        if bad <= 5: ex += f" [op {c}: hw {h:08x} wasm {x:08x}]"
    if (i & 0x7FFFFFFF) == 0x00800000 and (h & 0x7FFFFFFF) == 0: edge += 1
    if (i & 0x7F800000) == 0 and (i & 0x7FFFFF) != 0: sub += 1
print(bad, edge, sub, ex)
PY
)
set -- $report
bad=$1 edge=$2 sub=$3; shift 3
if [ "$bad" -eq 0 ] && [ "$edge" -gt 0 ] && [ "$sub" -gt 0 ]; then
    echo "PASS wasm-ftz-vs-hardware ($n ops bit-identical to the MXCSR pin; $sub would be subnormal under IEEE, $edge round to FLT_MIN yet flush)"
else
    echo "FAIL wasm-ftz-vs-hardware: $bad of $n ops differ (edge cases $edge, subnormal cases $sub)$*"
fi
