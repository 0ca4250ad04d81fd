#!/usr/bin/env bash
# `cis2 serve` sampling (docs/serve.md, *Sampling*, *Log-probabilities*): over real HTTP on
# 127.0.0.1, a sampled completion's receipt is `cis2 run --temperature … --seed …`'s byte for
# byte and verifies with `cis2 verify` and /v1/verify; the same seed gives the same bytes,
# another seed other text; a request without a seed gets the server's, returned and in the
# receipt; a tampered seed, temperature, top_k, top_p or min_p is a mismatch naming them; n
# choices (seed + i); logprobs in OpenAI's shapes, their values the bits of
# tools/sample_reference.py's reading of docs/sampling.md §9 over `cis2 trace`'s logits; the
# 400s naming the parameter.
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/serve_sampling"; rm -rf "$T"; mkdir -p "$T"
serve_setup serve_sampling
python3 tools/make_model.py "$T/fx" --arch llama --heads 9 --kv-heads 3 --hidden 72 --inter 100 \
    --layers 3 --theta 100000 >/dev/null || { fail serve_sampling.fixture "make_model.py failed"; exit 0; }
start main --model "$T/fx" --max-batch 4 --queue 16 --threads 2 || exit 0
U="http://127.0.0.1:$PORT"
P="hello world"
cmp_receipt() { # cmp_receipt NAME JSON PYEXPR SOLO: the receipt at PYEXPR equals the file SOLO
    jget "$2" "$3" | head -c -1 > "$T/$1.receipt"
    if cmp -s "$T/$1.receipt" "$4"; then pass "serve_sampling.$1"
    else fail "serve_sampling.$1" "$(diff "$T/$1.receipt" "$4" | head -6)"; fi
}
post() { C "$U/v1/completions" -d "$1"; }

# Same seed: the same bytes, and `cis2 run`'s receipt.
B='{"model":"fx","prompt":"'"$P"'","max_tokens":8,"temperature":1.5,"top_p":0.95,"seed":7}'
post "$B" > "$T/s7a.json"
post "$B" > "$T/s7b.json"
"$CIS2" run --model "$T/fx" --prompt "$P" -n 8 --temperature 1.5 --top-p 0.95 --seed 7 --stop-at-eos \
    --receipt "$T/solo7.txt" > /dev/null 2>&1
cmp_receipt receipt-equals-cis2-run "$T/s7a.json" 'd["cis2"]["receipt"]' "$T/solo7.txt"
a=$(jget "$T/s7a.json" '[d["choices"], d["cis2"]["receipt"]]'); b=$(jget "$T/s7b.json" '[d["choices"], d["cis2"]["receipt"]]')
[ -n "$a" ] && [ "$a" = "$b" ] && pass serve_sampling.same-seed-same-bytes \
    || fail serve_sampling.same-seed-same-bytes "'$a' vs '$b'"
expect_eq serve_sampling.seed-returned "$(jget "$T/s7a.json" '[d["seed"], d["cis2"]["seed"], d["cis2"]["sampler"]]')" \
    '[7, 7, {"temperature": 1.5, "top_k": 0, "top_p": 0.95, "min_p": 0}]'
"$CIS2" verify "$T/receipt-equals-cis2-run.receipt" --model "$T/fx" > "$T/v7.out" 2>&1 \
    && grep -q '^MATCH seed' "$T/v7.out" && pass serve_sampling.cis2-verify \
    || fail serve_sampling.cis2-verify "$(tail -3 "$T/v7.out")"
# Another seed: other text (temperature 1.5 over this model's 320 ids: 8 tokens never agree
# for seeds 7 and 8, shown here and by cis2 run).
post '{"model":"fx","prompt":"'"$P"'","max_tokens":8,"temperature":1.5,"top_p":0.95,"seed":8}' > "$T/s8.json"
t7=$(jget "$T/s7a.json" 'd["cis2"]["generated_token_ids"]'); t8=$(jget "$T/s8.json" 'd["cis2"]["generated_token_ids"]')
[ -n "$t7" ] && [ "$t7" != "$t8" ] && pass serve_sampling.other-seed-other-ids \
    || fail serve_sampling.other-seed-other-ids "seed 7 $t7, seed 8 $t8"
# Greedy stays v1, with no seed member.
post '{"model":"fx","prompt":"'"$P"'","max_tokens":4,"seed":7}' > "$T/g.json"
expect_eq serve_sampling.greedy-v1 "$(jget "$T/g.json" '["seed" in d, "seed" in d["cis2"], d["cis2"]["receipt"].split(chr(10))[0]]')" \
    '[false, false, "CIS-2-RECEIPT v1"]'

# No seed: the server's, below 2^53, in the response and the receipt; the receipt verifies.
post '{"model":"fx","prompt":"'"$P"'","max_tokens":6,"temperature":0.8,"top_k":40,"min_p":0.01}' > "$T/ns.json"
S=$(jget "$T/ns.json" 'd["seed"]')
jget "$T/ns.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/ns.receipt"
expect_eq serve_sampling.server-seed \
    "$(python3 -c 'import sys; print(0 <= int(sys.argv[1]) < 2**53)' "$S") $(sed -n 's/^seed //p' "$T/ns.receipt")" "True $S"
"$CIS2" run --model "$T/fx" --prompt "$P" -n 6 --temperature 0.8 --top-k 40 --min-p 0.01 --seed "$S" \
    --stop-at-eos --receipt "$T/solo-ns.txt" > /dev/null 2>&1
cmp -s "$T/ns.receipt" "$T/solo-ns.txt" && pass serve_sampling.server-seed-reproduces \
    || fail serve_sampling.server-seed-reproduces "$(diff "$T/ns.receipt" "$T/solo-ns.txt" | head -4)"
C "$U/v1/verify" --data-binary @"$T/ns.receipt" > "$T/vns.json"
expect_eq serve_sampling.v1-verify "$(jget "$T/vns.json" '[d["verified"], [f["status"] for f in d["fields"] if f["field"] in ("sampler","seed")]]')" \
    '[true, ["match", "match"]]'
# Tampered: the seed, then each parameter; every one a mismatch naming sampler and seed (an
# edited top_k, top_p or min_p may keep the ids: the witness's sampler record catches it).
sed "s/^seed $S\$/seed $((S + 1))/" "$T/ns.receipt" > "$T/t-seed.receipt"
sed 's/^sampler temperature=0.8 /sampler temperature=0.9 /' "$T/ns.receipt" > "$T/t-temp.receipt"
sed 's/^\(sampler .*\) top-k=40 /\1 top-k=41 /' "$T/ns.receipt" > "$T/t-top-k.receipt"
sed 's/^\(sampler .*\) top-p=1 /\1 top-p=0.99 /' "$T/ns.receipt" > "$T/t-top-p.receipt"
sed 's/^\(sampler .*\) min-p=0.01$/\1 min-p=0.02/' "$T/ns.receipt" > "$T/t-min-p.receipt"
for k in seed temp top-k top-p min-p; do
    cmp -s "$T/t-$k.receipt" "$T/ns.receipt" && { fail "serve_sampling.tampered-$k" "sed changed nothing"; continue; }
    C "$U/v1/verify" --data-binary @"$T/t-$k.receipt" > "$T/vt-$k.json"
    expect_eq "serve_sampling.tampered-$k.v1-verify" \
        "$(jget "$T/vt-$k.json" '[d["verified"], [f["status"] for f in d["fields"] if f["field"] in ("sampler","seed")]]')" \
        '[false, ["mismatch", "mismatch"]]'
    "$CIS2" verify "$T/t-$k.receipt" --model "$T/fx" > "$T/vt-$k.out" 2>&1
    rc=$?; grep -q '^MISMATCH seed' "$T/vt-$k.out" && [ $rc -ne 0 ] && pass "serve_sampling.tampered-$k.cis2-verify" \
        || fail "serve_sampling.tampered-$k.cis2-verify" "rc $rc: $(tail -3 "$T/vt-$k.out")"
done

# Streamed: the same text and receipt as the plain response, the seed in every chunk.
C -N "$U/v1/completions" -d '{"model":"fx","prompt":"'"$P"'","max_tokens":8,"temperature":1.5,"top_p":0.95,"seed":7,"stream":true}' > "$T/s7.sse"
python3 - "$T/s7.sse" "$T/s7a.json" > "$T/s7.check" <<'EOF'
import json, sys
ev = [e for e in open(sys.argv[1]).read().split('\n\n') if e and not e.startswith(':')]
assert ev[-1] == 'data: [DONE]', ev[-1]
ch = [json.loads(e[6:]) for e in ev[:-1]]
ref = json.load(open(sys.argv[2]))
assert all(c['seed'] == 7 for c in ch), 'a chunk without the seed'
text = ''.join(c['choices'][0]['text'] for c in ch)
assert text == ref['choices'][0]['text'], (text, ref['choices'][0]['text'])
assert ch[-1]['cis2']['receipt'] == ref['cis2']['receipt'], 'receipt differs'
print('ok')
EOF
expect_eq serve_sampling.stream "$(cat "$T/s7.check" 2>&1 | tail -1)" ok

# n = 3: choice i is the n = 1 completion with seed 7 + i, each with its own receipt.
post '{"model":"fx","prompt":"'"$P"'","max_tokens":8,"temperature":1.5,"top_p":0.95,"seed":7,"n":3}' > "$T/n3.json"
expect_eq serve_sampling.n3.shape "$(jget "$T/n3.json" '[d["seed"], [c["index"] for c in d["choices"]], [c["cis2"]["seed"] for c in d["choices"]], "cis2" in d, d["usage"]["completion_tokens"] == sum(len(c["cis2"]["generated_token_ids"]) for c in d["choices"])]')" \
    '[7, [0, 1, 2], [7, 8, 9], false, true]'
cmp_receipt n3.choice0-is-n1 "$T/n3.json" 'd["choices"][0]["cis2"]["receipt"]' "$T/solo7.txt"
"$CIS2" run --model "$T/fx" --prompt "$P" -n 8 --temperature 1.5 --top-p 0.95 --seed 9 --stop-at-eos \
    --receipt "$T/solo9.txt" > /dev/null 2>&1
cmp_receipt n3.choice2-is-seed-9 "$T/n3.json" 'd["choices"][2]["cis2"]["receipt"]' "$T/solo9.txt"
# Streamed n = 3: each choice's text adds up to the plain response's, each ends with its receipt.
C -N "$U/v1/completions" -d '{"model":"fx","prompt":"'"$P"'","max_tokens":8,"temperature":1.5,"top_p":0.95,"seed":7,"n":3,"stream":true}' > "$T/n3.sse"
python3 - "$T/n3.sse" "$T/n3.json" > "$T/n3.check" <<'EOF'
import json, sys
ev = [e for e in open(sys.argv[1]).read().split('\n\n') if e and not e.startswith(':')]
assert ev[-1] == 'data: [DONE]'
ch = [json.loads(e[6:]) for e in ev[:-1]]
ref = json.load(open(sys.argv[2]))
for i in range(3):
    mine = [c['choices'][0] for c in ch if c['choices'][0]['index'] == i]
    assert ''.join(m['text'] for m in mine) == ref['choices'][i]['text'], i
    assert mine[-1]['finish_reason'] and mine[-1]['cis2']['receipt'] == ref['choices'][i]['cis2']['receipt'], i
assert ch[-1]['usage'] == ref['usage'], (ch[-1].get('usage'), ref['usage'])
print('ok')
EOF
expect_eq serve_sampling.n3.stream "$(cat "$T/n3.check" 2>&1 | tail -1)" ok
# n = 2 greedy: two equal choices, each the v1 receipt.
post '{"model":"fx","prompt":"'"$P"'","max_tokens":4,"n":2}' > "$T/g2.json"
jget "$T/g2.json" 'd["choices"][1]["cis2"]["receipt"]' | head -c -1 > "$T/g2-1.receipt"
jget "$T/g.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/g.receipt"
expect_eq serve_sampling.n2-greedy-equal "$(jget "$T/g2.json" 'd["choices"][0]["text"] == d["choices"][1]["text"] and d["choices"][0]["cis2"]["receipt"] == d["choices"][1]["cis2"]["receipt"]')" true
cmp_receipt n2-greedy-is-v1 "$T/g2.json" 'd["choices"][0]["cis2"]["receipt"]' "$T/g.receipt"

# logprobs: completions' legacy shape; the values are §9's bits as tools/sample_reference.py
# computes them from cis2 trace's logits (and a binary64 log-softmax agrees to 1e-5).
post '{"model":"fx","prompt":"'"$P"'","max_tokens":6,"temperature":1.5,"seed":7,"logprobs":3}' > "$T/lp.json"
PY=""
for c in ${CIS2_PYTHON:-} /usr/bin/python3 python3; do
    p=$(command -v "$c" 2>/dev/null) || continue
    "$p" -c 'import numpy' 2>/dev/null && { PY="$p"; break; }
done
if [ -z "$PY" ]; then skip serve_sampling.logprobs-reference "no python3 with numpy"
else
    pids=$(jget "$T/lp.json" '",".join(map(str, d["cis2"]["prompt_token_ids"]))')
    gids=$(jget "$T/lp.json" '",".join(map(str, d["cis2"]["generated_token_ids"]))')
    "$CIS2" trace --model "$T/fx" --prompt-ids "$pids" --teacher-force "$(printf '%s' "$gids" | cut -d, -f1-5)" \
        --nodes logits -o "$T/lp.st" > /dev/null 2>"$T/lp.err"
    "$PY" tools/sample_reference.py "$T/lp.st" --n-prompt "$(printf '%s' "$pids" | tr ',' '\n' | grep -c .)" \
        --logprobs 3 --ids "$gids" > "$T/lp.ref" 2>&1
    "$PY" - "$T/lp.json" "$T/lp.ref" "$T/lp.st" "$pids" > "$T/lp.check" 2>&1 <<'EOF'
import json, struct, sys
import numpy as np
sys.path.insert(0, 'tools')
from sample_reference import read_trace
d = json.load(open(sys.argv[1])); lp = d['choices'][0]['logprobs']
ref = [json.loads(l) for l in open(sys.argv[2])]
bits = lambda v: '%08x' % struct.unpack('<I', struct.pack('<f', np.float32(v)))[0]
n = len(d['cis2']['generated_token_ids'])
assert len(lp['tokens']) == len(lp['token_logprobs']) == len(lp['top_logprobs']) == len(lp['text_offset']) == n
assert [bits(v) for v in lp['token_logprobs']] == [r[0] for r in ref], 'chosen logprobs differ from the reference'
for i, r in enumerate(ref):  # the dict's values: the reference's top 3, less any repeated text
    got = sorted((bits(v) for v in lp['top_logprobs'][i].values()))
    want = sorted(b for _, b in r[1])
    assert set(got) <= set(want) and len(got) >= 1 and bits(max(lp['top_logprobs'][i].values())) == r[1][0][1], (i, got, want)
t = read_trace(sys.argv[3]); n_p = len(sys.argv[4].split(','))
for i, g in enumerate(d['cis2']['generated_token_ids']):
    l = t['p%d.logits' % (n_p - 1 + i)].astype(np.float64)
    ls = l - l.max() - np.log(np.exp(l - l.max()).sum())
    assert abs(ls[g] - lp['token_logprobs'][i]) < 1e-5, (i, ls[g], lp['token_logprobs'][i])
assert lp['text_offset'][0] == 0 and lp['text_offset'] == sorted(lp['text_offset'])
print('ok')
EOF
    expect_eq serve_sampling.logprobs-reference "$(tail -1 "$T/lp.check")" ok
fi
# The same numbers greedy or sampled (raw logits): greedy run's first token's logprob equals
# a sampled run's when both picked the same first id is not guaranteed, so check the
# streamed form instead: its chunks' logprobs add up to the plain response's.
C -N "$U/v1/completions" -d '{"model":"fx","prompt":"'"$P"'","max_tokens":6,"temperature":1.5,"seed":7,"logprobs":3,"stream":true}' > "$T/lp.sse"
python3 - "$T/lp.sse" "$T/lp.json" > "$T/lps.check" 2>&1 <<'EOF'
import json, sys
ev = [e for e in open(sys.argv[1]).read().split('\n\n') if e and not e.startswith(':')]
ch = [json.loads(e[6:]) for e in ev[:-1]]
ref = json.load(open(sys.argv[2]))['choices'][0]['logprobs']
got = {k: [] for k in ref}
for c in ch:
    l = c['choices'][0]['logprobs']
    if l:
        for k in got: got[k] += l[k]
assert got == ref, (got, ref)
print('ok')
EOF
expect_eq serve_sampling.logprobs-stream "$(tail -1 "$T/lps.check")" ok

# The same bits on every backend, ISA and thread count: the sampled ids, receipt and
# log-probabilities of the request above from a ref server and from each ISA's fast one.
LPB='{"model":"fx","prompt":"'"$P"'","max_tokens":6,"temperature":1.5,"seed":7,"logprobs":3}'
for cfg in ref $(host_isas); do
    if [ "$cfg" = ref ]; then start "be-$cfg" --model "$T/fx" --backend ref || continue
    else start "be-$cfg" --model "$T/fx" --backend fast --isa "$cfg" --threads 3 || continue; fi
    C "http://127.0.0.1:$PORT/v1/completions" -d "$LPB" > "$T/be-$cfg.json"
    kill "$SPID"; wait "$SPID" 2>/dev/null
    a=$(jget "$T/be-$cfg.json" '[d["choices"][0]["logprobs"]["token_logprobs"], d["cis2"]["receipt"]]')
    b=$(jget "$T/lp.json" '[d["choices"][0]["logprobs"], d["cis2"]["receipt"]]')
    [ -n "$a" ] && [ "$(jget "$T/be-$cfg.json" '[d["choices"][0]["logprobs"], d["cis2"]["receipt"]]')" = "$b" ] \
        && pass "serve_sampling.same-bits.$cfg" || fail "serve_sampling.same-bits.$cfg" "$(head -c 300 "$T/be-$cfg.json")"
done

# Malformed: 400s naming the parameter.
bad() { # bad NAME PARAM BODY
    local code; code=$(C -o "$T/bad.json" -w '%{http_code}' "$U/v1/completions" --data-binary "$3")
    expect_eq "serve_sampling.bad.$1" "$code $(jget "$T/bad.json" 'd["error"]["param"]' 2>&1)" "400 $2"
}
bad temperature-negative temperature '{"model":"fx","prompt":"a","temperature":-0.5}'
bad top-p-above-1 top_p '{"model":"fx","prompt":"a","temperature":1,"top_p":1.5}'
bad min-p-greedy min_p '{"model":"fx","prompt":"a","min_p":0.2}'
bad top-k-greedy top_k '{"model":"fx","prompt":"a","top_k":3}'
bad seed-negative seed '{"model":"fx","prompt":"a","temperature":1,"seed":-3}'
bad seed-beyond-u64 seed '{"model":"fx","prompt":"a","temperature":1,"seed":18446744073709551616}'
bad n-0 n '{"model":"fx","prompt":"a","n":0}'
bad n-17 n '{"model":"fx","prompt":"a","n":17}'
bad logprobs-21 logprobs '{"model":"fx","prompt":"a","logprobs":21}'
bad penalty presence_penalty '{"model":"fx","prompt":"a","temperature":1,"presence_penalty":0.5}'
expect_eq serve_sampling.bad.message "$(jget "$T/bad.json" 'd["error"]["message"]')" \
    "presence_penalty: only 0 is supported (docs/sampling.md has no penalties)"

# The official OpenAI client library (tests/serve: npm ci there, as .ci/run does).
if ! command -v node >/dev/null; then skip serve_sampling.openai "node is not installed"
elif [ ! -f tests/serve/node_modules/openai/package.json ]; then
    skip serve_sampling.openai "npm package openai not installed (cd tests/serve && npm ci)"
else
    node tests/serve/openai_sampling.mjs "$U" fx "$P" 8 7 "$T/solo7.txt" 2>&1 \
        || fail serve_sampling.openai.run "exit status $?"
fi
