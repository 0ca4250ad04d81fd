#!/usr/bin/env bash
# Runs every unit binary (build/unit_*) and every shell suite (tests/t_*.sh),
# TEST_JOBS at a time (default 2: the suites are independent; each has its own
# scratch directory). Each prints PASS/FAIL/SKIP lines; as each one ends, its
# FAIL/SKIP lines and a running count are printed, and its whole output goes to
# the log. The slowest of the last run start first, so two at a time finish
# close together. The last line is "N passed, N failed, N skipped".
#   ONLY=SUBSTR    only the units/suites whose path holds SUBSTR
#   TEST_JOBS=N    how many run at once (1 = one after another)
set -u
cd "$(dirname "$0")/.."
export CIS2="${CIS2:-./cis2}" BUILD="${BUILD:-build}"
export TESTTMP="${TESTTMP:-$PWD/tests/tmp}"
mkdir -p "$TESTTMP"
source tests/py3_path.sh
log="$TESTTMP/run-$(basename "$BUILD").log"
jobs_max="${TEST_JOBS:-2}"
case "$jobs_max" in [1-9] | [1-9][0-9]) ;; *) echo "tests/run.sh: TEST_JOBS='$jobs_max' is not 1..99" >&2; exit 2 ;; esac
only="${ONLY:-}"

items=()
for u in "$BUILD"/unit_*; do
    [ -x "$u" ] || continue
    [ -n "$only" ] && [[ "$u" != *"$only"* ]] && continue
    items+=("$u")
done
for t in tests/t_*.sh; do
    [ -n "$only" ] && [[ "$t" != *"$only"* ]] && continue
    items+=("$t")
done
# Longest first, by the durations the last run logged ("== ITEM took N s"), else by
# tests/durations.txt (a clean clone's first run); new ones first.
if [ "$jobs_max" -gt 1 ]; then
    mapfile -t items < <(for i in "${items[@]}"; do
        s=""
        [ -f "$log" ] && s=$(grep -F "== $i took " "$log" | tail -1 | sed 's/.* took \([0-9]*\) s$/\1/')
        [ -n "$s" ] || s=$(awk -v n="$(basename "$i")" '$2 == n { print $1; exit }' tests/durations.txt 2>/dev/null)
        printf '%s\t%s\n' "${s:-999999}" "$i"
    done | sort -t$'\t' -k1,1nr -s | cut -f2)
fi
n=${#items[@]}
out="$TESTTMP/run-$(basename "$BUILD").d"
rm -rf "$out"; mkdir -p "$out"
: > "$log"

# run_one K ITEM: ITEM's output into $out/K.out, then $out/K.done.
run_one() {
    local k="$1" i="$2" t0=$SECONDS o rc
    if [[ "$i" == *.sh ]]; then o=$(bash "$i" 2>&1); rc=$?; else o=$("$i" 2>&1); rc=$?; fi
    {
        printf '%s\n' "$o"
        if [ $rc -ne 0 ] && ! printf '%s\n' "$o" | grep -q '^FAIL'; then
            echo "FAIL $i: exited $rc without reporting a failure"
        fi
    } > "$out/$k.out"
    echo $((SECONDS - t0)) > "$out/$k.done"
}
trap 'kill 0 2>/dev/null; exit 130' INT TERM
# One PyTorch import for the whole run: the suites' tools/torch_trace.py runs are forked
# from this server (tools/torch_zygote.py); without torch it exits and each run imports
# its own, as when a suite runs alone.
tz_py=/usr/bin/python3; [ -x "$tz_py" ] || tz_py=python3
export CIS2_TORCH_SERVER="$out/torch.sock"
"$tz_py" tools/torch_zygote.py --serve "$CIS2_TORCH_SERVER" > "$out/torch_zygote.log" 2>&1 &
tz_pid=$!

P=0 F=0 S=0 done_n=0
declare -A running=()
# report K: one finished item's FAIL/SKIP lines and the running count.
report() {
    local k="$1" i="${items[$1]}" secs p f s
    secs=$(cat "$out/$k.done")
    p=$(grep -c '^PASS' "$out/$k.out"); f=$(grep -c '^FAIL' "$out/$k.out"); s=$(grep -c '^SKIP' "$out/$k.out")
    P=$((P + p)); F=$((F + f)); S=$((S + s)); done_n=$((done_n + 1))
    { echo "== $i"; cat "$out/$k.out"; echo "== $i took $secs s"; } >> "$log"
    grep -E '^(FAIL|SKIP)' "$out/$k.out"
    printf '== [%d/%d] %s: %d passed, %d failed, %d skipped in %d s (so far %d passed, %d failed, %d skipped)\n' \
        "$done_n" "$n" "$i" "$p" "$f" "$s" "$secs" "$P" "$F" "$S"
}
reap() {
    local k
    for k in "${!running[@]}"; do
        [ -f "$out/$k.done" ] || continue
        wait "${running[$k]}" 2>/dev/null
        unset "running[$k]"
        report "$k"
    done
}
for ((k = 0; k < n; k++)); do
    while [ ${#running[@]} -ge "$jobs_max" ]; do
        wait -n 2>/dev/null
        reap
    done
    run_one "$k" "${items[$k]}" &
    running[$k]=$!
done
while [ ${#running[@]} -gt 0 ]; do
    wait -n 2>/dev/null
    reap
done
kill "$tz_pid" 2>/dev/null; wait "$tz_pid" 2>/dev/null; rm -f "$CIS2_TORCH_SERVER"
echo "(full log: $log)"
echo "$P passed, $F failed, $S skipped"
[ "$F" -eq 0 ] && [ "$P" -gt 0 ]
