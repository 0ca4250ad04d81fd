#!/usr/bin/env bash
# The wasm32 build (web/cis2.wasm via web/cis2.js, run by node) gives
# the same bits as the native binary: the §1.3 self-test against the
# software FTZ/DAZ, every tests/fixtures/*.vector decode (ids, digests,
# CIS2_REF) equal to the pinned values and to native `cis2 run`, receipts
# byte-identical to native ones and cross-verified both ways, and a doctored
# receipt caught field by field. SKIPs (with the reason) without node or a
# wasm32 toolchain (tools/build_wasm.sh exit 3).
cd "$(dirname "$0")/.."
source tests/lib.sh
# The wasm module, its runs under node and the receipts it writes do not depend on BUILD:
# the native leg holds them to native cis2 byte for byte (receipts identical), and the
# sanitizer and aarch64 legs hold their own builds to native cis2 (tools/ci_aarch64.sh
# verifies native receipts on aarch64), so this suite against another build repeats them.
if [ "${BUILD:-build}" != build ]; then
    skip wasm "BUILD=$BUILD: the same module and runs as the native leg's (make test checks them against build/)"
    exit 0
fi

# tools/build_wasm.sh's own input (no toolchain needed): a misspelt argument is
# refused before anything is built, and a control character in WASM_CC is
# printed escaped, never raw.
expect_err wasm-build-unknown-arg "unknown argument --prob" bash tools/build_wasm.sh --prob
bout=$(WASM_CC=$'/nonexistent/cc\e[31m' bash tools/build_wasm.sh --probe 2>&1); brc=$?
if [ $brc -ne 3 ]; then fail wasm-build-cc-escaped "exit $brc, wanted 3: $bout"
elif printf '%s' "$bout" | grep -q $'\e'; then fail wasm-build-cc-escaped "a raw ESC reached the output: $(printf '%s' "$bout" | cat -v)"
elif ! printf '%s' "$bout" | grep -qF "build_wasm: \$'/nonexistent/cc\\E[31m' cannot build"; then fail wasm-build-cc-escaped "no escaped name: $bout"
else pass wasm-build-cc-escaped; fi

if ! command -v node >/dev/null 2>&1; then skip wasm "node is not installed (apt-get install -y nodejs)"; exit 0; fi
nodev=$(node -e 'console.log(process.versions.node.split(".")[0])')
if [ "$nodev" -lt 18 ]; then skip wasm "node $nodev is too old (need >= 18)"; exit 0; fi
W="$TESTTMP/wasm-$(basename "${BUILD:-build}")"
mkdir -p "$W"
export CIS2_WASM="$W/cis2.wasm"
# The object cache is shared with tests/t_arms.sh, which tests/run.sh may run at the same time.
bout=$(WASM_BUILD="$W/obj" WASM_OUT="$CIS2_WASM" WASM_TESTS="$W/units" \
    flock "$W/build.lock" bash tools/build_wasm.sh 2>&1); brc=$?
if [ $brc -eq 3 ]; then skip wasm "no wasm32 toolchain: $(printf '%s\n' "$bout" | head -1)"; exit 0; fi
if [ $brc -ne 0 ]; then fail wasm-build "$(printf '%s\n' "$bout" | tail -5)"; exit 0; fi
pass wasm-build
NC="node web/test/node_check.mjs"

# The SIMD128 kernels bit-identical to the scalar reference (tests/unit_fast.c: matmul over
# shapes, T and dtypes, attention, softmax, swiglu, packing) and the §1.3 flush window
# (tests/unit_ftz.c), both built for wasm32 and run under node's WASI.
for u in unit_fast unit_ftz; do
    out=$(node --no-warnings web/test/run_wasi.mjs "$W/units/$u.wasm" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -E '^(PASS|FAIL) ' | grep -v 'does not support' | sed "s/^\(PASS\|FAIL\) /\1 wasm.$u: /"
    n128=$(printf '%s\n' "$out" | grep -c '^PASS .*wasm128')
    if [ $rc -eq 0 ] && [ "$n128" -gt 0 ]; then pass "wasm.$u-ran ($n128 wasm128 checks)"; else fail "wasm.$u-ran" "rc=$rc, $n128 wasm128 checks: $(printf '%s\n' "$out" | tail -2)"; fi
done

# §1.3 self-test against the emulation; every line but the pin/sha lines equals native.
wst=$($NC selftest 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s\n' "$wst" | grep -q '^PASS fpenv-pin wasm32 (software FTZ/DAZ)'; then pass wasm-selftest; else fail wasm-selftest "rc=$rc: $wst"; fi
nst=$("$CIS2" selftest 2>&1)
strip() { grep -v -e '^PASS fpenv-pin' -e '^sha256='; }
expect_eq wasm-selftest-same-as-native "$(printf '%s\n' "$wst" | strip)" "$(printf '%s\n' "$nst" | strip)"
nrows=$(printf '%s\n' "$wst" | grep -c '^PASS fpenv 0x\|^PASS fpenv FLT')
expect_eq wasm-selftest-rows "$nrows" 8

# A browser Blob's byte stream that stalls (web/cis2.js blobSource): the rest comes by slices.
expect_eq wasm-blob-stream-stall-falls-back "$($NC stall 2>&1)" ok

KEYS="weights_sha256 config_sha256 tokenizer_sha256 prompt_token_ids generated_token_ids table_digest inv_freq_table_digest argmax_digest cis2_ref"
for v in tests/fixtures/*.vector; do
    name=$(basename "$v" .vector)
    margs=$(sed -n 's/^#   python3 tools\/make_model.py DIR //p' "$v")
    d="$W/$name"
    if [ ! -f "$d/model.safetensors" ]; then
        python3 tools/make_model.py "$d" $margs >/dev/null 2>&1 || { fail "wasm-$name" "make_model.py $margs failed"; continue; }
    fi
    ids=$(grep '^prompt_token_ids=' "$v" | cut -d= -f2)
    n=$(grep '^gen_toks=' "$v" | cut -d= -f2)
    out=$(CIS2_RECEIPT_OUT="$d.wasm.receipt" $NC run "$d" "$ids" "$n" 2>&1) || { fail "wasm-$name" "node run failed: $out"; continue; }
    nat=$("$CIS2" run --model "$d" --prompt-ids "$ids" -n "$n" --receipt "$d.native.receipt" 2>&1) || { fail "wasm-$name" "native run failed: $nat"; continue; }
    bad=""
    for k in $KEYS; do
        got=$(printf '%s\n' "$out" | grep "^$k=" | cut -d= -f2)
        want=$(grep "^$k=" "$v" | cut -d= -f2)
        [ -n "$got" ] && [ "$got" = "$want" ] || bad="$bad $k(wasm=$got pinned=$want)"
    done
    nref=$(printf '%s\n' "$nat" | sed -n 's/^CIS2_REF digest=\([0-9a-f]*\) .*/\1/p')
    wref=$(printf '%s\n' "$out" | grep '^cis2_ref=' | cut -d= -f2)
    [ "$nref" = "$wref" ] || bad="$bad cis2_ref-vs-native(native=$nref)"
    for k in generated_token_ids argmax_digest; do
        [ "$(printf '%s\n' "$nat" | grep "^$k=" | cut -d= -f2)" = "$(printf '%s\n' "$out" | grep "^$k=" | cut -d= -f2)" ] || bad="$bad $k-vs-native"
    done
    wrefr=$(CIS2_WASM_REF=1 $NC run "$d" "$ids" "$n" 2>&1 | grep '^cis2_ref=' | cut -d= -f2)
    [ "$wrefr" = "$wref" ] || bad="$bad reference-backend-in-wasm($wrefr)"
    if [ -z "$bad" ]; then pass "wasm-decode-$name (CIS2_REF $wref = pinned = native; wasm fast/wasm128 = wasm ref)"; else fail "wasm-decode-$name" "$bad"; fi
    if cmp -s "$d.wasm.receipt" "$d.native.receipt"; then pass "wasm-receipt-identical-$name"; else fail "wasm-receipt-identical-$name" "$(diff "$d.native.receipt" "$d.wasm.receipt" | head -4)"; fi
done

# The engine's own SHA-256 over the window bytes (opts.hash = 'wasm', as `index.html?hash=wasm`;
# node's default too, having no hash worker) gives the pinned artifact hashes.
v=$(ls tests/fixtures/*.vector | head -1); name=$(basename "$v" .vector); d="$W/$name"
if [ -f "$d/model.safetensors" ]; then
    ids=$(grep '^prompt_token_ids=' "$v" | cut -d= -f2)
    o=$(CIS2_WASM_HASH=wasm $NC run "$d" "$ids" 1 2>&1)
    for k in weights_sha256 tokenizer_sha256; do
        expect_eq "wasm-sha256-in-wasm.$k" "$(printf '%s\n' "$o" | grep "^$k=" | cut -d= -f2)" "$(grep "^$k=" "$v" | cut -d= -f2)"
    done
fi

# Cross-verification on the first fixture: native receipt in wasm, wasm receipt natively, doctored one.
v=$(ls tests/fixtures/*.vector | head -1); name=$(basename "$v" .vector); d="$W/$name"
if [ -f "$d.native.receipt" ] && [ -f "$d.wasm.receipt" ]; then
    # the ten receipt fields, dtype among them
    o=$($NC verify "$d" "$d.native.receipt" 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$o" | grep -c '^MATCH')" -eq 10 ] && printf '%s\n' "$o" | grep -qx 'MATCH dtype'; then pass wasm-verifies-native-receipt; else fail wasm-verifies-native-receipt "rc=$rc: $o"; fi
    o=$("$CIS2" verify "$d.wasm.receipt" --model "$d" 2>&1); rc=$?
    if [ $rc -eq 0 ]; then pass native-verifies-wasm-receipt; else fail native-verifies-wasm-receipt "rc=$rc: $o"; fi
    # flip one hex digit of the witness digest
    awk '/^witness-digest /{ c=substr($2,1,1); $2=(c=="0"?"1":"0") substr($2,2) } { print }' "$d.native.receipt" > "$d.doctored.receipt"
    o=$($NC verify "$d" "$d.doctored.receipt" 2>&1); rc=$?
    if [ $rc -eq 1 ] && printf '%s\n' "$o" | grep -q '^MISMATCH witness-digest' && [ "$(printf '%s\n' "$o" | grep -c '^MISMATCH')" -eq 1 ]; then
        pass wasm-catches-doctored-witness
    else
        fail wasm-catches-doctored-witness "rc=$rc: $o"
    fi
    o=$($NC verify "$d" "$v" 2>&1); rc=$?
    if [ $rc -eq 2 ] && printf '%s\n' "$o" | grep -q '^PARSE-ERROR'; then pass wasm-rejects-malformed-receipt; else fail wasm-rejects-malformed-receipt "rc=$rc: $o"; fi
fi

# A safetensors header of 32 MB (__metadata__), streamed in 64 KB chunks as a browser may read
# a file: it loads and decodes as the file without it, with each byte copied a few times at
# most (web/cis2.js grew the header by a copy per chunk: 8.7 GB copied, quadratic in its size).
v=$(ls tests/fixtures/*.vector | head -1); name=$(basename "$v" .vector); d="$W/$name"
if [ -f "$d/model.safetensors" ]; then
    o=$($NC bighead "$d" "$(grep '^prompt_token_ids=' "$v" | cut -d= -f2)" 32 65521 2>&1)
    case "$o" in "ok "*) pass "wasm-big-header-read-once ($o)";; *) fail wasm-big-header-read-once "$o";; esac
fi

# Decoding before the digests are in (the page's hash worker still hashing the file's last
# chunks): run and verify decode, record each step, and bind the digests when they arrive
# (cis2_witness_replay). node_check's stand-in hasher holds them until the decode is done.
v=$(ls tests/fixtures/*.vector | head -1); name=$(basename "$v" .vector); d="$W/$name"
if [ -f "$d.native.receipt" ]; then
    ids=$(grep '^prompt_token_ids=' "$v" | cut -d= -f2); n=$(grep '^gen_toks=' "$v" | cut -d= -f2)
    pinned=$(grep '^cis2_ref=' "$v" | cut -d= -f2)
    o=$(CIS2_WASM_HOLD_DIGESTS=1 CIS2_RECEIPT_OUT="$d.held.receipt" $NC run "$d" "$ids" "$n" 2>&1)
    if printf '%s\n' "$o" | grep -qx 'digests_held_during_decode=1' && printf '%s\n' "$o" | grep -qx "cis2_ref=$pinned" &&
       cmp -s "$d.held.receipt" "$d.native.receipt"; then
        pass wasm-run-digests-held-during-decode
    else
        fail wasm-run-digests-held-during-decode "$o $(diff "$d.native.receipt" "$d.held.receipt" 2>&1 | head -4)"
    fi
    o=$(CIS2_WASM_HOLD_DIGESTS=1 $NC verify "$d" "$d.native.receipt" 2>&1); rc=$?
    if [ $rc -eq 0 ] && printf '%s\n' "$o" | grep -qx 'digests_held_during_decode=1' && [ "$(printf '%s\n' "$o" | grep -c '^MATCH')" -eq 10 ]; then
        pass wasm-verify-digests-held-during-decode
    else
        fail wasm-verify-digests-held-during-decode "rc=$rc: $o"
    fi
    # A weights digest that differs (one bit): the receipt's weights-sha256 and, through §12.1's
    # chain, its witness differ; nothing else.
    o=$(CIS2_WASM_HOLD_DIGESTS=wrong $NC verify "$d" "$d.native.receipt" 2>&1); rc=$?
    mis=$(printf '%s\n' "$o" | sed -n 's/^MISMATCH \([a-z0-9-]*\):.*/\1/p' | tr '\n' ' ')
    if [ $rc -eq 1 ] && [ "$mis" = "weights-sha256 witness-digest " ]; then pass wasm-verify-held-wrong-weights-digest; else fail wasm-verify-held-wrong-weights-digest "rc=$rc, mismatches '$mis': $o"; fi
    # The witness bound to that digest. Golden from ../shared/tools/cis2_oracle.py with its
    # sha256_file giving model.safetensors' digest with bit 0 flipped (a second reading).
    if [ "$name" = eps-subnormal ]; then
        o=$(CIS2_WASM_HOLD_DIGESTS=wrong $NC run "$d" "$ids" "$n" 2>&1)
        expect_eq wasm-run-held-wrong-weights-digest-witness "$(printf '%s\n' "$o" | grep '^cis2_ref=' | cut -d= -f2)" \
            a0551efe4abe6feef46bc058eac7a87bffc9bb74edd9f850588d81a0d25786ec
    fi
    # A run too long to record (here: any) waits for the digests, then decodes.
    o=$(CIS2_WASM_HOLD_DIGESTS=1 CIS2_WASM_REC_MAX=0 $NC run "$d" "$ids" "$n" 2>&1)
    if printf '%s\n' "$o" | grep -qx 'digests_held_during_decode=0' && printf '%s\n' "$o" | grep -qx "cis2_ref=$pinned"; then
        pass wasm-run-too-long-to-record-waits
    else
        fail wasm-run-too-long-to-record-waits "$o"
    fi
fi

# Sampling (docs/sampling.md) in wasm32: the same C sampler, on the logits wasm computes. A
# sampled run's receipt is byte for byte native's, also with the digests held during the decode
# (the replay then covers the sampler record, docs/sampling.md §5); a native sampled receipt
# verifies (sampler and seed MATCH); an edited seed or temperature is a MISMATCH naming both;
# and tools/sample_reference.py on the logits of a wasm32 trace picks the wasm run's ids, which
# are native's: the same bits on a third architecture (t_sampling checks x86-64 and, in the
# aarch64 leg, aarch64).
V=tests/fixtures/llama.vector; d="$W/llama"
if [ -f "$d/model.safetensors" ]; then
    ids=$(grep '^prompt_token_ids=' "$V" | cut -d= -f2)
    SP=(--temperature 1.5 --top-k 0 --top-p 0.95 --min-p 0.01 --seed 3)
    "$CIS2" run --model "$d" --prompt-ids "$ids" -n 8 "${SP[@]}" --receipt "$d.s.native.receipt" >"$d.s.native.out" 2>&1 ||
        fail wasm-sampled-setup "native cis2 run: $(tail -n1 "$d.s.native.out")"
    export CIS2_WASM_SAMPLER="1.5 0 0.95 0.01 3"
    for held in 0 1; do
        nm=wasm-sampled-receipt-identical-native; [ $held = 1 ] && nm=wasm-sampled-run-digests-held-during-decode
        hv=""; [ $held = 1 ] && hv=1
        o=$(CIS2_WASM_HOLD_DIGESTS=$hv CIS2_RECEIPT_OUT="$d.s.wasm$held.receipt" $NC run "$d" "$ids" 8 2>&1)
        if cmp -s "$d.s.native.receipt" "$d.s.wasm$held.receipt" && { [ $held = 0 ] || printf '%s\n' "$o" | grep -qx 'digests_held_during_decode=1'; } &&
            printf '%s\n' "$o" | grep -qx 'sampler=temperature=1.5 top-k=0 top-p=0.95 min-p=0.01' && printf '%s\n' "$o" | grep -qx 'seed=3'; then
            pass "$nm"
        else fail "$nm" "$(printf '%s\n' "$o" | grep -v '^[a-z_0-9]*sha256=' | tr '\n' ' ') $(diff "$d.s.native.receipt" "$d.s.wasm$held.receipt" 2>&1 | head -4 | tr '\n' ' ')"; fi
    done
    unset CIS2_WASM_SAMPLER
    for held in "" 1; do
        o=$(CIS2_WASM_HOLD_DIGESTS=$held $NC verify "$d" "$d.s.native.receipt" 2>&1); rc=$?
        if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$o" | grep -c '^MATCH')" -eq 12 ] && printf '%s\n' "$o" | grep -qx 'MATCH sampler' &&
            printf '%s\n' "$o" | grep -qx 'MATCH seed'; then pass "wasm-verifies-sampled-receipt${held:+-digests-held}"
        else fail "wasm-verifies-sampled-receipt${held:+-digests-held}" "rc=$rc: $(printf '%s\n' "$o" | tr '\n' ' ')"; fi
    done
    for t in "seed s/^seed 3\$/seed 4/" "temperature s/temperature=1.5 /temperature=1.25 /" "top-p s/top-p=0.95 /top-p=0.9 /"; do
        tn=${t%% *}
        sed "${t#* }" "$d.s.native.receipt" > "$d.s.$tn.receipt"
        o=$(CIS2_WASM_HOLD_DIGESTS=1 $NC verify "$d" "$d.s.$tn.receipt" 2>&1); rc=$?
        if ! cmp -s "$d.s.native.receipt" "$d.s.$tn.receipt" && [ $rc -eq 1 ] &&
            printf '%s\n' "$o" | grep -q '^MISMATCH sampler: receipt temperature=' && printf '%s\n' "$o" | grep -q '^MISMATCH seed: receipt ' &&
            printf '%s\n' "$o" | grep -q '^MISMATCH witness-digest'; then pass "wasm-sampled-tampered-$tn-mismatch"
        else fail "wasm-sampled-tampered-$tn-mismatch" "rc=$rc: $(printf '%s\n' "$o" | grep -v '^MATCH' | tr '\n' ' ')"; fi
    done
    # The glue's sampler text is read as `cis2 run` reads its flags: a bad one is one line naming it.
    o=$(CIS2_WASM_SAMPLER="1 0 1.5 0 3" $NC run "$d" "$ids" 2 2>&1); rc=$?
    if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$o" | grep -c .)" -eq 1 ] && printf '%s\n' "$o" | grep -qxF 'ERROR top-p must be in [0, 1] (1 = off)'; then pass wasm-run-sampler-refused
    else fail wasm-run-sampler-refused "rc=$rc: $o"; fi
    o=$(CIS2_WASM_SAMPLER="1 0 1 0 18446744073709551616" $NC run "$d" "$ids" 2 2>&1); rc=$?
    expect_eq wasm-run-sampler-seed-refused "$rc: $o" "1: ERROR seed: expected an integer from 0 to 18446744073709551615, got '18446744073709551616'"
    PY=$(numpy_python)
    if [ -z "$PY" ]; then skip wasm-sampling-reference "no python3 with numpy"
    else
        n_p=$(printf '%s' "$ids" | tr ',' '\n' | grep -c .)
        i=0
        for a in "1.5 0 0.95 0.01 3" "2.0 5 1 0 18446744073709551615"; do
            set -- $a; i=$((i + 1))
            wids=$(CIS2_WASM_SAMPLER="$a" $NC run "$d" "$ids" 8 2>&1 | sed -n 's/^generated_token_ids=//p')
            nids=$("$CIS2" run --model "$d" --prompt-ids "$ids" -n 8 --temperature "$1" --top-k "$2" --top-p "$3" \
                --min-p "$4" --seed "$5" 2>&1 | sed -n 's/^generated_token_ids=//p')
            tr="$d.s.trace$i.st"
            if ! to=$(node web/test/wasm_trace.mjs --wasm "$CIS2_WASM" --model "$d" --prompt-ids "$ids" \
                --teacher-force "$(printf '%s' "$wids" | cut -d, -f1-7)" --out "$tr" 2>&1); then
                fail "wasm-sampling-reference-$i" "wasm_trace: $to"; continue
            fi
            ref=$("$PY" tools/sample_reference.py "$tr" --n-prompt "$n_p" --temperature "$1" --top-k "$2" \
                --top-p "$3" --min-p "$4" --seed "$5" 2>&1)
            if [ -n "$wids" ] && [ "$ref" = "$wids" ] && [ "$wids" = "$nids" ]; then
                pass "wasm-sampling-reference-$i (T=$1 K=$2 P=$3 M=$4 S=$5: reference on wasm32 logits = wasm32 = native)"
            else fail "wasm-sampling-reference-$i" "reference '$ref', wasm32 '$wids', native '$nids'"; fi
        done
        # and, as a peer verifier on wasm32's logits, the native sampled receipt (the first
        # set's): ids, argmax-digest and witness-digest (§12.1 with the sampler record) recomputed
        o=$("$PY" tools/sample_reference.py "$d.s.trace1.st" --receipt "$d.s.native.receipt" 2>&1); rc=$?
        expect_eq wasm-sampling-reference-verifies-receipt "$rc: $(printf '%s' "$o" | tr '\n' ' ')" \
            "0: MATCH generated-token-ids MATCH argmax-digest MATCH witness-digest"
    fi
fi

# The software FTZ/DAZ against this machine's hardware pin, operation by operation.
if [ -f web/test/ftz_diff.sh ]; then bash web/test/ftz_diff.sh "$W"; fi
exit 0
