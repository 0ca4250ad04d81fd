#!/usr/bin/env bash
# Arm C, the exact int8 engine (docs/quantization.md §2): int8 checkpoints from
# `cis2 quantize` run through the loader and both backends. On every fixture
# architecture `cis2 trace` of the int8 checkpoint equals arm B
# (tools/torch_trace.py --arm B, an independent PyTorch reading) to 0 ULP on
# every node, and both hash the same int8 weights (State 1); the fast backend
# equals the reference bit for bit (receipts) on every ISA this CPU has and
# 1/2 threads; on power-of-two scales the int8 engine equals cis2's own fp32
# engine on the same values (s * dot(q, x) == dot(q * s, x)); receipts say
# dtype int8-row and a receipt whose dtype was edited does not verify; a fault
# injected into C is localized against B. SKIPs (saying why) without torch.
cd "$(dirname "$0")/.."
source tests/lib.sh
T="$TESTTMP/int8-$(basename "${BUILD:-build}")"
rm -rf "$T"; mkdir -p "$T"
PY=""
for p in "${TORCH_PYTHON:-}" /usr/bin/python3 python3; do
    [ -n "$p" ] && "$p" -c 'import numpy' 2>/dev/null && { PY="$p"; break; }
done
TORCH=""
[ -n "$PY" ] && has_torch "$PY" && TORCH="$PY"
P="--prompt-ids 5,17,42 --teacher-force 7,99"
meta() { # meta FILE KEY: a trace's metadata value
    python3 -c "
import json,struct,sys; b=open(sys.argv[1],'rb').read(); n=struct.unpack('<Q',b[:8])[0]
print(json.loads(b[8:8+n])['__metadata__'].get(sys.argv[2]))" "$1" "$2"
}
isas=$(host_isas)
strip() { grep -vE '^(backend|isa|threads|load_ms|model_load_ms|hash_ms|.*_ms=|.*tok_s=)'; }

NAMES=""
for v in tests/fixtures/*.vector; do
    n=$(basename "$v" .vector)
    make_fixture "$T/$n" "$T/$n-q" $(vector_args "$v") ||
        { fail "int8.fixture-$n" "make_model/quantize failed"; continue; }
    NAMES="$NAMES $n"
done
# the LM head and embedding int8 too: untied, and tied (the embedding is the head)
"$CIS2" quantize --model "$T/untied-f32" --out "$T/untied-le-q" --lm-head --embed >/dev/null 2>&1
"$CIS2" quantize --model "$T/llama" --out "$T/llama-le-q" --lm-head --embed >/dev/null 2>&1
ALL="$NAMES untied-le llama-le"

# --- fast C == ref C: receipts and outputs, every ISA path, 1 and 2 threads
for n in $ALL; do
    D="$T/$n-q"
    "$CIS2" run --model "$D" --prompt-ids 5,17,42,3,9 -n 6 --backend ref --receipt "$T/$n.ref.r" 2>&1 | strip > "$T/$n.ref.out"
    grep -q 'dtype=int8-row$' "$T/$n.ref.out" && grep -qx 'dtype int8-row' "$T/$n.ref.r" \
        || fail "int8.dtype-int8-row-$n" "$(grep CIS2_REF "$T/$n.ref.out") $(grep dtype "$T/$n.ref.r")"
    bad=""; k=0
    for isa in $isas; do
        for th in 1 2; do
            o="$T/$n.$isa.$th"
            "$CIS2" run --model "$D" --prompt-ids 5,17,42,3,9 -n 6 --backend fast --isa "$isa" --threads "$th" \
                --receipt "$o.r" 2>&1 | strip > "$o.out"
            k=$((k + 1))
            cmp -s "$o.out" "$T/$n.ref.out" && cmp -s "$o.r" "$T/$n.ref.r" || bad="$bad $isa/$th"
        done
    done
    [ -z "$bad" ] && pass "int8.fast-equals-ref-$n ($k ISA x thread runs, receipts identical)" \
        || fail "int8.fast-equals-ref-$n" "differs:$bad"
done
grep -q 'dtype=int8-row$' "$T/llama.ref.out" && pass int8.cis2-ref-line-says-int8-row || fail int8.cis2-ref-line-says-int8-row
# prefill in tiles of tokens: a longer prompt, ref against fast (2 threads)
ids=$(seq -s, 3 7 200)
a=$("$CIS2" run --model "$T/qwen2-q" --prompt-ids "$ids" -n 4 --backend ref 2>&1 | strip)
b=$("$CIS2" run --model "$T/qwen2-q" --prompt-ids "$ids" -n 4 --backend fast --threads 2 2>&1 | strip)
[ -n "$a" ] && [ "$a" == "$b" ] && pass "int8.fast-equals-ref-long-prefill (29 tokens)" || fail int8.fast-equals-ref-long-prefill "$(diff <(echo "$a") <(echo "$b") | head -3)"

# --- the scale multiply in the §1.3 FTZ window (tests/int8_ftz.py): ref = fast here, C = B below
cp -r "$T/llama-q" "$T/ftzw-q" && python3 tests/int8_ftz.py ones "$T/ftzw-q" &&
    "$CIS2" trace --model "$T/ftzw-q" $P -o "$T/ftzw1.st" >/dev/null 2>&1 &&
    placed=$(python3 tests/int8_ftz.py place "$T/ftzw-q" "$T/ftzw1.st")
"$CIS2" trace --model "$T/ftzw-q" $P -o "$T/ftzw.st" >/dev/null 2>&1
nmin=$(python3 -c "
import json,struct,sys; b=open(sys.argv[1],'rb').read(); n=struct.unpack('<Q',b[:8])[0]
a,e=json.loads(b[8:8+n])['p0.L0.q_proj']['data_offsets']; v=struct.unpack('<%dI'%((e-a)//4),b[8+n+a:8+n+e])
print(sum(1 for x in v if x & 0x7FFFFFFF == 0x00800000))" "$T/ftzw.st" 2>/dev/null)
[ -n "$placed" ] && [ "${nmin:-0}" -gt 0 ] && pass "int8.ftz-window-fixture ($nmin outputs of p0.L0.q_proj round up to FLT_MIN, x86-64's §1.3 reading)" \
    || fail int8.ftz-window-fixture "placed='$placed' FLT_MIN outputs=$nmin"
ALL="$ALL ftzw"
for isa in $isas; do
    a=$("$CIS2" run --model "$T/ftzw-q" --prompt-ids 5,17,42 -n 3 --backend ref 2>&1 | strip)
    b=$("$CIS2" run --model "$T/ftzw-q" --prompt-ids 5,17,42 -n 3 --backend fast --isa $isa --threads 2 2>&1 | strip)
    [ -n "$a" ] && [ "$a" == "$b" ] && pass "int8.ftz-window-fast-equals-ref-$isa" || fail "int8.ftz-window-fast-equals-ref-$isa" "$(diff <(echo "$a") <(echo "$b") | head -3)"
done

# --- receipts: verify on the int8 model; dtype edited -> not verified, named
"$CIS2" verify "$T/qwen3.ref.r" --model "$T/qwen3-q" > "$T/v.out" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -qx 'MATCH dtype' "$T/v.out" && pass int8.receipt-verifies || fail int8.receipt-verifies "rc=$rc $(tail -2 "$T/v.out")"
sed 's/^dtype int8-row$/dtype fp32/' "$T/qwen3.ref.r" > "$T/edited.r"
"$CIS2" verify "$T/edited.r" --model "$T/qwen3-q" > "$T/v2.out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -qx 'MISMATCH dtype: receipt fp32, recomputed int8-row' "$T/v2.out" && [ "$(grep -c '^MISMATCH' "$T/v2.out")" -eq 1 ] \
    && pass "int8.edited-dtype-fails-verify (only dtype mismatches: the reason is named)" \
    || fail int8.edited-dtype-fails-verify "rc=$rc $(grep MISMATCH "$T/v2.out")"
# an fp32 receipt checked against the int8 twin: the artifacts and the computation differ
"$CIS2" run --model "$T/qwen3" --prompt-ids 5,17,42,3,9 -n 6 --receipt "$T/f.r" >/dev/null 2>&1
"$CIS2" verify "$T/f.r" --model "$T/qwen3-q" > "$T/v3.out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q '^MISMATCH dtype: receipt fp32, recomputed int8-row' "$T/v3.out" \
    && pass int8.fp32-receipt-against-int8-model-fails || fail int8.fp32-receipt-against-int8-model-fails "rc=$rc"

# --- power-of-two scales: C's int8 path equals cis2's fp32 engine on the same values
if [ -n "$PY" ]; then
    for n in llama qwen2; do
        cp -r "$T/$n" "$T/$n-p2" && "$PY" tests/quant_check.py pow2 "$T/$n-p2" --all &&
            "$CIS2" quantize --model "$T/$n-p2" --out "$T/$n-p2q" --lm-head --embed >/dev/null &&
            "$CIS2" trace --model "$T/$n-p2" $P -o "$T/f-$n-p2.st" >/dev/null &&
            "$CIS2" trace --model "$T/$n-p2q" $P -o "$T/c-$n-p2q.st" >/dev/null 2>&1
        out=$("$CIS2" diff --exact "$T/f-$n-p2.st" "$T/c-$n-p2q.st" 2>&1)
        echo "$out" | grep -qx 'verdict=IDENTICAL' \
            && pass "int8.pow2-scales-equal-fp32-engine-$n ($(echo "$out" | sed -n 's/^compared //p'), embedding and LM head int8 too)" \
            || fail "int8.pow2-scales-equal-fp32-engine-$n" "$(echo "$out" | grep -E '^(first|cause)')"
    done
else skip int8.pow2-scales-equal-fp32-engine "numpy not installed"; fi

# --- arm C against arm B: 0 ULP on every node of every fixture
if [ -z "$TORCH" ]; then
    skip int8.arm-c-equals-arm-b "PyTorch not installed (apt-get install python3-torch python3-numpy)"
    exit 0
fi
s1=0; s1bad=""
for n in $ALL; do
    "$CIS2" trace --model "$T/$n-q" $P -o "$T/c-$n.st" >/dev/null 2>"$T/c.err" || { fail "int8.arm-c-equals-arm-b-$n" "$(tail -1 "$T/c.err")"; continue; }
    "$CIS2" trace --model "$T/$n-q" $P --backend fast --threads 2 -o "$T/cf-$n.st" >/dev/null 2>&1
    if ! "$TORCH" tools/torch_trace.py --model "$T/$n-q" $P --arm B -o "$T/b-$n.st" >/dev/null 2>"$T/b.err"; then
        fail "int8.arm-c-equals-arm-b-$n" "$(tail -1 "$T/b.err")"; continue
    fi
    out=$("$CIS2" diff --exact "$T/c-$n.st" "$T/b-$n.st" 2>&1)
    out2=$("$CIS2" diff --exact "$T/cf-$n.st" "$T/b-$n.st" 2>&1)
    if echo "$out" | grep -qx 'verdict=IDENTICAL' && echo "$out2" | grep -qx 'verdict=IDENTICAL'; then
        pass "int8.arm-c-equals-arm-b-$n ($(echo "$out" | sed -n 's/^compared //p'), 0 ULP, ref and fast)"
    else fail "int8.arm-c-equals-arm-b-$n" "$(echo "$out" "$out2" | grep -E '^(first|cause)' | head -2 | tr '\n' ' ')"; fi
    c=$(meta "$T/c-$n.st" int8_weights_sha256); b=$(meta "$T/b-$n.st" int8_weights_sha256)
    [ -n "$c" ] && [ "$c" != None ] && [ "$c" == "$b" ] && [ "$(meta "$T/c-$n.st" dtype)" == int8-row ] \
        && s1=$((s1 + 1)) || s1bad="$s1bad $n"
done
[ -z "$s1bad" ] && pass "int8.state1-weights-digest (C and B hash the same q and scales: $s1 checkpoints)" \
    || fail int8.state1-weights-digest "differs on:$s1bad"
# greedy: the same picks as arm B
"$CIS2" trace --model "$T/qwen3-q" --prompt-ids 5,17,42 -n 4 -o "$T/cg.st" >/dev/null 2>&1
"$TORCH" tools/torch_trace.py --model "$T/qwen3-q" --prompt-ids 5,17,42 -n 4 --arm B -o "$T/bg.st" >/dev/null 2>&1
out=$("$CIS2" diff --exact "$T/cg.st" "$T/bg.st" 2>&1)
echo "$out" | grep -qx 'verdict=IDENTICAL' && pass int8.arm-c-equals-arm-b-greedy || fail int8.arm-c-equals-arm-b-greedy "$(echo "$out" | tail -2)"

# --- faults in C are localized against B, at their node
for f in "rmsnorm-assoc::p0.L0.attn_norm" "fma:1:p0.L1.q_proj" \
         "weight-bit:model.layers.1.mlp.up_proj.weight:200:6:p0.L1.up"; do
    name=${f%%:*}; rest=${f#*:}; node=${rest##*:}; arg=${rest%:*}
    fa=(); [ -n "$arg" ] && fa=(--fault-arg "$arg")
    "$CIS2" trace --model "$T/llama-q" $P --fault "$name" "${fa[@]}" -o "$T/cf-$name.st" >/dev/null 2>"$T/f.err"
    out=$("$CIS2" diff --exact "$T/b-llama.st" "$T/cf-$name.st" 2>&1); rc=$?
    [ $rc -eq 1 ] && echo "$out" | grep -q "^first_divergence=$node " \
        && pass "int8.fault-$name-localized ($node)" \
        || fail "int8.fault-$name-localized" "rc=$rc $(echo "$out" | grep first_div) $(head -1 "$T/f.err")"
done
expect_err int8.fault-weight-bit-int8-range "not in [0, 7]" "$CIS2" run --model "$T/llama-q" --prompt-ids 1 -n 1 \
    --backend ref --fault weight-bit --fault-arg model.layers.1.mlp.up_proj.weight:3:9
