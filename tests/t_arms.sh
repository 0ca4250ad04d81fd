#!/usr/bin/env bash
# `cis2 arms` (docs/divergence.md §7): the whole localization method in one
# command. On a quantized fixture: the matrix prints every arm, C and C' equal
# B to 0 ULP (cross-checked by a separate `cis2 diff --exact` of the traces it
# left), State 1-5 pass and the verdict is SHIP; a weight-bit fault in C is
# named at its node (State 3, linear-projection) and says NO-SHIP, a kv-stale
# fault is State 5 (autoregressive); a python without torch makes A and B "not
# available" and the exit status 3 (method incomplete). Arm E (the wasm32
# build under node, web/test/wasm_trace.mjs): E = C bit for bit on the int8
# fixture (and E = B in the clean run, both cross-checked by `cis2 diff
# --exact` of the traces left behind), E = `cis2 trace --backend fast` on a
# bf16 llama and an f32 qwen3 fixture and on the int8 twin of every fixture
# architecture (byte-identical files), a one-bit change in E's trace named and
# NO-SHIP (exit 1), a missing node making E "not available" (exit 3 on an
# otherwise clean SHIP; these two with A and B stood in for by `cis2 trace`, so
# they run without torch), and wasm_trace.mjs's error rows of docs/errors.md.
# Arm D against C' with its own table (armd): within on the fixture, the fp32
# default outside, a scaled node and a flipped exponent bit caught, and
# `cis2 compare --backend approx` choosing that table.
# SKIPs (saying why) the torch parts without Debian's python3-torch and the E
# parts without node >= 18 or a wasm32 toolchain.
cd "$(dirname "$0")/.."
source tests/lib.sh
T="$TESTTMP/arms"
rm -rf "$T"; mkdir -p "$T"
TORCH=""
for p in "${TORCH_PYTHON:-}" /usr/bin/python3; do
    [ -n "$p" ] && has_torch "$p" && { TORCH="$p"; break; }
done
make_fixture "$T/m" "$T/q" || { fail arms.setup "make_model/quantize failed"; exit 0; }
ARGS=(arms --source "$T/m" --quantized "$T/q" --prompt-ids 5,17,42 --teacher-force 7,99)
has() { grep -qE -- "$2" "$1"; } # has FILE REGEX

# --- arm E's module: built as tests/t_wasm.sh builds it (same object cache, so a full run
# compiles it once; under its lock, since tests/run.sh may run both at once, and into a module
# file of its own, which t_wasm.sh is not reading); E=() holds the flags that point cis2 arms at it, empty when unavailable
E=()
# (the module does not depend on BUILD: the sanitizer and aarch64 legs share the native
# leg's object cache, tests/tmp/wasm-build, instead of compiling it again)
WM="$PWD/tests/tmp/wasm-build"
nodev=$(node -e 'console.log(process.versions.node.split(".")[0])' 2>/dev/null || echo 0)
if [ "$nodev" -lt 18 ]; then
    skip arms.E "node >= 18 is not installed (apt-get install -y nodejs)"
elif mkdir -p "$WM" && bout=$(WASM_BUILD="$WM/obj" WASM_OUT="$WM/cis2-arms.wasm" \
        flock "$WM/build.lock" bash tools/build_wasm.sh 2>&1); then
    E=(--wasm "$WM/cis2-arms.wasm" --wasm-script web/test/wasm_trace.mjs)
elif [ $? -eq 3 ]; then # tools/build_wasm.sh: no wasm32 toolchain here
    skip arms.E "no wasm32 toolchain: $(printf '%s\n' "$bout" | head -1)"
else
    fail arms.E-wasm-build "$(printf '%s\n' "$bout" | grep -m2 'error')"
fi
NOT_E=(--node "$T/no-such-node")
# C's faults say NO-SHIP whether or not E ran (without node the line adds that the method is
# incomplete); E is given explicitly, never picked up from whatever web/cis2.wasm lies around
NOSHIP='^verdict=NO-SHIP( \(the method is incomplete: arm E did not run\))?$'

# --- no torch: A and B are "not available", never passed; exit 3
for py in /bin/false "$T/no-such-python"; do
    n=$(basename "$py")
    "$CIS2" "${ARGS[@]}" --python "$py" "${E[@]}" -o "$T/w-$n" > "$T/nt-$n.out" 2>&1; rc=$?
    if [ $rc -eq 3 ] && has "$T/nt-$n.out" '^A +source.*not available: ' &&
        has "$T/nt-$n.out" '^B +emulated.*not available: ' &&
        has "$T/nt-$n.out" '^verdict=INCOMPLETE$' && ! has "$T/nt-$n.out" 'verdict=SHIP' &&
        has "$T/nt-$n.out" "^C +exact int8, --backend ref +ran; not compared"; then
        pass "arms.no-torch-$n-is-incomplete (exit 3, A/B not available)"
    else fail "arms.no-torch-$n-is-incomplete" "rc=$rc $(grep -E '^(A|B) |verdict' "$T/nt-$n.out")"; fi
done

# --- the int8 twin of another model (same shape, another seed): refused before any work,
# naming the source_sha256 the twin records and the SHA-256 of --source's weights (it ran
# every arm against the wrong arm A: top-1 0/5 and SHIP)
if make_fixture "$T/m2" "$T/q2" --seed 2; then
    ERRORS_DIR="$T"
    OT=(arms --source "$T/m" --quantized "$T/q2" --prompt-ids 5,17,42 --teacher-force 7,99 --python /bin/false "${NOT_E[@]}" -o "$T/w-other")
    errors_row arms-unrelated-twin "arms --quantized naming the int8 twin of another model of the same shape (was: every arm run, top-1 0/5 and SHIP)" "t_arms.sh arms.unrelated-twin-refused" "$CIS2" "${OT[@]}"
    want="(its source_sha256 is $(sha256sum "$T/m2/model.safetensors" | cut -c1-12)..., --source's model.safetensors is $(sha256sum "$T/m/model.safetensors" | cut -c1-12)...)"
    out=$("$CIS2" "${OT[@]}" 2>&1); rc=$?
    [ $rc -eq 2 ] && [[ "$out" == *"$want" ]] && [ ! -e "$T/w-other" ] &&
        pass "arms.unrelated-twin-refused (both hashes named, no work directory)" ||
        fail arms.unrelated-twin-refused "rc=$rc $(printf '%s' "$out" | tail -2) (wanted $want)"
else fail arms.setup-other-model "make_model/quantize --seed 2 failed"; fi

# --- arm E without torch: E against C bit for bit, and a second reading by cis2 diff
if [ ${#E[@]} -gt 0 ]; then
    o="$T/nt-false.out"
    "$CIS2" diff "$T/w-false/C.st" "$T/w-false/E.st" --exact --brief > "$T/de.out" 2>&1; rc=$?
    has "$o" '^E +wasm32 build +ran; not compared \(no arm B\); against C: max_ulp 0, 0 elements differ, in 0 of 185 tensors \([0-9]+ bytes in ' &&
        [ $rc -eq 0 ] && has "$T/de.out" '^verdict=IDENTICAL$' &&
        pass "arms.E-equals-C-int8 (0 ULP on 185 tensors; cis2 diff --exact C.st E.st IDENTICAL)" ||
        fail arms.E-equals-C-int8 "rc=$rc $(grep '^E ' "$o") $(tail -1 "$T/de.out")"
    # A and B stood in for by `cis2 trace --backend ref` (a fake python: the ship logic is
    # what is tested here, cheaply and without torch; the real B is tested below): with E a
    # clean SHIP (exit 0); without node E is "not available", never passed, exit 3; a
    # node that changes the lowest bit of the last float of E's trace (p4.logits' last
    # element) gives 1 ULP against B and C, named, and NO-SHIP (exit 1)
    cat > "$T/fakepy" <<SH
#!/usr/bin/env bash
[ "\$1" = -c ] && exit 0
shift
while [ \$# -gt 1 ]; do case "\$1" in --model) m=\$2 ;; --arm) a=\$2 ;; --prompt-ids) p=\$2 ;;
    --teacher-force) t=\$2 ;; -o) o=\$2 ;; esac; shift 2; done
exec "$CIS2" trace --model "\$m" --prompt-ids "\$p" --teacher-force "\$t" --backend ref --arm "\$a" -o "\$o"
SH
    cat > "$T/flipnode" <<'SH'
#!/usr/bin/env bash
node "$@" || exit
[ "$1" = --version ] && exit 0
out=""; while [ $# -gt 0 ]; do [ "$1" = --out ] && out="$2"; shift; done
python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[-4]^=1; open(p,'wb').write(b)" "$out"
SH
    chmod +x "$T/fakepy" "$T/flipnode"
    FA=("${ARGS[@]}" --python "$T/fakepy" "${E[@]}")
    "$CIS2" "${FA[@]}" -o "$T/wfe" > "$T/fe.out" 2>&1; rc=$?
    [ $rc -eq 0 ] && has "$T/fe.out" '^verdict=SHIP$' && has "$T/fe.out" '^E +wasm32 build +0 ULP on 185 tensors' &&
        pass "arms.E-fake-B-ship (exit 0)" || fail arms.E-fake-B-ship "rc=$rc $(grep -E '^E |verdict' "$T/fe.out")"
    "$CIS2" "${FA[@]}" "${NOT_E[@]}" -o "$T/wne" > "$T/ne.out" 2>&1; rc=$?
    [ $rc -eq 3 ] && has "$T/ne.out" '^E +wasm32 build +not available: node .*no-such-node cannot run' &&
        has "$T/ne.out" '^verdict=SHIP \(the method is incomplete: arm E did not run\)$' &&
        pass "arms.E-no-node-not-available (exit 3, incomplete)" ||
        fail arms.E-no-node-not-available "rc=$rc $(grep -E '^E |verdict' "$T/ne.out")"
    "$CIS2" "${FA[@]}" --node "$T/flipnode" -o "$T/w-flip" > "$T/flip.out" 2>&1; rc=$?
    [ $rc -eq 1 ] && has "$T/flip.out" '^E +wasm32 build +max_ulp 1 ndiff 1 in 1 of 185 tensors.*first divergence p4.logits: DIVERGED; against C: max_ulp 1, 1 elements differ, in 1 of 185 tensors' &&
        has "$T/w-flip/diff-E-C.txt" '^p4\.logits .*max_ulp=1 ndiff=1' &&
        has "$T/flip.out" '^no-ship: arm E \(the wasm32 build\) DIVERGED' && has "$T/flip.out" '^verdict=NO-SHIP$' &&
        pass "arms.E-one-bit-off-is-no-ship (negative control: 1 ULP at p4.logits, exit 1)" ||
        fail arms.E-one-bit-off-is-no-ship "rc=$rc $(grep -E '^E |ship|verdict' "$T/flip.out")"
    # E on float checkpoints: the wasm trace = cis2 trace --backend fast, bit for bit
    python3 tools/make_model.py "$T/f32q3" --arch qwen3 --dtype f32 --untied >/dev/null 2>&1
    for d in m f32q3; do
        node web/test/wasm_trace.mjs --wasm "$WM/cis2-arms.wasm" --model "$T/$d" --prompt-ids 5,17,42 \
            --teacher-force 7,99 --out "$T/E-$d.st" > "$T/we-$d.out" 2>&1; wrc=$?
        "$CIS2" trace --model "$T/$d" --prompt-ids 5,17,42 --teacher-force 7,99 --backend fast \
            -o "$T/N-$d.st" > /dev/null 2>&1
        "$CIS2" diff "$T/N-$d.st" "$T/E-$d.st" --exact --brief > "$T/dn-$d.out" 2>&1; rc=$?
        [ $wrc -eq 0 ] && [ $rc -eq 0 ] && has "$T/dn-$d.out" '^verdict=IDENTICAL$' &&
            has "$T/dn-$d.out" '^compared [1-9][0-9]* tensors$' &&
            "$CIS2" trace --model "$T/$d" --prompt-ids 5,17,42 --teacher-force 7,99 --backend fast \
                --arm E -o "$T/NE-$d.st" > /dev/null 2>&1 && cmp -s "$T/NE-$d.st" "$T/E-$d.st" &&
            pass "arms.E-equals-native-trace-$d (cis2 diff --exact: IDENTICAL; with --arm E the same file byte for byte)" ||
            fail "arms.E-equals-native-trace-$d" "wasm rc=$wrc diff rc=$rc $(cat "$T/we-$d.out") $(tail -2 "$T/dn-$d.out")"
    done
    # E on the int8 twin of every fixture architecture: the wasm trace is byte for byte the
    # native `cis2 trace --backend fast --arm E` (arm C', which tests/t_int8.sh holds equal to
    # arm B and to arm C on each of these), so C = B = E on every fixture
    ebad=""; en=0
    for v in tests/fixtures/*.vector; do
        n=$(basename "$v" .vector)
        make_fixture "$T/fx-$n" "$T/fx-$n-q" $(vector_args "$v") || { ebad="$ebad $n(setup)"; continue; }
        node web/test/wasm_trace.mjs --wasm "$WM/cis2-arms.wasm" --model "$T/fx-$n-q" --prompt-ids 5,17,42 \
            --teacher-force 7,99 --arm E --out "$T/Efx-$n.st" > /dev/null 2>&1 &&
            "$CIS2" trace --model "$T/fx-$n-q" --prompt-ids 5,17,42 --teacher-force 7,99 \
                --backend fast --arm E -o "$T/Nfx-$n.st" > /dev/null 2>&1 &&
            cmp -s "$T/Efx-$n.st" "$T/Nfx-$n.st" && en=$((en + 1)) || ebad="$ebad $n"
    done
    [ -z "$ebad" ] && [ $en -ge 8 ] &&
        pass "arms.E-equals-native-int8-every-fixture ($en int8 twins, byte-identical traces)" ||
        fail arms.E-equals-native-int8-every-fixture "differs or failed on:$ebad"
    # wasm_trace.mjs's one-line errors (docs/errors.md rows)
    ERRORS_DIR="$T"
    WT=(node web/test/wasm_trace.mjs --wasm "$WM/cis2-arms.wasm")
    errors_row wasm-trace-no-ids "wasm_trace.mjs without --prompt-ids" "t_arms.sh" "${WT[@]}" --model "$T/m" --out "$T/x.st"
    errors_row wasm-trace-bad-ids "wasm_trace.mjs --prompt-ids not a list of ids" "t_arms.sh" "${WT[@]}" --model "$T/m" --prompt-ids 5,x --out "$T/x.st"
    errors_row wasm-trace-vocab "wasm_trace.mjs with an id outside the vocabulary" "t_arms.sh" "${WT[@]}" --model "$T/m" --prompt-ids 5,999999 --out "$T/x.st"
    errors_row wasm-trace-no-model "wasm_trace.mjs --model naming a missing directory" "t_arms.sh" "${WT[@]}" --model "$T/nodir" --prompt-ids 5 --out "$T/x.st"
    errors_row wasm-trace-out-dir "wasm_trace.mjs --out naming a directory" "t_arms.sh" "${WT[@]}" --model "$T/m" --prompt-ids 5 --out "$T/m"
    errors_row wasm-trace-no-wasm "wasm_trace.mjs --wasm naming a missing file" "t_arms.sh" node web/test/wasm_trace.mjs --wasm "$T/no.wasm" --model "$T/m" --prompt-ids 5 --out "$T/x.st"
fi
# --- arm D against arm C with its own table (docs/divergence.md "Arm D's table"); no torch needed
Wf="$T/w-false"
has "$T/nt-false.out" "^D +approx int8 .*against C: within arm D's table \(armd\)$" &&
    has "$Wf/diff-D-vs-C.txt" '^table: armd$' && has "$Wf/diff-D-vs-C.txt" '^verdict=WITHIN-TOLERANCE$' &&
    pass "arms.d-within-armd-table (D against C', report in diff-D-vs-C.txt)" ||
    fail arms.d-within-armd-table "$(grep -E '^D ' "$T/nt-false.out")"
"$CIS2" diff "$Wf/Cfast.st" "$Wf/D.st" --table armd > "$T/dt.out" 2>&1; rc=$?
"$CIS2" diff "$Wf/Cfast.st" "$Wf/D.st" > "$T/dt32.out" 2>&1; rc32=$?
[ $rc -eq 0 ] && [ $rc32 -eq 1 ] && has "$T/dt32.out" '^table: fp32$' &&
    pass "arms.diff-table-armd-selectable (armd within, the fp32 default outside)" ||
    fail arms.diff-table-armd-selectable "rc=$rc rc32=$rc32"
# the negative controls: one node of D scaled by 3, or one element's top exponent bit flipped
perturb() { # perturb IN OUT NODE MODE
    python3 - "$@" <<'PY'
import json, struct, sys
src, dst, node, mode = sys.argv[1:]
b = bytearray(open(src, "rb").read()); n = struct.unpack("<Q", b[:8])[0]
o0, o1 = json.loads(b[8:8 + n])[node]["data_offsets"]; base = 8 + n + o0
v = list(struct.unpack("<%df" % ((o1 - o0) // 4), b[base:base + o1 - o0]))
if mode == "scale": v = [x * 3 for x in v]
else:  # the top exponent bit of the first element in (0, 1): x * 2^128
    i = next(i for i, x in enumerate(v) if 0 < abs(x) < 1)
    v[i] = struct.unpack("<f", struct.pack("<I", struct.unpack("<I", struct.pack("<f", v[i]))[0] ^ (1 << 30)))[0]
b[base:base + o1 - o0] = struct.pack("<%df" % len(v), *v); open(dst, "wb").write(b)
PY
}
for c in "p2.L1.down scale" "p1.L0.q_proj bit"; do
    set -- $c
    perturb "$Wf/D.st" "$T/D-$2.st" "$1" "$2"
    "$CIS2" diff "$Wf/Cfast.st" "$T/D-$2.st" --table armd --brief > "$T/dp-$2.out" 2>&1; rc=$?
    [ $rc -eq 1 ] && has "$T/dp-$2.out" "^first_divergence=$1 " &&
        pass "arms.armd-table-catches-$2 ($1 outside)" ||
        fail "arms.armd-table-catches-$2" "rc=$rc $(grep first_div "$T/dp-$2.out")"
done
"$CIS2" compare --model "$T/q" --backend ref --backend approx --prompt-ids 5,17,42 --teacher-force 7,99 \
    --brief > "$T/cmpd.out" 2>&1; rc=$?
[ $rc -eq 0 ] && has "$T/cmpd.out" '^table: armd$' && has "$T/cmpd.out" '^verdict=WITHIN-TOLERANCE$' &&
    pass "arms.compare-approx-uses-armd-table" || fail arms.compare-approx-uses-armd-table "rc=$rc"

if [ -z "$TORCH" ]; then
    skip arms.matrix "no python with torch and numpy (apt-get install python3-torch python3-numpy)"
    exit 0
fi

# --- the clean method: every arm, 0 ULP, SHIP
W="$T/w"
if [ ${#E[@]} -gt 0 ]; then
    ERE="^E +wasm32 build +0 ULP on 185 tensors, top-1 5/5: IDENTICAL; against C: max_ulp 0, 0 elements differ"
    EHASH=" E"; WANT_RC=0; WANT_V='^verdict=SHIP$'
else
    ERE='^E +wasm32 build +not available: '; EHASH=""; WANT_RC=3
    WANT_V='^verdict=SHIP \(the method is incomplete: arm E did not run\)$'
fi
"$CIS2" "${ARGS[@]}" --python "$TORCH" "${E[@]}" -o "$W" > "$T/clean.out" 2>&1; rc=$?
bad=""
for re in '^A +source fp32.*top-1 [0-9]+/5: quantization error' '^B +emulated int8.*ground truth \(185 tensors\)' \
    "^C +exact int8, --backend ref +0 ULP on 185 tensors, top-1 5/5: IDENTICAL" \
    "^C' +exact int8, --backend fast +0 ULP on 185 tensors, top-1 5/5: IDENTICAL" \
    '^D +approx int8.*top-1 [0-9]/5' "$ERE" \
    '^  State 1 weight extraction \.+ pass \(int8_weights_sha256 of B vs C C'"'"' D'"$EHASH"': [0-9a-f]{12}' \
    '^  State 2 .* pass$' '^  State 3 .* pass$' '^  State 4 .* pass$' \
    '^  State 5 .* pass \(no divergence at any position\)$' '^  logits +5 ' "$WANT_V"; do
    has "$T/clean.out" "$re" || bad="$bad [$re]"
done
[ $rc -eq $WANT_RC ] && [ -z "$bad" ] && pass "arms.clean-matrix-C-equals-B-ship (13 lines checked, exit $WANT_RC)" ||
    fail arms.clean-matrix-C-equals-B-ship "rc=$rc missing:$bad"
# a second reading of the same traces: cis2 diff --exact, and the recorded predictions
"$CIS2" diff "$W/B.st" "$W/C.st" --exact --brief > "$T/d.out" 2>&1; rc=$?
pb=$(python3 -c "
import json,struct,sys
for f in sys.argv[1:]:
    b=open(f,'rb').read(); n=struct.unpack('<Q',b[:8])[0]; print(json.loads(b[8:8+n])['__metadata__']['predicted_ids'])" "$W/B.st" "$W/C.st" | sort -u | wc -l)
[ $rc -eq 0 ] && has "$T/d.out" '^verdict=IDENTICAL$' && [ "$pb" = 1 ] &&
    pass "arms.traces-left-behind-diff-identical (cis2 diff --exact B C; predicted_ids equal)" ||
    fail arms.traces-left-behind-diff-identical "rc=$rc distinct predictions=$pb"
has "$W/diff-D.txt" '^mode: tolerance' && has "$W/diff-A.txt" '^p4.logits' &&
    pass arms.diff-reports-written || fail arms.diff-reports-written "$(ls "$W")"
if [ ${#E[@]} -gt 0 ]; then
    # E = B = C: a second reading of the traces E left, and the ship line's E clause
    "$CIS2" diff "$W/B.st" "$W/E.st" --exact --brief > "$T/dbe.out" 2>&1; rc=$?
    "$CIS2" diff "$W/C.st" "$W/E.st" --exact --brief > "$T/dce.out" 2>&1; rc2=$?
    [ $rc -eq 0 ] && [ $rc2 -eq 0 ] && has "$T/dbe.out" '^verdict=IDENTICAL$' && has "$T/dce.out" '^verdict=IDENTICAL$' &&
        has "$T/clean.out" 'arm E ran the whole window without running out of memory, 0 ULP against B and C$' &&
        pass "arms.E-equals-B-equals-C (cis2 diff --exact B E and C E: IDENTICAL)" ||
        fail arms.E-equals-B-equals-C "rc=$rc/$rc2 $(grep '^ship' "$T/clean.out")"
fi

# --- a weight-bit fault in C: named at its node, State 3, NO-SHIP; C' unaffected
"$CIS2" "${ARGS[@]}" --python "$TORCH" "${E[@]}" -o "$T/wf" --fault weight-bit \
    --fault-arg model.layers.1.mlp.up_proj.weight:1000:6 > "$T/fault.out" 2>&1; rc=$?
bad=""
for re in '^fault: weight-bit model.layers.1.mlp.up_proj.weight:1000:6 injected into arm C$' \
    '^C +exact int8, --backend ref +max_ulp [1-9][0-9]* .*first divergence p0.L1.up: DIVERGED' \
    "^C' +exact int8, --backend fast +0 ULP" '^  State 1 .* pass ' '^  State 2 .* pass$' \
    '^  State 3 linear projections \.+ FAIL at p0.L1.up: isolated outputs differ \(1 of 128' \
    '^  State 4 .* - \(stopped above\)' '^no-ship: first divergent node p0.L1.up, branch=linear-projection$' \
    "$NOSHIP"; do
    has "$T/fault.out" "$re" || bad="$bad [$re]"
done
[ $rc -eq 1 ] && [ -z "$bad" ] && pass "arms.weight-bit-fault-localized-no-ship (p0.L1.up, exit 1)" ||
    fail arms.weight-bit-fault-localized-no-ship "rc=$rc missing:$bad"

# --- a stale KV slot: State 5 (divergence only after position 0)
"$CIS2" "${ARGS[@]}" --python "$TORCH" "${E[@]}" -o "$T/wk" --fault kv-stale > "$T/kv.out" 2>&1; rc=$?
[ $rc -eq 1 ] && has "$T/kv.out" '^  State 4 .* pass$' &&
    has "$T/kv.out" '^  State 5 autoregressive state \.+ YES, divergence starts after position 0 at p1.L0.attn_scores: KV cache' &&
    has "$T/kv.out" 'branch=autoregressive-state$' && has "$T/kv.out" "$NOSHIP" &&
    pass "arms.kv-stale-fault-is-state-5 (p1.L0.attn_scores)" ||
    fail arms.kv-stale-fault-is-state-5 "rc=$rc $(grep -E 'State 5|verdict' "$T/kv.out")"

# --- State 1's negative control: a B whose recorded int8 hash differs (the trace is B's own,
# only the hash is rewritten, same length) stops the machine at State 1 and says NO-SHIP
cat > "$T/b_other_weights.py" <<'PY'
import json, os, runpy, struct, sys
real = os.path.join(os.environ["ARMS_TOOLS"], "torch_trace.py")
sys.argv[0] = real
try:
    runpy.run_path(real, run_name="__main__")
except SystemExit as e:
    if e.code: raise
if "B" in sys.argv:
    p = sys.argv[sys.argv.index("-o") + 1]
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); m = h["__metadata__"]
    m["int8_weights_sha256"] = "0" * len(m["int8_weights_sha256"])
    hj = json.dumps(h, separators=(",", ":")).encode(); hj += b" " * (n - len(hj))
    open(p, "wb").write(b[:8] + hj + b[8 + n:])
PY
ARMS_TOOLS="$PWD/tools" "$CIS2" "${ARGS[@]}" --python "$TORCH" "${E[@]}" --script "$T/b_other_weights.py" \
    -o "$T/ws1" > "$T/s1.out" 2>&1; rc=$?
[ $rc -eq 1 ] && has "$T/s1.out" '^  State 1 weight extraction \.+ FAIL: the arms computed with different' &&
    has "$T/s1.out" '^  State 2 .* - \(stopped above\)' && has "$T/s1.out" '^no-ship: State 1' &&
    has "$T/s1.out" "$NOSHIP" && pass "arms.state-1-weight-hash-mismatch-stops (negative control)" ||
    fail arms.state-1-weight-hash-mismatch-stops "rc=$rc $(grep -E 'State 1|verdict|^B ' "$T/s1.out")"
# torch_trace.py refuses a layer or node named twice, as cis2 trace does (it merged them)
for a in "--layers 0-1,1|--layers '0-1,1': layer 1 is given twice" "--nodes embed,logits,embed|--nodes: node embed is given twice"; do
    err=$("$TORCH" tools/torch_trace.py --model "$T/m" --prompt-ids 5,17 -n 1 -o "$T/tt.st" ${a%%|*} 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] && [ "$err" == "torch_trace.py: ${a#*|}" ] && pass "arms.torch-trace-twice ${a%% *}" \
        || fail "arms.torch-trace-twice ${a%% *}" "rc=$rc $err"
done
exit 0
