#!/usr/bin/env bash
# Runs each libFuzzer harness (built by `make fuzz-build` into
# $FUZZ_BUILD) for $FUZZ_SECONDS from its committed seeds fuzz/corpus/NAME and
# past finds fuzz/regressions/NAME. New coverage goes to $FUZZ_BUILD/corpus-NAME
# (never into the committed corpus); a crash leaves $FUZZ_BUILD/crash-NAME-*
# and fails the run: copy it into fuzz/regressions/NAME/ once fixed.
# FUZZ_SECONDS=0 only replays the seeds and regressions.
# Prints PASS/FAIL lines and ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
B="${FUZZ_BUILD:-build-fuzz}"; S="${FUZZ_SECONDS:-60}"
# fuzz_one NAME: one harness; its PASS/FAIL line (and a failure's stack lines) into
# $B/fuzz-NAME.result. FUZZ_JOBS harnesses run at once (default 2, one per core here).
fuzz_one() {
    local name="$1" bin="$B/fuzz_$1" work="$B/corpus-$1" dict=() flags t0 out rc execs cov files
    mkdir -p "$work" "fuzz/regressions/$name"
    [ -f "fuzz/$name.dict" ] && dict=(-dict="fuzz/$name.dict")
    flags=(-timeout=10 -rss_limit_mb=2048 -max_len="${FUZZ_MAX_LEN:-16384}" -artifact_prefix="$B/crash-$name-" -print_final_stats=1 "${dict[@]}")
    t0=$(date +%s)
    if [ "$S" = 0 ]; then
        files=$(find "fuzz/corpus/$name" "fuzz/regressions/$name" -type f | sort)
        # shellcheck disable=SC2086
        out=$("$bin" "${flags[@]}" -runs=0 $files 2>&1); rc=$?
    else
        out=$("$bin" "${flags[@]}" -max_total_time="$S" "$work" "fuzz/corpus/$name" "fuzz/regressions/$name" 2>&1); rc=$?
    fi
    echo "$out" > "$B/fuzz-$name.log"
    execs=$(echo "$out" | sed -n 's/^stat::number_of_executed_units: *//p' | tail -1)
    cov=$(echo "$out" | grep -o 'cov: [0-9]*' | tail -1)
    if [ $rc -eq 0 ]; then
        echo "PASS fuzz.$name (${S}s, ${execs:-?} execs, ${cov:-cov: ?}, $(ls "$work" | wc -l) new inputs, $(( $(date +%s) - t0 ))s wall)"
    else
        echo "FAIL fuzz.$name: rc=$rc, artifacts: $(ls "$B"/crash-"$name"-* 2>/dev/null | tr '\n' ' ')"
        echo "$out" | grep -E 'ERROR|SUMMARY|assertion|#[0-9]+ 0x' | head -15 | sed 's/^/    /'
    fi > "$B/fuzz-$name.result"
}
jobs_max="${FUZZ_JOBS:-2}"
for name in "$@"; do
    rm -f "$B/fuzz-$name.result"
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
    fuzz_one "$name" &
done
wait
p=0; f=0
for name in "$@"; do
    [ -f "$B/fuzz-$name.result" ] || echo "FAIL fuzz.$name: no result (the harness's shell died)" > "$B/fuzz-$name.result"
    cat "$B/fuzz-$name.result"
    if grep -q '^PASS' "$B/fuzz-$name.result"; then p=$((p + 1)); else f=$((f + 1)); fi
done
echo "$p passed, $f failed, 0 skipped"
[ $f -eq 0 ]
