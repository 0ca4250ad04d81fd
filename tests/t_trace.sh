#!/usr/bin/env bash
# Layer traces, cis2 diff, fault injection, cis2 compare and the
# PyTorch oracle. Each fault is traced against a clean run and `cis2 diff`
# must name the right first divergent node and decision-tree branch.
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/trace"; rm -rf "$T"; mkdir -p "$T"
MK="python3 tools/make_model.py"
P="--prompt-ids 5,17,42 --teacher-force 7,99"

$MK "$T/llama" >/dev/null
$MK "$T/qwen2" --arch qwen2 >/dev/null
$MK "$T/qwen3" --arch qwen3 >/dev/null
$MK "$T/untied" --untied --dtype f32 >/dev/null
$MK "$T/heads2" --heads 2 --kv-heads 1 >/dev/null
# FTZ fixture: layer 0's attn_norm weights set to 1.2e-38 (normal floats,
# just above FLT_MIN) so that (x*inv)*w underflows into the subnormal range
# wherever |x*inv| < 0.98: flushed to +0 with FTZ, a subnormal without it.
$MK "$T/ftz" --dtype f32 >/dev/null
python3 - "$T/ftz/model.safetensors" <<'EOF'
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
a, e = h['model.layers.0.input_layernorm.weight']['data_offsets']
b[8 + n + a:8 + n + e] = struct.pack('<%df' % ((e - a) // 4), *[1.2e-38] * ((e - a) // 4))
open(p, 'wb').write(b)
EOF

M="$T/llama"
"$CIS2" trace --model "$M" $P -o "$T/clean.st" > "$T/clean.out"; rc=$?
expect_eq trace.writes-clean "$rc" 0

# --- the file: names, shapes and metadata (read with the stdlib, independently of cis2)
chk=$(python3 - "$T/clean.st" "$T/qwen3" "$CIS2" <<'EOF'
import json, struct, sys, subprocess
def hdr(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; return json.loads(b[8:8 + n]), 8 + n, b
h, base, b = hdr(sys.argv[1]); m = h.pop('__metadata__')
bad = []
want = ['p0.embed', 'p0.L0.attn_norm', 'p0.L0.q_proj', 'p0.L1.resid_mlp', 'p0.final_norm', 'p0.logits', 'p4.logits', 'p4.L1.attn_probs']
bad += ['missing ' + w for w in want if w not in h]
if any('q_norm' in k for k in h): bad.append('llama trace has q_norm')
if h.get('p2.L0.attn_scores', {}).get('shape') != [4, 3]: bad.append('attn_scores shape %r' % h.get('p2.L0.attn_scores'))
if h['p0.logits']['shape'] != [320] or h['p0.logits']['dtype'] != 'F32': bad.append('logits entry %r' % h['p0.logits'])
# 5 positions x (1 + 2 layers x 17 nodes + 2)
if len(h) != 5 * 37: bad.append('%d tensors' % len(h))
for k, v in [('format', 'cis2-trace/1'), ('arm', 'cis2-ref'), ('token_ids', '5,17,42,7,99'), ('prompt_ids', '5,17,42'),
             ('teacher_force', '7,99'), ('mode', 'teacher-force'), ('hash_only', '0')]:
    if m.get(k) != v: bad.append('metadata %s=%r' % (k, m.get(k)))
if not m.get('node_order', '').startswith('embed,attn_norm,q_proj,k_proj,v_proj,q_rope'): bad.append('node_order %r' % m.get('node_order'))
if len(m.get('weights_sha256', '')) != 64: bad.append('weights_sha256')
# the data is 8-byte aligned and embed is the exact bf16-widened row of token 5
o = h['p0.embed']['data_offsets']
if base % 8: bad.append('unaligned data')
mh, mbase, mb = hdr(sys.argv[2].replace('qwen3', 'llama') + '/model.safetensors')
e = mh['model.embed_tokens.weight']['data_offsets'][0] + mbase + 5 * 64 * 2
row = [struct.unpack('<H', mb[e + 2*i:e + 2*i + 2])[0] << 16 for i in range(64)]
got = list(struct.unpack('<64I', b[base + o[0]:base + o[1]]))
if row != got: bad.append('embed row differs from the checkpoint')
print('ok' if not bad else '; '.join(bad))
EOF
)
expect_eq trace.file-layout "$chk" ok

# --- tracing changes no bit: the CIS2_REF of a traced greedy run equals an untraced one
for a in llama qwen3 untied; do
    r1=$("$CIS2" run --model "$T/$a" --prompt-ids 5,17,42 -n 5 | grep '^CIS2_REF')
    r2=$("$CIS2" trace --model "$T/$a" --prompt-ids 5,17,42 -n 5 -o "$T/g-$a.st" | grep '^CIS2_REF')
    [ -n "$r1" ] && [ "$r1" == "$r2" ] && pass "trace.traced-equals-untraced.$a" || fail "trace.traced-equals-untraced.$a" "run '$r1' trace '$r2'"
done
# the greedy trace stores that digest too, and logits only where CIS-2 computes them
python3 - "$T/g-llama.st" <<'EOF' | grep -qx ok && pass trace.greedy-metadata || fail trace.greedy-metadata "see $T/g-llama.st"
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); h = json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]]); m = h['__metadata__']
lg = sorted(k for k in h if k.endswith('.logits'))
print('ok' if m['mode'] == 'greedy' and len(m['cis2_ref']) == 64 and lg == ['p2.logits', 'p3.logits', 'p4.logits', 'p5.logits', 'p6.logits'] else (m, lg))
EOF
"$CIS2" trace --model "$M" $P -o "$T/clean2.st" >/dev/null
cmp -s "$T/clean.st" "$T/clean2.st" && pass trace.byte-identical-rerun || fail trace.byte-identical-rerun "two traces differ"
out=$("$CIS2" diff "$T/clean.st" "$T/clean2.st" --exact); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -qx 'verdict=IDENTICAL' && echo "$out" | grep -q '^compared 185 tensors' \
    && pass diff.identical-exit-0 || fail diff.identical-exit-0 "rc=$rc"

# --- --layers / --nodes
"$CIS2" trace --model "$M" $P --layers 1 --nodes q_proj,logits -o "$T/sel.st" >/dev/null
names=$(python3 -c "import json,struct,sys;b=open(sys.argv[1],'rb').read();h=json.loads(b[8:8+struct.unpack('<Q',b[:8])[0]]);h.pop('__metadata__');print(' '.join(sorted(h)))" "$T/sel.st")
expect_eq trace.layers-nodes-filter "$names" "p0.L1.q_proj p0.logits p1.L1.q_proj p1.logits p2.L1.q_proj p2.logits p3.L1.q_proj p3.logits p4.L1.q_proj p4.logits"

# --- faults: each must be localized to the right node and branch
# fault_case NAME MODEL "FAULT ARGS" WANT_FIRST WANT_BRANCH WANT_CAUSE_SUBSTRING
fault_case() {
    local name="$1" model="$2" fargs="$3" first="$4" branch="$5" cause="$6" clean="$T/clean-$(basename "$2").st"
    [ -f "$clean" ] || "$CIS2" trace --model "$model" $P -o "$clean" >/dev/null
    if ! "$CIS2" trace --model "$model" $P -o "$T/f-$name.st" --fault $fargs >/dev/null 2>"$T/f-$name.err"; then
        fail "fault.$name" "trace failed: $(cat "$T/f-$name.err")"; return
    fi
    local out rc
    out=$("$CIS2" diff "$clean" "$T/f-$name.st" --exact); rc=$?
    echo "$out" > "$T/f-$name.diff"
    local got_first got_branch got_cause
    got_first=$(echo "$out" | sed -n 's/^first_divergence=\([^ ]*\).*/\1/p')
    got_branch=$(echo "$out" | sed -n 's/^branch=//p')
    got_cause=$(echo "$out" | sed -n 's/^cause=//p')
    if [ $rc -eq 1 ] && [ "$got_first" == "$first" ] && [ "$got_branch" == "$branch" ] && [[ "$got_cause" == *"$cause"* ]]; then
        pass "fault.$name"
    else
        fail "fault.$name" "rc=$rc first=$got_first (want $first) branch=$got_branch (want $branch) cause=$got_cause (want *$cause*)"
    fi
}
fault_case weight-bit "$M" "weight-bit --fault-arg model.layers.1.mlp.up_proj.weight:1000:22" p0.L1.up linear-projection "isolated outputs differ (1 of 128"
fault_case fma "$M" "fma --fault-arg 1" p0.L1.q_proj linear-projection "FMA"
fault_case rmsnorm-assoc "$M" "rmsnorm-assoc" p0.L0.attn_norm normalization-attention "RMSNorm"
fault_case rope-offset "$M" "rope-offset" p1.L0.q_rope autoregressive-state "RoPE position"
fault_case kv-stale "$M" "kv-stale" p1.L0.attn_scores autoregressive-state "KV cache"
fault_case kv-stale-pos3 "$M" "kv-stale --fault-arg 3" p3.L0.attn_scores autoregressive-state "KV cache"
fault_case no-ftz "$T/ftz" "no-ftz" p0.L0.attn_norm normalization-attention "FTZ/DAZ"
fault_case embed-bit "$T/untied" "weight-bit --fault-arg model.embed_tokens.weight:$((42*64+3)):30" p2.embed embedding "embedding lookup"
fault_case qwen3-qnorm-bit "$T/qwen3" "weight-bit --fault-arg model.layers.0.self_attn.q_norm.weight:5:22" p0.L0.q_norm normalization-attention "q/k-norm"
fault_case qwen2-bias-bit "$T/qwen2" "weight-bit --fault-arg model.layers.0.self_attn.k_proj.bias:2:22" p0.L0.k_proj linear-projection "isolated"
# the tree also names position 0 as clean for the autoregressive faults
grep -q '4. autoregressive state ....... DIVERGES' "$T/f-kv-stale.diff" && grep -q '1. embedding/lookup ........... pass' "$T/f-kv-stale.diff" \
    && pass fault.tree-walk-printed || fail fault.tree-walk-printed "$(grep -A5 '^decision tree' "$T/f-kv-stale.diff")"
# the no-ftz fault leaves the stock fixture alone (no subnormals arise there) but changes the patched one
"$CIS2" trace --model "$M" $P -o "$T/f-noftz-stock.st" --fault no-ftz >/dev/null
"$CIS2" diff "$T/clean.st" "$T/f-noftz-stock.st" --exact >/dev/null; expect_eq fault.no-ftz-needs-subnormals "$?" 0
# faults change the run's digest (the --fault option of run)
clean_ref=$("$CIS2" run --model "$M" --prompt-ids 5,17,42 -n 4 | grep '^CIS2_REF')
for f in "fma" "rmsnorm-assoc" "rope-offset" "kv-stale" "weight-bit --fault-arg model.norm.weight:3:22"; do
    r=$("$CIS2" run --model "$M" --prompt-ids 5,17,42 -n 4 --fault $f | grep '^CIS2_REF')
    [ -n "$r" ] && [ "$r" != "$clean_ref" ] && pass "run.fault-changes-digest.${f%% *}" || fail "run.fault-changes-digest.${f%% *}" "$r"
done
# ...and a faulted engine leaves no trace on the model: a clean run after is clean (weight-bit restores on free)
expect_err run.fault-unknown "unknown --fault \"bogus\"" "$CIS2" run --model "$M" --prompt-ids 5 --fault bogus
expect_err run.fault-needs-ref "needs --backend ref" "$CIS2" run --model "$M" --prompt-ids 5 --fault fma --backend fast
expect_err run.fault-bad-layer "layer in [0, 1]" "$CIS2" run --model "$M" --prompt-ids 5 --fault fma --fault-arg 2
expect_err run.fault-bad-tensor "no weight tensor" "$CIS2" run --model "$M" --prompt-ids 5 --fault weight-bit --fault-arg model.layers.9.mlp.up_proj.weight:1:1
expect_err run.fault-bad-index "is not in [0, 8192)" "$CIS2" run --model "$M" --prompt-ids 5 --fault weight-bit --fault-arg model.layers.0.mlp.up_proj.weight:8192:1
expect_err run.fault-bad-bit "bit '32'" "$CIS2" run --model "$M" --prompt-ids 5 --fault weight-bit --fault-arg model.layers.0.mlp.up_proj.weight:1:32
expect_err run.fault-missing-arg "TENSOR:INDEX:BIT" "$CIS2" run --model "$M" --prompt-ids 5 --fault weight-bit
expect_err run.fault-extra-arg "takes no --fault-arg" "$CIS2" run --model "$M" --prompt-ids 5 --fault no-ftz --fault-arg 1
expect_err trace.fault-unknown "unknown --fault" "$CIS2" trace --model "$M" --prompt-ids 5 -o "$T/x.st" --fault nope

# --- hash-only traces
"$CIS2" trace --model "$M" $P --hash-only -o "$T/hash.st" >/dev/null
sz=$(stat -c %s "$T/hash.st"); full=$(stat -c %s "$T/clean.st")
[ "$sz" -lt $((full / 3)) ] && pass trace.hash-only-small || fail trace.hash-only-small "$sz vs $full bytes"
out=$("$CIS2" diff "$T/clean.st" "$T/hash.st" --exact); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q '^compared 185 tensors' && pass diff.hash-only-matches-full || fail diff.hash-only-matches-full "rc=$rc $(echo "$out" | tail -3)"
out=$("$CIS2" diff "$T/hash.st" "$T/f-rope-offset.st"); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q '^first_divergence=p1.L0.q_rope' && echo "$out" | grep -q '^branch=autoregressive-state' \
    && pass diff.hash-only-localizes || fail diff.hash-only-localizes "rc=$rc $(echo "$out" | grep -E '^(first|branch)')"

# --- tolerance mode (for non-CIS-2 fp32 engines)
out=$("$CIS2" diff "$T/clean.st" "$T/f-fma.st"); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -qx 'verdict=WITHIN-TOLERANCE' && pass diff.tol-accepts-fma-rounding || fail diff.tol-accepts-fma-rounding "rc=$rc"
"$CIS2" trace --model "$M" $P -o "$T/f-bit30.st" --fault weight-bit --fault-arg model.layers.0.mlp.gate_proj.weight:77:30 >/dev/null
out=$("$CIS2" diff "$T/clean.st" "$T/f-bit30.st"); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q '^first_divergence=p0.L0.gate' && pass diff.tol-catches-weight-bit || fail diff.tol-catches-weight-bit "rc=$rc"
printf '# stricter than default\n* max_rel=0 mean_rel=0\nlogits top1=1\n' > "$T/zero.tol"
"$CIS2" diff "$T/clean.st" "$T/f-fma.st" --tol "$T/zero.tol" >/dev/null; expect_eq diff.tol-file-overrides "$?" 1
printf 'q_proj max_rel=1e-3\nbogus_node max_rel=1\n' > "$T/bad.tol"
expect_err diff.tol-file-bad-node "bad.tol: line 2: unknown node 'bogus_node'" "$CIS2" diff "$T/clean.st" "$T/clean.st" --tol "$T/bad.tol"
printf 'q_proj max_rel\n' > "$T/bad2.tol"
expect_err diff.tol-file-bad-value "line 1: expected key=number" "$CIS2" diff "$T/clean.st" "$T/clean.st" --tol "$T/bad2.tol"
printf 'q_proj speed=1\n' > "$T/bad3.tol"
expect_err diff.tol-file-bad-key "unknown key 'speed'" "$CIS2" diff "$T/clean.st" "$T/clean.st" --tol "$T/bad3.tol"

# --- structure mismatches are reported, never skipped
"$CIS2" trace --model "$T/heads2" $P -o "$T/heads2.st" >/dev/null
out=$("$CIS2" diff "$T/clean.st" "$T/heads2.st" --exact); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q '^p0.L0.attn_scores *SHAPE MISMATCH A=\[4x1\] B=\[2x1\]' && pass diff.shape-mismatch-reported || fail diff.shape-mismatch-reported "rc=$rc"
"$CIS2" trace --model "$M" $P --layers 0 -o "$T/l0.st" >/dev/null
out=$("$CIS2" diff "$T/clean.st" "$T/l0.st" --exact); rc=$?
n1=$(echo "$out" | grep -c 'ONLY IN A')
[ $rc -eq 1 ] && [ "$n1" -eq 85 ] && pass diff.missing-names-reported || fail diff.missing-names-reported "rc=$rc only-in-A=$n1"
"$CIS2" trace --model "$M" --prompt-ids 5,17,42 --teacher-force 8,99 -o "$T/tok.st" >/dev/null
out=$("$CIS2" diff "$T/clean.st" "$T/tok.st" --exact); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q '^MISMATCH token_ids' && pass diff.token-mismatch-reported || fail diff.token-mismatch-reported "rc=$rc"

# --- diff bad input: one line naming the file, exit 2
diff_err() {
    local name="$1" want="$2"; shift 2
    expect_err "$name" "$want" "$CIS2" diff "$@"
    "$CIS2" diff "$@" >/dev/null 2>&1; local rc=$?
    [ $rc -eq 2 ] || fail "$name.exit2" "rc=$rc"
}
diff_err diff.missing-file "$T/nope.st: cannot open" "$T/clean.st" "$T/nope.st"
head -c 100 /dev/urandom > "$T/garbage.st"
diff_err diff.garbage-file "$T/garbage.st" "$T/garbage.st" "$T/clean.st"
head -c 2000 "$T/clean.st" > "$T/trunc.st"
diff_err diff.truncated-file "$T/trunc.st" "$T/clean.st" "$T/trunc.st"
diff_err diff.not-a-trace "is not a trace name" "$T/clean.st" "$M/model.safetensors"
diff_err diff.exact-and-tol "exclude each other" "$T/clean.st" "$T/clean.st" --exact --tol "$T/zero.tol"
diff_err diff.unknown-flag "unknown option '--fast'" "$T/clean.st" "$T/clean.st" --fast
diff_err diff.one-arg "usage: cis2 diff A B" "$T/clean.st"
diff_err diff.tol-missing "$T/none.tol: cannot open" "$T/clean.st" "$T/clean.st" --tol "$T/none.tol"
python3 - "$T/clean.st" "$T/bf16.st" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
h['p0.embed']['dtype'] = 'BF16'; h['p0.embed']['shape'] = [h['p0.embed']['shape'][0] * 2]
hb = json.dumps(h).encode(); hb += b' ' * ((8 - len(hb) % 8) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(hb)) + hb + b[8 + n:])
EOF
diff_err diff.not-f32 "is not F32" "$T/clean.st" "$T/bf16.st"

# --- trace bad input
expect_err trace.no-output "-o FILE is required" "$CIS2" trace --model "$M" --prompt-ids 5
expect_err trace.bad-layers "layer 2 does not exist" "$CIS2" trace --model "$M" --prompt-ids 5 --layers 0-2 -o "$T/x.st"
expect_err trace.bad-layers-syntax "--layers 'a'" "$CIS2" trace --model "$M" --prompt-ids 5 --layers a -o "$T/x.st"
expect_err trace.bad-nodes "unknown node 'qproj'" "$CIS2" trace --model "$M" --prompt-ids 5 --nodes qproj -o "$T/x.st"
expect_err trace.tf-and-n "exclude each other" "$CIS2" trace --model "$M" --prompt-ids 5 --teacher-force 1 -n 2 -o "$T/x.st"
expect_err trace.oov "outside the vocabulary" "$CIS2" trace --model "$M" --prompt-ids 5 --teacher-force 320 -o "$T/x.st"
expect_err trace.unwritable "$T/no/dir/x.st" "$CIS2" trace --model "$M" --prompt-ids 5 -o "$T/no/dir/x.st"
expect_err trace.bad-model "$T/nomodel/config.json" "$CIS2" trace --model "$T/nomodel" --prompt-ids 5 -o "$T/x.st"
expect_err trace.unknown-flag "unknown option '--bogus'" "$CIS2" trace --model "$M" --prompt-ids 5 -o "$T/x.st" --bogus

# --- compare
out=$("$CIS2" compare --model "$M" --against "$T/clean.st" --exact); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -qx 'verdict=IDENTICAL' && pass compare.against-own-trace || fail compare.against-own-trace "rc=$rc $(echo "$out" | tail -2)"
out=$("$CIS2" compare --model "$M" --prompt-ids 5,17,42 --against "$T/f-kv-stale.st" --exact); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q '^first_divergence=p1.L0.attn_scores' && echo "$out" | grep -qx 'branch=autoregressive-state' \
    && pass compare.against-faulted-trace || fail compare.against-faulted-trace "rc=$rc $(echo "$out" | grep -E '^(first|branch)')"
out=$("$CIS2" compare --model "$M" --against "$T/sel.st" --exact); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q '^compared 10 tensors' && echo "$out" | grep -q 'have no counterpart in B' \
    && pass compare.against-partial-trace || fail compare.against-partial-trace "rc=$rc"
# our run's tensors carry their digests too: checked against a hash-only trace
# of the same run, every node is equal (every one 'sha256 differs' before)
out=$("$CIS2" compare --model "$M" --against "$T/hash.st"); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -qx 'verdict=IDENTICAL' && echo "$out" | grep -q '^compared 185 tensors' \
    && pass compare.against-hash-only-trace || fail compare.against-hash-only-trace "rc=$rc $(echo "$out" | grep -m2 differs)"
expect_err compare.prompt-mismatch "differ from the prompt_ids" "$CIS2" compare --model "$M" --prompt-ids 5,17 --against "$T/clean.st"
expect_err compare.against-missing "$T/nope.st: cannot open" "$CIS2" compare --model "$M" --against "$T/nope.st"
expect_err compare.needs-mode "give either --against TRACE or two backends" "$CIS2" compare --model "$M" --prompt-ids 5
out=$("$CIS2" compare --model "$M" --prompt-ids 5,17,42 -n 3 --backend ref --backend fast 2>&1); rc=$?
if [ $rc -eq 0 ]; then
    echo "$out" | grep -qx 'verdict=IDENTICAL' && pass compare.ref-vs-fast || fail compare.ref-vs-fast "$out"
elif [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q 'backend fast'; then
    skip compare.ref-vs-fast "the fast backend is not available: $out"
else
    fail compare.ref-vs-fast "rc=$rc: $out"
fi

# --- -o - writes the trace to stdout (the summary goes to stderr), byte for byte the file
"$CIS2" trace --model "$M" $P -o - > "$T/stdout.st" 2>"$T/stdout.err"; rc=$?
[ $rc -eq 0 ] && cmp -s "$T/stdout.st" "$T/clean.st" && grep -q '^trace: wrote standard output' "$T/stdout.err" \
    && pass trace.output-dash-is-stdout || fail trace.output-dash-is-stdout "rc=$rc $(head -c 300 "$T/stdout.err")"
if command -v script >/dev/null; then
    o=$(script -qec "\"$CIS2\" trace --model \"$M\" --prompt-ids 5 -o -" /dev/null 2>&1 | tr -d '\r')
    case "$o" in *"refusing to write a binary trace to a terminal"*) pass trace.output-dash-not-a-terminal;;
        *) fail trace.output-dash-not-a-terminal "$(echo "$o" | head -c 200)";; esac
else skip trace.output-dash-not-a-terminal "no script(1) to make a terminal"; fi
# --- --tol files with CRLF read as with LF
printf '# stricter than default\r\n* max_rel=0 mean_rel=0\r\nlogits top1=1\r\n' > "$T/zero-crlf.tol"
"$CIS2" diff "$T/clean.st" "$T/f-fma.st" --tol "$T/zero.tol" > "$T/tol-lf.out"
"$CIS2" diff "$T/clean.st" "$T/f-fma.st" --tol "$T/zero-crlf.tol" > "$T/tol-crlf.out"; rc=$?
[ $rc -eq 1 ] && cmp -s "$T/tol-lf.out" "$T/tol-crlf.out" && pass diff.tol-file-crlf || fail diff.tol-file-crlf "rc=$rc"
# --- a trace cannot forge report lines: metadata and names from the file are printed escaped
python3 - "$T/clean.st" "$T/evil.st" <<'PYEOF'
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
h['__metadata__']['arm'] = 'torch\nverdict=WITHIN-TOLERANCE\x1b[2J\u009b1;1H\u202e'
h['__metadata__']['weights_sha256'] = '\x1b]0;pwned\x07' + 'a' * 60
hb = json.dumps(h).encode(); hb += b' ' * ((8 - len(hb) % 8) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(hb)) + hb + b[8 + n:])
PYEOF
out=$("$CIS2" diff "$T/clean.st" "$T/evil.st" --exact); rc=$?
nv=$(printf '%s\n' "$out" | grep -c '^verdict=')
ctl=$(printf '%s' "$out" | tr -d '\n' | LC_ALL=C grep -c "$(printf '[\001-\037\177]')")
[ $rc -eq 0 ] && [ "$nv" -eq 1 ] && [ "$ctl" -eq 0 ] && printf '%s\n' "$out" | grep -qF 'arm torch\nverdict=WITHIN-TOLERANCE\x1b[2J\u009b1;1H\u202e)' \
    && pass diff.metadata-escaped || fail diff.metadata-escaped "rc=$rc verdicts=$nv control=$ctl"
# --- a FIFO as a trace or tolerance file is refused, never waited on
mkfifo "$T/fifo.st"
expect_err diff.fifo-refused "not a regular file (a FIFO)" timeout 20 "$CIS2" diff "$T/clean.st" "$T/fifo.st"

# --- PyTorch oracle (Debian python3-torch): our forward pass vs an independent fp32 one
PY=""
for p in "${TORCH_PYTHON:-}" /usr/bin/python3 python3; do
    [ -n "$p" ] && has_torch "$p" && { PY="$p"; break; }
done
if [ -z "$PY" ]; then
    skip torch.oracle "PyTorch not installed (apt-get install python3-torch python3-numpy)"
else
    for a in llama qwen2 qwen3 untied; do
        [ -f "$T/clean-$a.st" ] || "$CIS2" trace --model "$T/$a" $P -o "$T/clean-$a.st" >/dev/null
        if ! "$PY" tools/torch_trace.py --model "$T/$a" $P -o "$T/torch-$a.st" >/dev/null 2>"$T/torch-$a.err"; then
            fail "torch.oracle.$a" "torch_trace.py failed: $(tail -1 "$T/torch-$a.err")"; continue
        fi
        out=$("$CIS2" diff "$T/clean-$a.st" "$T/torch-$a.st"); rc=$?
        echo "$out" > "$T/torch-$a.diff"
        mx=$(echo "$out" | sed -n 's/.* max_abs=\([^ ]*\) .*/\1/p' | sort -g | tail -1)
        [ $rc -eq 0 ] && echo "$out" | grep -qx 'verdict=WITHIN-TOLERANCE' && pass "torch.oracle.$a (max_abs $mx)" || fail "torch.oracle.$a" "rc=$rc $(echo "$out" | grep -E '^(first|cause|MISM)')"
    done
    # the tolerance can fail: a flipped exponent bit is caught against torch too
    out=$("$CIS2" diff "$T/f-bit30.st" "$T/torch-llama.st"); rc=$?
    [ $rc -eq 1 ] && echo "$out" | grep -q '^first_divergence=p0.L0.gate' && pass torch.oracle-catches-fault || fail torch.oracle-catches-fault "rc=$rc"
    # greedy mode: same picks, same logit positions
    "$CIS2" trace --model "$T/qwen3" --prompt-ids 5,17,42 -n 3 -o "$T/g3.st" >/dev/null
    "$PY" tools/torch_trace.py --model "$T/qwen3" --prompt-ids 5,17,42 -n 3 -o "$T/tg3.st" >/dev/null
    "$CIS2" diff "$T/g3.st" "$T/tg3.st" >/dev/null; expect_eq torch.oracle-greedy "$?" 0
    out=$("$CIS2" compare --model "$T/qwen2" --against "$T/torch-qwen2.st"); rc=$?
    [ $rc -eq 0 ] && echo "$out" | grep -qx 'verdict=WITHIN-TOLERANCE' && pass compare.against-torch || fail compare.against-torch "rc=$rc"
fi
