#!/usr/bin/env bash
# §13.4 in small: the compiler-invariance matrix. Builds cis2 with
# gcc and clang at -O0, -O2, -O3 and -O2 -march=native (each cell in its own
# build-m-CELL/ dir), then per cell (in the background while the next cell
# builds): the §1.3 self-test, the FMA gate
# (-march=native puts FMA in the ISA; -ffp-contract=off must keep it out of the
# binary), every fixture decode through `conform`, and `run` with the ref and
# fast backends plus a receipt — and checks that every cell prints the same
# bytes as the first. MATRIX_FULL=1 runs the whole `make test` in every cell
# instead of only building the binary. MATRIX_CELLS="gcc:-O0 clang:-O3" narrows it.
# Prints PASS/FAIL lines, a digest table, and "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
J="${MATRIX_JOBS:-$(nproc 2>/dev/null || echo 2)}"
CELLS="${MATRIX_CELLS:-gcc:-O0 gcc:-O2 gcc:-O3 gcc:native clang:-O0 clang:-O2 clang:-O3 clang:native}"
T="$PWD/tests/tmp/matrix"; rm -rf "$T"; mkdir -p "$T"
log="$T/log"; : > "$log"
say() { echo "$1" | tee -a "$log"; }
pass() { say "PASS matrix.$1"; }
fail() { say "FAIL matrix.$1: ${2:-}"; }
strip() { grep -vE '^(backend|isa|threads)='; }
MK="python3 tools/make_model.py"
for v in tests/fixtures/*.vector; do
    name=$(basename "$v" .vector)
    $MK "$T/models/$name" $(sed -n 's/^#   python3 tools\/make_model.py DIR //p' "$v") >/dev/null
done
# check_cell NAME CC BIN: the self-test, the FMA gate, every fixture's conform and ref/fast
# decodes with a receipt, into $T/NAME (marked .checked when done).
check_cell() {
    local name="$1" cc="$2" bin="$3" D o1 rc g v fx M c ids n
    D="$T/$name"; mkdir -p "$D"
    o1=$("$bin" selftest 2>&1); rc=$?
    [ $rc -eq 0 ] && pass "$name.selftest" || fail "$name.selftest" "$(echo "$o1" | grep FAIL | head -3)"
    echo "$o1" | grep -E '^(PASS|FAIL) (fpenv 0x|fpenv FLT|dot_seq|rsqrt)|_digest=' > "$D/selftest"
    g=$(bash tests/fma_gate.sh "$bin" objdump "$cc" 2>&1 | grep no-fma-in)
    case "$g" in PASS*) pass "$name.fma-gate";; *) fail "$name.fma-gate" "$g";; esac
    for v in tests/fixtures/*.vector; do
        fx=$(basename "$v" .vector); M="$T/models/$fx"
        c=$("$bin" conform --model "$M" --vector "$v" 2>&1); rc=$?
        [ $rc -eq 0 ] && ! echo "$c" | grep -q '^FAIL' && pass "$name.conform.$fx" || fail "$name.conform.$fx" "$(echo "$c" | grep FAIL | head -2)"
        ids=$(sed -n 's/^prompt_token_ids=//p' "$v"); n=$(sed -n 's/^gen_toks=//p' "$v")
        "$bin" run --model "$M" --prompt-ids "$ids" -n "$n" --receipt "$D/$fx.receipt" 2>&1 | strip > "$D/$fx.ref"
        "$bin" run --model "$M" --prompt-ids "$ids" -n "$n" --backend fast 2>&1 | strip > "$D/$fx.fast"
        cmp -s "$D/$fx.ref" "$D/$fx.fast" && pass "$name.$fx.fast-equals-ref" || fail "$name.$fx.fast-equals-ref" "$(diff "$D/$fx.ref" "$D/$fx.fast" | head -3)"
    done
    : > "$D/.checked"
}
for cell in $CELLS; do
    cc="${cell%%:*}"; o="${cell#*:}"
    case "$o" in native) opt="-O2"; extra="-march=native";; *) opt="$o"; extra="";; esac
    name="$cc-${o#-}"; B="build-m-$name"; bin="$B/cis2"
    command -v "$cc" >/dev/null || { fail "$name.build" "$cc not installed"; continue; }
    t0=$(date +%s)
    if [ -n "${MATRIX_FULL:-}" ]; then
        out=$(make -j"$J" CC="$cc" OPT="$opt" EXTRA="$extra" BUILD="$B" BIN="$bin" test 2>&1); rc=$?
        [ $rc -eq 0 ] && pass "$name.make-test ($(echo "$out" | tail -1))" || { fail "$name.make-test" "$(echo "$out" | grep -E '^FAIL|error' | head -5 | tr '\n' ' ')"; continue; }
    else
        out=$(make -j"$J" CC="$cc" OPT="$opt" EXTRA="$extra" BUILD="$B" BIN="$bin" "$bin" 2>&1); rc=$?
        [ $rc -eq 0 ] || { fail "$name.build" "$(echo "$out" | grep -E "error|Error" | grep -v "^[a-z+-]*\(gcc\|clang\|cc\) " | head -3 | tr '\n' ' ')"; continue; }
    fi
    pass "$name.build ($(( $(date +%s) - t0 ))s)"
    # The cell's checks run mostly on one core: they go on in the background while the
    # next cell builds, and every cell is compared with the first once all are done.
    check_cell "$name" "$cc" "$bin" &
done
wait
first=""
for cell in $CELLS; do
    c0="${cell#*:}"; name="${cell%%:*}-${c0#-}"; D="$T/$name"
    [ -f "$D/.checked" ] || continue
    if [ -z "$first" ]; then first="$name"
    else
        d=$(diff -r -x .checked "$T/$first" "$D" 2>&1)
        [ -z "$d" ] && pass "$name.identical-to-$first (selftest rows, table digests, ids, CIS2_REF, receipts)" || fail "$name.identical-to-$first" "$(echo "$d" | head -4 | tr '\n' ' ')"
    fi
done
echo "CIS2_REF per fixture and cell (first 16 hex digits):"
printf '  %-12s' cell; for v in tests/fixtures/*.vector; do printf ' %-17s' "$(basename "$v" .vector)"; done; echo
for cell in $CELLS; do
    c0="${cell#*:}"; name="${cell%%:*}-${c0#-}"; [ -d "$T/$name" ] || continue
    printf '  %-12s' "$name"
    for v in tests/fixtures/*.vector; do printf ' %-17s' "$(sed -n 's/^CIS2_REF digest=\(.\{16\}\).*/\1/p' "$T/$name/$(basename "$v" .vector).ref")"; done; echo
done
p=$(grep -c '^PASS' "$log"); f=$(grep -c '^FAIL' "$log")
echo "$p passed, $f failed, 0 skipped"
[ "$f" -eq 0 ] && [ "$p" -gt 0 ]
