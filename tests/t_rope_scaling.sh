#!/usr/bin/env bash
# rope_scaling "llama3" (docs/rope_scaling.md): the scaled §7.1 table is the
# one §7.3 reads and §7.2 hashes. Checks: null or absent rope_scaling is
# today's run byte for byte; the scaled table's digest differs from the
# unscaled twin's and equals the pinned one of Llama-3.2-1B's RoPE (head_dim
# 64, theta 500000, llama3 32/1/4/8192), cross-checked by
# tools/rope_scaling_check.py (numpy reading of the docs, arm B, and Hugging
# Face's expression over the pinned table); the older key "type" reads the
# same; ref == fast on every ISA at threads 1 and 2 (CIS2_REF, ids, receipt);
# the receipt verifies, and not against the unscaled twin; PyTorch's arm B
# equals `cis2 trace` bit for bit and arm A is within tolerance; every refusal
# is one line (docs/errors.md rows rope-*).
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/rope_scaling"
rm -rf "$T"; mkdir -p "$T"
case "$CIS2" in /*) C="$CIS2";; *) C="$PWD/$CIS2";; esac

isas=$(host_isas)

# head_dim 16, theta 10000: wavelengths 6.3 .. 19869, so llama3 with original 64,
# low 1, high 4 (bounds 64 and 16) leaves entry 0, smooths 1-2 and divides 3-7.
A="--layers 2 --hidden 64 --inter 96 --heads 4 --kv-heads 2 --vocab 300 --seed 3"
MK="python3 tools/make_model.py"
$MK "$T/plain" $A >/dev/null
$MK "$T/scaled" $A --rope-scaling llama3:8:1:4:64 >/dev/null
B1="--layers 1 --hidden 64 --inter 64 --heads 1 --kv-heads 1 --head-dim 64 --vocab 300 --theta 500000"
$MK "$T/l32" $B1 --rope-scaling llama3:32:1:4:8192 >/dev/null
P=5,17,42,99,3,250,11,7,8,9,10,12,13,14,15,16,18,19,20,21
N=8
run() { "$C" run --model "$1" --prompt-ids "$P" -n $N "${@:2}"; }
kv() { grep "^$1=" "$2" | cut -d= -f2-; }

# --- null and absent: today's behaviour, every output line
cp -r "$T/plain" "$T/null"
python3 - "$T/null/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c['rope_scaling'] = None
json.dump(c, open(sys.argv[1], 'w'), indent=2)
EOF
run "$T/plain" >"$T/plain.out" 2>&1 && run "$T/null" >"$T/null.out" 2>&1
strip_cfg() { grep -vE '^(CIS2_REF|config_sha256)' "$1"; }
if cmp -s <(strip_cfg "$T/plain.out") <(strip_cfg "$T/null.out"); then
    pass "rope.null-is-absent (ids and every digest but the config file's)"
else fail rope.null-is-absent "$(diff "$T/plain.out" "$T/null.out" | head -3)"; fi

# --- the scaled table: its own digest, Llama-3.2-1B's pinned
run "$T/scaled" >"$T/scaled.out" 2>"$T/scaled.err" || fail rope.scaled-runs "$(head -1 "$T/scaled.err")"
dp=$(kv inv_freq_table_digest "$T/plain.out"); ds=$(kv inv_freq_table_digest "$T/scaled.out")
[ -n "$ds" ] && [ "$dp" != "$ds" ] && pass rope.digest-differs-from-unscaled \
    || fail rope.digest-differs-from-unscaled "plain $dp scaled $ds"
[ -n "$(kv generated_token_ids "$T/scaled.out")" ] &&
    [ "$(kv generated_token_ids "$T/plain.out")" != "$(kv generated_token_ids "$T/scaled.out")" ] &&
    pass rope.scaled-changes-the-decode || fail rope.scaled-changes-the-decode "same ids"
L32=e74522aa75fb2c5f441fd4a27c1dafa625916b3af0c71d4172782f8ee8098aa8
expect_eq rope.llama32-1b-table-digest "$("$C" run --model "$T/l32" --prompt-ids 1,2 -n 1 |
    grep '^inv_freq_table_digest=')" "inv_freq_table_digest=$L32"

# --- "type", transformers' older spelling of the key, reads the same
cp -r "$T/scaled" "$T/oldkey"
sed -i 's/"rope_type": "llama3"/"type": "llama3"/' "$T/oldkey/config.json"
run "$T/oldkey" >"$T/oldkey.out" 2>&1
[ -n "$ds" ] && [ "$(kv inv_freq_table_digest "$T/oldkey.out")" = "$ds" ] &&
    [ "$(kv generated_token_ids "$T/oldkey.out")" = "$(kv generated_token_ids "$T/scaled.out")" ] &&
    pass rope.old-key-type || fail rope.old-key-type "$(head -2 "$T/oldkey.out")"

# --- ref == fast, every ISA, threads 1 and 2; the receipt verifies
strip() { grep -vE '^(backend|isa)=' "$1"; }
if run "$T/scaled" --backend ref --receipt "$T/ref.rcpt" >"$T/ref" 2>"$T/ref.err"; then
    want=$(grep '^CIS2_REF' "$T/ref")
    for isa in $isas; do
        for th in 1 2; do
            o="$T/fast.$isa.$th"
            if ! run "$T/scaled" --backend fast --isa "$isa" --threads "$th" --receipt "$o.rcpt" \
                    >"$o" 2>"$o.err"; then
                fail "rope.fast.$isa.$th" "$(head -n1 "$o.err")"; continue
            fi
            if [ "$(grep '^CIS2_REF' "$o")" == "$want" ] && cmp -s <(strip "$o") <(strip "$T/ref") &&
                cmp -s "$o.rcpt" "$T/ref.rcpt"; then
                pass "rope.fast.$isa.$th: digest, ids and receipt == ref"
            else
                fail "rope.fast.$isa.$th" "got '$(grep '^CIS2_REF' "$o")' want '$want'"
            fi
        done
    done
    out=$("$C" verify "$T/ref.rcpt" --model "$T/scaled" 2>&1)
    [ $? -eq 0 ] && pass rope.receipt-verifies || fail rope.receipt-verifies "$(echo "$out" | tail -2)"
    # the unscaled twin differs in config.json and in the table: both fields are named
    out=$("$C" verify "$T/ref.rcpt" --model "$T/plain" 2>&1); rc=$?
    [ $rc -ne 0 ] && echo "$out" | grep -q '^MISMATCH inv-freq-table-digest' &&
        pass rope.receipt-refused-by-unscaled-twin || fail rope.receipt-refused-by-unscaled-twin "rc=$rc $(echo "$out" | grep -i mismatch | head -3)"
else
    fail rope.ref-runs "$(head -n1 "$T/ref.err")"
fi

# --- second readings (PyTorch): the table three ways, arm B bit for bit, arm A in tolerance
TORCH=""
for p in /usr/bin/python3 python3; do has_torch "$p" && { TORCH="$p"; break; }; done
if [ -z "$TORCH" ]; then
    skip rope.torch "PyTorch not installed (apt-get install python3-torch python3-numpy)"
else
    chk=$("$TORCH" tools/rope_scaling_check.py 64 500000 32 1 4 8192 2>&1)
    for k in docs_numpy_digest armb_digest hf_on_pinned_digest; do
        expect_eq "rope.table-$k" "$(echo "$chk" | grep "^$k=")" "$k=$L32"
    done
    # parameters that are not exact in binary32 (the binary64 steps of the docs matter)
    cp -r "$T/scaled" "$T/odd"
    sed -i 's/"factor": 8.0/"factor": 7.9/; s/"low_freq_factor": 1.0/"low_freq_factor": 1.3/;
            s/"high_freq_factor": 4.0/"high_freq_factor": 3.7/' "$T/odd/config.json"
    chk=$("$TORCH" tools/rope_scaling_check.py 16 10000 7.9 1.3 3.7 64 2>&1)
    dodd=$("$C" run --model "$T/odd" --prompt-ids 1,2 -n 1 | grep '^inv_freq_table_digest=')
    for k in docs_numpy_digest armb_digest hf_on_pinned_digest; do
        expect_eq "rope.odd-table-$k" "$(echo "$chk" | grep "^$k=" | cut -d= -f2)" "${dodd#*=}"
    done
    TP="--prompt-ids $P"
    for m in scaled odd; do
        "$C" trace --model "$T/$m" $TP -o "$T/c-$m.st" >/dev/null 2>&1 || { fail "rope.arm-b.$m" "cis2 trace failed"; continue; }
        if ! "$TORCH" tools/torch_trace.py --model "$T/$m" $TP --arm B -o "$T/b-$m.st" >/dev/null 2>"$T/b-$m.err"; then
            fail "rope.arm-b.$m" "$(tail -1 "$T/b-$m.err")"; continue
        fi
        out=$("$C" diff --exact "$T/c-$m.st" "$T/b-$m.st")
        echo "$out" | grep -qx 'verdict=IDENTICAL' && pass "rope.arm-b.$m ($(echo "$out" | sed -n 's/^compared //p'), 0 ULP)" \
            || fail "rope.arm-b.$m" "$(echo "$out" | grep -E '^(first|cause)')"
        if ! "$TORCH" tools/torch_trace.py --model "$T/$m" $TP -o "$T/a-$m.st" >/dev/null 2>"$T/a-$m.err"; then
            fail "rope.arm-a.$m" "$(tail -1 "$T/a-$m.err")"; continue
        fi
        out=$("$C" diff "$T/c-$m.st" "$T/a-$m.st")
        echo "$out" | grep -qx 'verdict=WITHIN-TOLERANCE' && pass "rope.arm-a.$m (within tolerance)" \
            || fail "rope.arm-a.$m" "$(echo "$out" | grep -E '^(first|cause|verdict)')"
    done
    # the oracle's arm B reads the table: without rope_scaling it no longer matches
    "$TORCH" tools/torch_trace.py --model "$T/plain" $TP --arm B -o "$T/b-plain.st" >/dev/null 2>&1
    out=$("$C" diff --exact "$T/c-scaled.st" "$T/b-plain.st" 2>&1)
    if ! [ -s "$T/c-scaled.st" ] || ! echo "$out" | grep -q '^verdict='; then
        fail rope.arm-b-sees-the-scaling "no comparison: $(echo "$out" | tail -1)"
    elif echo "$out" | grep -qx 'verdict=IDENTICAL'; then
        fail rope.arm-b-sees-the-scaling "unscaled arm B equals the scaled trace"
    else pass rope.arm-b-sees-the-scaling; fi
fi

# --- Python: Model.config.rope_scaling as config.json gives it, None without scaling
if [ "${BUILD:-build}" = build ] && PYTHONPATH=python python3 -c 'import cis2' >/dev/null 2>&1; then
    out=$(PYTHONPATH=python python3 -c '
import sys, cis2
for d in sys.argv[1:]:
    with cis2.Model(d, threads=1) as m:
        print(m.config.rope_scaling)' "$T/scaled" "$T/l32" "$T/plain" 2>&1)
    expect_eq rope.python-config "$out" "{'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 64}
{'rope_type': 'llama3', 'factor': 32.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}
None"
else skip rope.python-config "the Python package runs against build/'s library only (BUILD=${BUILD:-build})"; fi

# --- refusals: one line each (docs/errors.md)
ERRORS_DIR="$T"
bad() { # ID WHAT PYTHON-ON-rs
    rm -rf "$T/$1"; cp -r "$T/scaled" "$T/$1"
    python3 - "$T/$1/config.json" "$3" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); rs = c['rope_scaling']
exec(sys.argv[2])
json.dump(c, open(sys.argv[1], 'w'), indent=2)
EOF
    errors_row "$1" "$2" "t_rope_scaling.sh" "$C" run --model "$T/$1" --prompt-ids 5 -n 1
}
bad rope-type-yarn "rope_scaling of another kind (yarn, linear, dynamic, longrope, ...)" "rs['rope_type'] = 'yarn'"
bad rope-type-linear-old-key "the older key \"type\" naming another kind" "del rs['rope_type']; rs['type'] = 'linear'"
bad rope-type-missing "rope_scaling without rope_type (or type)" "del rs['rope_type']"
bad rope-type-not-string "rope_type not a string" "rs['rope_type'] = 3"
bad rope-type-disagree "rope_type and type both given, differently" "rs['type'] = 'dynamic'"
bad rope-not-object "rope_scaling neither null nor an object" "c['rope_scaling'] = 'llama3'"
bad rope-unknown-key "a key llama3 does not take (an escape sequence in it printed escaped)" "rs['beta_fast\x1b[2J'] = 32"
bad rope-factor-missing "llama3 without factor" "del rs['factor']"
bad rope-factor-string "factor not a number" "rs['factor'] = '8'"
bad rope-factor-zero "factor <= 0" "rs['factor'] = 0"
bad rope-low-negative "low_freq_factor <= 0" "rs['low_freq_factor'] = -1.0"
bad rope-high-not-above-low "high_freq_factor <= low_freq_factor" "rs['high_freq_factor'] = 1.0"
bad rope-original-float "original_max_position_embeddings not an integer" "rs['original_max_position_embeddings'] = 64.5"
bad rope-original-zero "original_max_position_embeddings < 1" "rs['original_max_position_embeddings'] = 0"
rm -rf "$T/rope-duplicate-key"; cp -r "$T/scaled" "$T/rope-duplicate-key"
python3 - "$T/rope-duplicate-key/config.json" <<'EOF'
import sys
p = sys.argv[1]; s = open(p).read()
open(p, 'w').write(s.replace('"factor": 8.0,', '"factor": 8.0, "factor": 2.0,', 1))
EOF
errors_row rope-duplicate-key "a key of rope_scaling given twice" "t_rope_scaling.sh" \
    "$C" run --model "$T/rope-duplicate-key" --prompt-ids 5 -n 1
