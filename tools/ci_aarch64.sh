#!/usr/bin/env bash
# The aarch64 leg, run by `make test-aarch64` (and .ci/run).
#   tools/ci_aarch64.sh ARM_BUILD_DIR ARM_BINARY HOST_BINARY
# Runs the cross-built (aarch64) unit binaries and the shell suites under
# qemu-aarch64, the §1.3 self-test with the FPCR.FZ pin and readback, the op
# vector suite, every fixture decode, the FMA gate over the aarch64
# disassembly, and checks that every receipt, digest and token id equals the
# host (x86-64) binary's for the same input. Prints PASS/FAIL/SKIP lines and
# ends with "N passed, N failed, N skipped"; exit 0 only when nothing failed.
# AARCH64_SUBSET=quick skips the whole shell suites (the named checks stay).
set -u
cd "$(dirname "$0")/.."
ARM_BUILD="${1:-build-aarch64}"; ARM="${2:-./cis2-aarch64}"; HOST="${3:-./cis2}"
CROSS="${CROSS:-aarch64-linux-gnu-}"
QEMU="${QEMU:-qemu-aarch64}"; SYSROOT="${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}"
SUBSET="${AARCH64_SUBSET:-full}"
case "$ARM" in /*) ;; *) ARM="$PWD/$ARM";; esac
case "$HOST" in /*) ;; *) HOST="$PWD/$HOST";; esac
T="$PWD/tests/tmp/aarch64"; rm -rf "$T"; mkdir -p "$T/bin"
TESTTMP="$T"; source tests/py3_path.sh
log="$T/log"; : > "$log"
say() { echo "$1" | tee -a "$log"; }
pass() { say "PASS aarch64.$1"; }
fail() { say "FAIL aarch64.$1: ${2:-}"; }
skip() { say "SKIP aarch64.$1: ${2:-}"; }
finish() {
    local p f s
    p=$(grep -c '^PASS' "$log"); f=$(grep -c '^FAIL' "$log"); s=$(grep -c '^SKIP' "$log")
    echo "(full log: $log)"
    echo "$p passed, $f failed, $s skipped"
    [ "$f" -eq 0 ] && [ "$p" -gt 0 ]; exit $?
}

command -v "$QEMU" >/dev/null || { fail setup "$QEMU not found (Debian: apt-get install qemu-user)"; finish; }
[ -d "$SYSROOT/lib" ] || { fail setup "no aarch64 sysroot at $SYSROOT (Debian: libc6-dev-arm64-cross)"; finish; }
[ -x "$ARM" ] || { fail setup "$ARM not built (make CROSS=$CROSS)"; finish; }
[ -x "$HOST" ] || { fail setup "host binary $HOST not built"; finish; }
case "$("${CROSS}objdump" -f "$ARM" 2>/dev/null)" in
    *aarch64*) pass "binary-is-aarch64" ;;
    *) fail binary-is-aarch64 "$("${CROSS}objdump" -f "$ARM" 2>&1 | head -3 | tr '\n' ' ')"; finish ;;
esac

# The binary under qemu, as a program the shell suites can call; and a uname
# that answers aarch64 so the suites pick the aarch64 ISA list (t_fast.sh).
printf '#!/bin/sh\nexec "%s" -L "%s" "%s" "$@"\n' "$QEMU" "$SYSROOT" "$ARM" > "$T/bin/cis2"
printf '#!/bin/sh\n[ "$1" = -m ] && [ $# -eq 1 ] && { echo aarch64; exit 0; }\nexec /bin/uname "$@"\n' > "$T/bin/uname"
chmod +x "$T/bin/cis2" "$T/bin/uname"
A="$T/bin/cis2"
qrun() { "$QEMU" -L "$SYSROOT" "$@"; }

# ---- 1. §1.3 self-test: FPCR.FZ pinned and read back, every denormal row, digests = host
a=$("$A" selftest 2>&1); arc=$?; h=$("$HOST" selftest 2>&1)
echo "$a" > "$T/selftest.aarch64"; echo "$h" > "$T/selftest.host"
if [ $arc -eq 0 ] && echo "$a" | grep -qE '^PASS fpenv-pin aarch64 control=0x[0-9a-f]*1[0-9a-f]{6}$'; then
    pass "selftest.fpcr-fz-pinned ($(echo "$a" | grep '^PASS fpenv-pin'))"
else fail selftest.fpcr-fz-pinned "rc=$arc $(echo "$a" | grep -m1 fpenv-pin)"; fi
nrows=$(echo "$a" | grep -c '^PASS fpenv 0x\|^PASS fpenv FLT')
[ $arc -eq 0 ] && [ "$nrows" -eq 8 ] && ! echo "$a" | grep -q '^FAIL' && pass "selftest.denormal-rows ($nrows rows, unpinned differs)" \
    || fail selftest.denormal-rows "rc=$arc rows=$nrows $(echo "$a" | grep -m3 FAIL)"
# every row's pinned/unpinned bits, and the table digests, exactly as on the host
ad=$(echo "$a" | grep -E '^(PASS|FAIL) (fpenv 0x|fpenv FLT|dot_seq|rsqrt)|_digest=' )
hd=$(echo "$h" | grep -E '^(PASS|FAIL) (fpenv 0x|fpenv FLT|dot_seq|rsqrt)|_digest=' )
[ -n "$ad" ] && [ "$ad" == "$hd" ] && pass "selftest.rows-and-digests-equal-host" \
    || fail selftest.rows-and-digests-equal-host "$(diff <(echo "$hd") <(echo "$ad") | head -5 | tr '\n' ' ')"

# ---- 1b. §1.3 in the flush-to-zero window: FPCR.FZ flushes a result that is tiny before
# rounding, x86-64 one that is tiny after rounding. web/test/ftz_cases.py's ~100k operations
# (products, quotients, sums and narrowings at FLT_MIN's edge, and random mixes) through
# fparith.h's scalar operations and the NEON vector product must give this host's MXCSR bits;
# the bare aarch64 operators must not (else the cases miss the window).
if [ "$(uname -m)" = x86_64 ]; then
    W="$T/ftz"; mkdir -p "$W"
    FCF="-std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -fno-math-errno -Iinclude -Isrc web/test/ftz_native.c src/core/fpenv.c"
    if cc $FCF -o "$W/host" && "${CROSS}gcc" $FCF -o "$W/arm"; then
        python3 web/test/ftz_cases.py > "$W/cases"
        "$W/host" < "$W/cases" > "$W/x86"
        for m in pinned fparith v4; do qrun "$W/arm" $m < "$W/cases" > "$W/$m"; done
        cmpftz() { python3 - "$W/x86" "$W/$1" "$W/cases" <<'PY'
import sys
h, a, c = [open(f).read().split("\n") for f in sys.argv[1:4]]
nan = lambda v: (v & 0x7F800000) == 0x7F800000 and (v & 0x7FFFFF)
bad, ops, ex = 0, {}, ""
for x, y, cc in zip(h, a, c):
    if not cc: continue
    x, y = int(x, 16), int(y, 16)
    if x != y and not (nan(x) and nan(y)):
        bad += 1; op = "add sub mul div sqrt narrow".split()[int(cc.split()[0])]; ops[op] = ops.get(op, 0) + 1
        if bad <= 2: ex += " [%s: x86 %08x aarch64 %08x]" % (cc, x, y)
print(bad, ",".join("%s=%d" % kv for kv in sorted(ops.items())) or "-", ex)
PY
        }
        n=$(wc -l < "$W/cases")
        set -- $(cmpftz pinned)
        [ "$1" -gt 0 ] && pass "ftz-window.control (bare aarch64 operators differ from x86-64 on $1 of $n: $2)" \
            || fail ftz-window.control "the bare aarch64 operators never differ: the cases miss the window"
        for m in fparith v4; do
            set -- $(cmpftz $m)
            [ "$1" -eq 0 ] && pass "ftz-window.$m-equals-x86-64 ($n operations)" || fail "ftz-window.$m-equals-x86-64" "$*"
        done
    else fail ftz-window "cannot build web/test/ftz_native.c for both ISAs"; fi
else
    skip ftz-window "needs an x86-64 host for the reference bits (this is $(uname -m))"
fi

# ---- 2. FMA gate on the aarch64 disassembly (fmadd|fmsub|fnmadd|fnmsub|fmla|fmls)
out=$(bash tests/fma_gate.sh "$ARM" "${CROSS}objdump" "${CROSS}gcc" 2>&1)
while IFS= read -r l; do case "$l" in PASS*|FAIL*|SKIP*) say "${l%% *} aarch64.${l#* }";; esac; done <<< "$out"
for u in "$ARM_BUILD"/unit_* "$ARM_BUILD"/libcis2.so.[0-9]*.[0-9]*.[0-9]*; do
    [ -x "$u" ] || continue
    o=$(bash tests/fma_gate.sh "$u" "${CROSS}objdump" "${CROSS}gcc" 2>&1 | grep "no-fma-in")
    case "$o" in PASS*) pass "fma-gate.$(basename "$u")";; *) fail "fma-gate.$(basename "$u")" "$o";; esac
done

# ---- 3. every fixture decode: conform (pinned x86-64 values), and run/receipt = host, ref and fast
MK="python3 tools/make_model.py"
strip() { grep -vE '^(backend|isa|threads)='; }
for v in tests/fixtures/*.vector; do
    name=$(basename "$v" .vector)
    args=$(sed -n 's/^#   python3 tools\/make_model.py DIR //p' "$v")
    M="$T/models/$name"
    $MK "$M" $args >/dev/null || { fail "fixture.$name" "make_model failed"; continue; }
    out=$("$A" conform --model "$M" --vector "$v" 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ "$(echo "$out" | grep -c '^PASS')" -eq 9 ] && ! echo "$out" | grep -q '^FAIL'; then
        pass "conform.fixture.$name"
    else fail "conform.fixture.$name" "rc=$rc $(echo "$out" | grep FAIL | head -3 | tr '\n' ' ')"; fi
    ids=$(sed -n 's/^prompt_token_ids=//p' "$v"); n=$(sed -n 's/^gen_toks=//p' "$v")
    "$HOST" run --model "$M" --prompt-ids "$ids" -n "$n" --receipt "$T/$name.host.receipt" 2>&1 | strip > "$T/$name.host.out"
    for be in ref fast; do
        o=$("$A" run --model "$M" --prompt-ids "$ids" -n "$n" --backend $be --threads 2 --receipt "$T/$name.$be.receipt" 2>&1); rc=$?
        echo "$o" | strip > "$T/$name.$be.out"
        if [ $rc -eq 0 ] && cmp -s "$T/$name.$be.out" "$T/$name.host.out" && cmp -s "$T/$name.$be.receipt" "$T/$name.host.receipt"; then
            pass "run.$name.$be-output-and-receipt-equal-host (CIS2_REF $(sed -n 's/^CIS2_REF digest=\(.\{16\}\).*/\1/p' "$T/$name.$be.out")...)"
        else fail "run.$name.$be-output-and-receipt-equal-host" "rc=$rc $(diff "$T/$name.host.out" "$T/$name.$be.out" | head -4 | tr '\n' ' ')"; fi
    done
    # a receipt written on x86-64 verifies on aarch64
    o=$("$A" verify "$T/$name.host.receipt" --model "$M" 2>&1); rc=$?
    [ $rc -eq 0 ] && pass "verify.$name.host-receipt-on-aarch64" || fail "verify.$name.host-receipt-on-aarch64" "rc=$rc $(echo "$o" | grep -m2 MISMATCH)"
done
# int8 (docs/quantization.md §2): the quantized llama fixture, and one whose layer-0 q_proj
# scale multiply lands in the §1.3 FTZ window (tests/int8_ftz.py): run and receipt = host
Q="$T/models/llama-q"; W="$T/models/ftzw-q"
if "$HOST" quantize --model "$T/models/llama" --out "$Q" >/dev/null 2>&1 && cp -r "$Q" "$W" &&
    python3 tests/int8_ftz.py ones "$W" && "$HOST" trace --model "$W" --prompt-ids 5,17,42 -n 2 -o "$T/ftzw1.st" >/dev/null 2>&1 &&
    python3 tests/int8_ftz.py place "$W" "$T/ftzw1.st" >/dev/null; then
    for M in "$Q" "$W"; do
        name=int8-$(basename "$M")
        "$HOST" run --model "$M" --prompt-ids 5,17,42,3 -n 4 --receipt "$T/$name.host.receipt" 2>&1 | strip > "$T/$name.host.out"
        for be in ref fast; do
            o=$("$A" run --model "$M" --prompt-ids 5,17,42,3 -n 4 --backend $be --threads 2 --receipt "$T/$name.$be.receipt" 2>&1); rc=$?
            echo "$o" | strip > "$T/$name.$be.out"
            if [ $rc -eq 0 ] && grep -q 'dtype=int8-row$' "$T/$name.$be.out" && cmp -s "$T/$name.$be.out" "$T/$name.host.out" &&
                cmp -s "$T/$name.$be.receipt" "$T/$name.host.receipt"; then
                pass "run.$name.$be-output-and-receipt-equal-host (CIS2_REF $(sed -n 's/^CIS2_REF digest=\(.\{16\}\).*/\1/p' "$T/$name.$be.out")...)"
            else fail "run.$name.$be-output-and-receipt-equal-host" "rc=$rc $(diff "$T/$name.host.out" "$T/$name.$be.out" | head -4 | tr '\n' ' ')"; fi
        done
    done
else fail run.int8-fixtures "quantize / tests/int8_ftz.py failed on the host"; fi
# a longer prompt and a text prompt: prefill batching + tokenizer, both backends
M="$T/models/llama"
for be in ref fast; do
    for p in "--prompt-ids $(seq -s, 3 7 290)" "--prompt Once_upon_a_time,_ünïcode_✓"; do
        h=$("$HOST" run --model "$M" $p -n 5 --backend $be 2>&1 | strip); a=$("$A" run --model "$M" $p -n 5 --backend $be 2>&1 | strip)
        [ -n "$h" ] && [ "$h" == "$a" ] && pass "run.llama.$be.${p%% *}-equal-host" || fail "run.llama.$be.${p%% *}-equal-host" "$(diff <(echo "$h") <(echo "$a") | head -4 | tr '\n' ' ')"
    done
done
# sampling (docs/sampling.md): one seed gives the host's output and receipt on both backends,
# the host's sampled receipt verifies here, and tools/sample_reference.py (docs/sampling.md
# read independently, numpy) on the logits of an aarch64 trace picks those ids: the sampler's
# bits on aarch64, from aarch64's own logits (t_sampling.sh, which this leg also runs, checks
# more parameters; t_wasm.sh does the same for wasm32).
SP=(--temperature 1.5 --top-k 0 --top-p 0.95 --min-p 0.01 --seed 3)
"$HOST" run --model "$M" --prompt-ids 5,17,42,7,99 -n 8 "${SP[@]}" --receipt "$T/sampled.host.receipt" 2>&1 | strip > "$T/sampled.host.out"
for be in ref fast; do
    o=$("$A" run --model "$M" --prompt-ids 5,17,42,7,99 -n 8 "${SP[@]}" --backend $be --threads 2 --receipt "$T/sampled.$be.receipt" 2>&1); rc=$?
    echo "$o" | strip > "$T/sampled.$be.out"
    if [ $rc -eq 0 ] && grep -q '^seed=3$' "$T/sampled.$be.out" && cmp -s "$T/sampled.$be.out" "$T/sampled.host.out" &&
        cmp -s "$T/sampled.$be.receipt" "$T/sampled.host.receipt"; then pass "run.sampled.$be-output-and-receipt-equal-host"
    else fail "run.sampled.$be-output-and-receipt-equal-host" "rc=$rc $(diff "$T/sampled.host.out" "$T/sampled.$be.out" | head -4 | tr '\n' ' ')"; fi
done
o=$("$A" verify "$T/sampled.host.receipt" --model "$M" 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$o" | grep -qx 'MATCH seed' && pass "verify.sampled.host-receipt-on-aarch64" ||
    fail "verify.sampled.host-receipt-on-aarch64" "rc=$rc $(echo "$o" | grep -m3 MISMATCH | tr '\n' ' ')"
PY=""
for c in /usr/bin/python3 python3; do command -v "$c" >/dev/null && "$c" -c 'import numpy' 2>/dev/null && { PY=$c; break; }; done
sids=$(sed -n 's/^generated_token_ids=//p' "$T/sampled.fast.out")
if [ -z "$PY" ]; then skip sampling.reference "no python3 with numpy"
elif [ -z "$sids" ] || ! "$A" trace --model "$M" --prompt-ids 5,17,42,7,99 --teacher-force "$(echo "$sids" | cut -d, -f1-7)" \
    --nodes logits -o "$T/sampled.st" >/dev/null 2>"$T/sampled.trace.err"; then
    fail sampling.reference "no aarch64 trace: $(head -n1 "$T/sampled.trace.err" 2>/dev/null)"
else
    ref=$("$PY" tools/sample_reference.py "$T/sampled.st" --n-prompt 5 --temperature 1.5 --top-k 0 --top-p 0.95 \
        --min-p 0.01 --seed 3 2>&1)
    [ "$ref" = "$sids" ] && [ "$sids" = "$(sed -n 's/^generated_token_ids=//p' "$T/sampled.host.out")" ] &&
        pass "sampling.reference-on-aarch64-logits-equals-aarch64-and-host ($sids)" ||
        fail sampling.reference-on-aarch64-logits-equals-aarch64-and-host "reference '$ref', aarch64 '$sids', host $(grep generated "$T/sampled.host.out")"
    # the host's receipt verified by the reference as a peer would, on aarch64's logits
    o=$("$PY" tools/sample_reference.py "$T/sampled.st" --receipt "$T/sampled.host.receipt" 2>&1); rc=$?
    [ $rc -eq 0 ] && [ "$(echo "$o" | grep -c '^MATCH')" -eq 3 ] && pass sampling.reference-verifies-host-receipt-on-aarch64-logits ||
        fail sampling.reference-verifies-host-receipt-on-aarch64-logits "rc=$rc $(echo "$o" | tr '\n' ' ')"
fi
# tokenizer round trip on the fixture tokenizer
for s in "Hello, world!" "  multiple   spaces\tand\nnewlines" "ünïcödé ✓ 日本語 🙂"; do
    h=$("$HOST" tokenize --model "$M" "$s" 2>&1); a=$("$A" tokenize --model "$M" "$s" 2>&1)
    [ "$h" == "$a" ] && pass "tokenize-equal-host.${#s}" || fail "tokenize-equal-host.${#s}" "host '$h' aarch64 '$a'"
done

# ---- 4. the op vector suite: aarch64 `cis2 op` against the x86-64-generated expectations
if "$HOST" op 2>&1 | grep -q 'unknown command'; then
    skip op-suite "this build has no 'cis2 op' (conformance not built)"
else
    out=$("$HOST" suite "$A" op 2>&1); rc=$?
    nv=$(ls tests/vectors/*.txt | wc -l)
    [ $rc -eq 0 ] && [ "$(echo "$out" | tail -n1)" == "all $nv vector(s) passed" ] && pass "op-suite (all $nv vectors, aarch64 candidate)" \
        || fail op-suite "rc=$rc $(echo "$out" | grep -v '^PASS' | head -5 | tr '\n' ' ')"
fi

# Sections 5 and 6 run AARCH64_JOBS items at once (default 2): bg_start NAME CMD... runs CMD
# in the background into $T/par/NAME.out and NAME.rc; bg_wait waits for all of them.
mkdir -p "$T/par"; jobs_max="${AARCH64_JOBS:-2}"
bg_start() {
    local name="$1"; shift
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
    ( "$@" > "$T/par/$name.out" 2>&1; echo $? > "$T/par/$name.rc" ) &
}
bg_wait() { wait; }
# bg_result NAME: sets out and rc from a finished item.
bg_result() { out=$(cat "$T/par/$1.out" 2>/dev/null); rc=$(cat "$T/par/$1.rc" 2>/dev/null || echo 127); }

# ---- 5 and 6. the unit binaries under qemu, and the shell suites with the aarch64 binary as
# CIS2 (the FMA gate ran above on the real binary): one pool, the longest first by
# tests/durations-aarch64.txt (this leg's own times: under qemu the order differs from
# the native one), so neither core waits for the other between the two kinds.
units=(); suites=()
for u in "$ARM_BUILD"/unit_*; do [ -x "$u" ] && units+=("$u"); done
if [ "$SUBSET" = full ]; then
    for t in tests/t_*.sh; do [ "$(basename "$t")" = t_fma_gate.sh ] || suites+=("$t"); done
fi
mapfile -t order < <(for i in "${units[@]}" "${suites[@]}"; do
    s=$(awk -v n="$(basename "$i")" '$2 == n { print $1; exit }' tests/durations-aarch64.txt 2>/dev/null)
    printf '%s\t%s\n' "${s:-999999}" "$i"
done | sort -t$'\t' -k1,1nr -s | cut -f2)
for i in "${order[@]}"; do
    case "$i" in
        *.sh) bg_start "$(basename "$i" .sh)" env PATH="$T/bin:$PATH" CIS2="$A" BUILD="$ARM_BUILD" UNIT_RUN="$QEMU -L $SYSROOT" \
                  TESTTMP="$T/suite" bash "$i" ;;
        *) bg_start "$(basename "$i")" qrun "$i" ;;
    esac
done
bg_wait
for u in "${units[@]}"; do
    bg_result "$(basename "$u")"
    printf '%s\n' "$out" | grep -E '^(PASS|FAIL|SKIP) ' | sed "s/^\(PASS\|FAIL\|SKIP\) /\1 aarch64.$(basename "$u"):/" >> "$log"
    printf '%s\n' "$out" | grep -E '^(FAIL|SKIP) ' | sed "s/^/  $(basename "$u"): /"
    if [ $rc -ne 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL'; then fail "$(basename "$u")" "exited $rc without reporting a failure: $(echo "$out" | tail -2)"; fi
done
for t in "${suites[@]}"; do
    tn=$(basename "$t" .sh)
    bg_result "$tn"
    printf '%s\n' "$out" | grep -E '^(PASS|FAIL|SKIP) ' | sed "s/^\(PASS\|FAIL\|SKIP\) /\1 aarch64.$tn:/" >> "$log"
    printf '%s\n' "$out" | grep -E '^(FAIL|SKIP) ' | sed "s/^/  $tn: /"
    if [ $rc -ne 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL'; then fail "$tn" "exited $rc without reporting a failure"; fi
done
[ "$SUBSET" = full ] || skip shell-suites "AARCH64_SUBSET=$SUBSET"
grep '^FAIL' "$log" | head -20
finish
