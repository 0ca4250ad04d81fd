#!/usr/bin/env bash
# Runs every unit binary (build/unit_*) and every shell suite (tests/t_*.sh).
# Each prints PASS/FAIL/SKIP lines; the last line is "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
export CIS2="${CIS2:-./cis2}" BUILD="${BUILD:-build}"
export TESTTMP="${TESTTMP:-$PWD/tests/tmp}"
mkdir -p "$TESTTMP"
log="$TESTTMP/run-$(basename "$BUILD").log"; : > "$log"
only="${ONLY:-}"
for u in "$BUILD"/unit_*; do
    [ -x "$u" ] || continue
    [ -n "$only" ] && [[ "$u" != *"$only"* ]] && continue
    echo "== $u" | tee -a "$log"
    t0=$SECONDS
    out=$("$u" 2>&1); rc=$?
    printf '%s\n' "$out" | tee -a "$log" | grep -E '^(FAIL|SKIP)' || true
    if [ $rc -ne 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL'; then
        echo "FAIL $u: exited $rc without reporting a failure" | tee -a "$log"
    fi
    echo "== $u took $((SECONDS - t0)) s" >> "$log"
done
for t in tests/t_*.sh; do
    [ -n "$only" ] && [[ "$t" != *"$only"* ]] && continue
    echo "== $t" | tee -a "$log"
    t0=$SECONDS
    out=$(bash "$t" 2>&1); rc=$?
    printf '%s\n' "$out" | tee -a "$log" | grep -E '^(FAIL|SKIP)' || true
    if [ $rc -ne 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL'; then
        echo "FAIL $t: exited $rc without reporting a failure" | tee -a "$log"
    fi
    echo "== $t took $((SECONDS - t0)) s" >> "$log"
done
p=$(grep -c '^PASS' "$log"); f=$(grep -c '^FAIL' "$log"); s=$(grep -c '^SKIP' "$log")
echo "(full log: $log)"
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ] && [ "$p" -gt 0 ]
