#!/usr/bin/env bash
# The test-only fixture architecture "cis2-toy" (docs/architecture.md, recipe
# "add an architecture variant"): Llama plus a per-layer learned gain on the
# attention output, o = o_proj(att) * o_gain, before the §5.4 residual.
# It proves the recipe end to end: config parsing (gated by CIS2_TEST_ARCHS=1),
# one tensor-table row, one decode stage. Checks: the gate, the table row's
# required/unexpected rules, ref == fast on every ISA at threads 1 and 2
# (CIS2_REF, ids, receipt), the receipt verifies, and a second reading of the
# stage: numpy recomputes every layer's resid_attn from the trace's own
# embed / resid_mlp, o_proj and the checkpoint's gains, bit for bit; with all
# gains 1.0 the generated ids equal the plain Llama checkpoint's.
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/toyarch"
rm -rf "$T"; mkdir -p "$T"
case "$CIS2" in /*) C="$CIS2";; *) C="$PWD/$CIS2";; esac
PY=/usr/bin/python3

isas=$(host_isas)

A="--layers 2 --hidden 64 --inter 96 --heads 4 --kv-heads 2 --vocab 300 --seed 7"
python3 tools/make_model.py "$T/toy" --arch cis2-toy $A >/dev/null
python3 tools/make_model.py "$T/toy1" --arch cis2-toy --toy-gain ones $A >/dev/null
python3 tools/make_model.py "$T/llama" $A >/dev/null
P=5,17,42,99,3,250,11
N=6

# --- the gate: without CIS2_TEST_ARCHS=1 the name is unknown (docs/errors.md cfg-model-type)
unset CIS2_TEST_ARCHS
expect_err toyarch.refused-without-gate \
    'field "model_type" is not one of the supported architectures (llama, qwen2, qwen3)' \
    "$C" run --model "$T/toy" --prompt-ids "$P" -n 1
CIS2_TEST_ARCHS=0 "$C" run --model "$T/toy" --prompt-ids "$P" -n 1 >/dev/null 2>&1
expect_eq toyarch.refused-gate-not-1 "$?" 2
# the class name alone never selects it: the llama reading then finds an unexpected tensor
cp -r "$T/toy" "$T/toy-cls"
$PY - "$T/toy-cls/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); del c['model_type']
json.dump(c, open(sys.argv[1], 'w'))
EOF
CIS2_TEST_ARCHS=1 expect_err toyarch.class-name-is-llama \
    'unexpected tensor "model.layers.0.self_attn.o_gain.weight" (not used by a llama config' \
    "$C" run --model "$T/toy-cls" --prompt-ids "$P" -n 1
export CIS2_TEST_ARCHS=1

# --- the table row: required by cis2-toy, unexpected for llama
cp -r "$T/llama" "$T/toy-missing"
sed -i 's/"model_type": "llama"/"model_type": "cis2-toy"/' "$T/toy-missing/config.json"
expect_err toyarch.gain-required \
    'missing tensor "model.layers.0.self_attn.o_gain.weight" required by config.json' \
    "$C" run --model "$T/toy-missing" --prompt-ids "$P" -n 1
cp -r "$T/toy" "$T/llama-extra"
sed -i 's/"model_type": "cis2-toy"/"model_type": "llama"/' "$T/llama-extra/config.json"
expect_err toyarch.gain-unexpected-in-llama \
    'unexpected tensor "model.layers.0.self_attn.o_gain.weight"' \
    "$C" run --model "$T/llama-extra" --prompt-ids "$P" -n 1

# --- ref == fast, every ISA, threads 1 and 2
strip() { grep -vE '^(backend|isa)=' "$1"; }
if "$C" run --model "$T/toy" --prompt-ids "$P" -n $N --backend ref --receipt "$T/ref.rcpt" \
        >"$T/ref" 2>"$T/ref.err"; then
    want=$(grep '^CIS2_REF' "$T/ref")
    [ -n "$want" ] && pass toyarch.ref-runs || fail toyarch.ref-runs "no CIS2_REF line"
    for isa in $isas; do
        for th in 1 2; do
            o="$T/fast.$isa.$th"
            if ! "$C" run --model "$T/toy" --prompt-ids "$P" -n $N --backend fast --isa "$isa" \
                    --threads "$th" --receipt "$o.rcpt" >"$o" 2>"$o.err"; then
                fail "toyarch.fast.$isa.$th" "$(head -n1 "$o.err")"; continue
            fi
            if [ "$(grep '^CIS2_REF' "$o")" == "$want" ] && cmp -s <(strip "$o") <(strip "$T/ref") &&
                cmp -s "$o.rcpt" "$T/ref.rcpt"; then
                pass "toyarch.fast.$isa.$th: digest, ids and receipt == ref"
            else
                fail "toyarch.fast.$isa.$th" "got '$(grep '^CIS2_REF' "$o")' want '$want'"
            fi
        done
    done
    "$C" verify "$T/ref.rcpt" --model "$T/toy" --backend fast --threads 2 >"$T/verify" 2>&1
    expect_eq toyarch.receipt-verifies "$?" 0
else
    fail toyarch.ref-runs "$(head -n1 "$T/ref.err")"
fi

# --- the gain changes the run; all-ones gains give Llama's ids exactly (x * 1 == x)
ids_of() { grep -m1 '^generated_token_ids=' "$1"; }
"$C" run --model "$T/toy1" --prompt-ids "$P" -n $N >"$T/toy1.out" 2>&1
"$C" run --model "$T/llama" --prompt-ids "$P" -n $N >"$T/llama.out" 2>&1
g1=$(ids_of "$T/toy1.out"); gl=$(ids_of "$T/llama.out")
[ -n "$g1" ] && [ "$g1" == "$gl" ] && pass toyarch.ones-equals-llama ||
    fail toyarch.ones-equals-llama "toy1 '$g1' llama '$gl'"
"$C" trace --model "$T/toy" --prompt-ids "$P" -o "$T/toy.st" >/dev/null 2>"$T/trace.err"
"$C" trace --model "$T/llama" --prompt-ids "$P" -o "$T/llama.st" >/dev/null 2>>"$T/trace.err"

# --- second reading of the stage: numpy, from the trace and the checkpoint
res=$($PY - "$T/toy.st" "$T/llama.st" "$T/toy/model.safetensors" <<'EOF' 2>&1
import json, struct, sys
import numpy as np

def read_st(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n]); base = 8 + n; out = {}
    for k, v in h.items():
        if k == '__metadata__':
            continue
        s, e = v['data_offsets']; raw = b[base + s:base + e]
        if v['dtype'] == 'F32':
            a = np.frombuffer(raw, '<f4')
        elif v['dtype'] == 'BF16':
            a = (np.frombuffer(raw, '<u2').astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit('dtype ' + v['dtype'])
        out[k] = a.reshape(v['shape'])
    return out

tr, ll, w = read_st(sys.argv[1]), read_st(sys.argv[2]), read_st(sys.argv[3])
def tiny(a):  # §1.3: a subnormal anywhere would make numpy's IEEE reading differ
    return np.any((a != 0) & (np.abs(a) < np.float32(2.0 ** -126)))
checked = 0
for pos in range(7):
    for l in range(2):
        prev = tr['p%d.embed' % pos] if l == 0 else tr['p%d.L%d.resid_mlp' % (pos, l - 1)]
        o = tr['p%d.L%d.o_proj' % (pos, l)]
        g = w['model.layers.%d.self_attn.o_gain.weight' % l]
        prod = o * g  # float32 * float32: one RNE rounding per element
        want = prev + prod
        if tiny(prod) or tiny(want):
            raise SystemExit('subnormal in the check at p%d L%d' % (pos, l))
        got = tr['p%d.L%d.resid_attn' % (pos, l)]
        if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            raise SystemExit('p%d L%d resid_attn differs from prev + o_proj * o_gain' % (pos, l))
        checked += 1
# the gains are not a no-op: the toy's residual stream leaves Llama's at layer 0
if np.array_equal(tr['p0.L0.resid_attn'], ll['p0.L0.resid_attn']):
    raise SystemExit('the gain changed nothing')
if not np.array_equal(tr['p0.L0.o_proj'], ll['p0.L0.o_proj']):
    raise SystemExit('o_proj (before the gain) should equal llama\'s at layer 0')
print('ok %d' % checked)
EOF
)
expect_eq toyarch.numpy-second-reading "$res" "ok 14"

# --- the Python client reads the variant through libcis2 (the same CIS2_REF line as the CLI)
abi=$(sed -n 's/^#define CIS2_ABI_VERSION  *\([0-9]*\).*/\1/p' include/cis2.h)
SO="${BUILD:-build}/libcis2.so.$abi"
# (as t_python.sh: a library of another architecture is skipped; an ASan/UBSan one gets its
# runtimes preloaded into the uninstrumented python, leak checks off)
RUN=(env)
[ -f "$SO" ] && nm -D "$SO" 2>/dev/null | grep -q ' U __asan_' &&
    RUN=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
         ASAN_OPTIONS=detect_leaks=0)
so_arch=$([ -f "$SO" ] && readelf -h "$SO" | sed -n 's/^ *Machine: *//p')
if [ -f "$SO" ] && [ "$so_arch" != "$(readelf -h /bin/sh | sed -n 's/^ *Machine: *//p')" ]; then
    skip toyarch.python-client "$SO is built for '$so_arch', not this host"
elif [ -f "$SO" ] && $PY -c 'import ctypes, numpy' 2>/dev/null; then
    got=$("${RUN[@]}" CIS2_LIBRARY="$PWD/$SO" PYTHONPATH="$PWD/python" $PY - "$T/toy" "$P" $N <<'EOF2' 2>&1
import sys, cis2
m = cis2.Model(sys.argv[1], backend="fast", threads=2)
r = m.generate([int(x) for x in sys.argv[2].split(',')], int(sys.argv[3]))
print(m.config.arch, r.cis2_ref)
EOF2
)
    expect_eq toyarch.python-client "$got" "cis2-toy $(grep '^CIS2_REF' "$T/ref")"
else
    skip toyarch.python-client "no $SO or no /usr/bin/python3 with numpy"
fi
