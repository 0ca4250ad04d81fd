#!/usr/bin/env bash
# Runs the unit binaries named as arguments from $TSAN_BUILD (built with
# -fsanitize=thread by `make test-tsan`) under ThreadSanitizer: a reported
# race fails the binary (exit 66) even when its own checks pass. Prints
# PASS/FAIL lines and ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
B="${TSAN_BUILD:-build-tsan}"
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
p=0; f=0
for u in "$@"; do
    t0=$(date +%s)
    out=$("$B/$u" 2>&1); rc=$?
    printf '%s\n' "$out" > "$B/$u.tsan.log"
    np=$(printf '%s\n' "$out" | grep -c '^PASS'); nf=$(printf '%s\n' "$out" | grep -c '^FAIL')
    if [ $rc -eq 0 ] && [ "$nf" -eq 0 ] && [ "$np" -gt 0 ]; then
        echo "PASS tsan.$u ($np checks, $(( $(date +%s) - t0 ))s)"; p=$((p + 1))
    else
        echo "FAIL tsan.$u: exit $rc, $np passed, $nf failed (log: $B/$u.tsan.log)"
        printf '%s\n' "$out" | grep -m3 -E '^FAIL|WARNING: ThreadSanitizer|SUMMARY: ThreadSanitizer'
        f=$((f + 1))
    fi
done
echo "$p passed, $f failed, 0 skipped"
[ $f -eq 0 ]
