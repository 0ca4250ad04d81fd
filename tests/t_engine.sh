#!/usr/bin/env bash
# CLI tests for the engine: pinned fixture vectors, receipts and
# verify, KV-cache vs recompute, determinism, and every bad-input path.
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/engine"; rm -rf "$T"; mkdir -p "$T"
MK="python3 tools/make_model.py"

# --- fixtures pinned in tests/fixtures/*.vector (our code, cross-checked with cis2_oracle.py)
for v in tests/fixtures/*.vector; do
    name=$(basename "$v" .vector)
    args=$(sed -n 's/^#   python3 tools\/make_model.py DIR //p' "$v")
    $MK "$T/$name" $args >/dev/null
    out=$("$CIS2" conform --model "$T/$name" --vector "$v" 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ "$(echo "$out" | grep -c '^PASS')" -eq 9 ] && ! echo "$out" | grep -q '^FAIL'; then
        pass "conform.fixture.$name"
    else fail "conform.fixture.$name" "rc=$rc $(echo "$out" | grep FAIL | head -3)"; fi
done
M="$T/llama"; V=tests/fixtures/llama.vector

# conform must fail loudly on a hash mismatch, before any forward pass
sed 's/^cis2_ref=.*/cis2_ref=0000000000000000000000000000000000000000000000000000000000000000/' "$V" > "$T/bad-ref.vector"
out=$("$CIS2" conform --model "$M" --vector "$T/bad-ref.vector"); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q '^FAIL CIS2_REF' && echo "$out" | grep -q '^conform: FAIL' && pass conform.detects-wrong-digest || fail conform.detects-wrong-digest "rc=$rc"
sed 's/^config_sha256=./config_sha256=0/' "$V" > "$T/bad-sha.vector"
out=$("$CIS2" conform --model "$M" --vector "$T/bad-sha.vector"); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q 'refusing to run the model' && ! echo "$out" | grep -q 'generated_token_ids' \
    && pass conform.hash-mismatch-stops-before-forward || fail conform.hash-mismatch-stops-before-forward "rc=$rc: $out"
# real SmolLM2-135M §13.1: only where the weights exist
if d=$(find_real_model model.safetensors); then
    out=$("$CIS2" conform --model "$d"); rc=$?
    [ $rc -eq 0 ] && pass conform.smollm2-spec-13.1 || fail conform.smollm2-spec-13.1 "$(echo "$out" | grep FAIL)"
else skip conform.smollm2-spec-13.1 "SmolLM2-135M model.safetensors not found (CIS2_SMOLLM2_DIR, models/, ../shared/models/); run tools/fetch-smollm2.sh"; fi
# the real artifacts we do have: their sha256 must be the §2.1 pins
if d=$(find_real_model config.json); then
    expect_eq real.config.sha256 "$(sha256sum "$d/config.json" | cut -c1-64)" 1d556eab73b69c7f11f64c557a2f9c6f440bd4c6b89bb2584a6b498c92603843
    expect_eq real.tokenizer.sha256 "$(sha256sum "$d/tokenizer.json" | cut -c1-64)" 9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c
else skip real.config.sha256 "SmolLM2 config.json not found"; fi

# --- run output shape
out=$("$CIS2" run --model "$M" --prompt-ids 5,17,42,7,99 -n 6 --receipt "$T/r.txt")
keys=$(echo "$out" | sed 's/[= ].*//' | tr '\n' ' ')
expect_eq run.output-lines "$keys" "prompt_token_ids generated_token_ids text table_digest inv_freq_table_digest argmax_digest CIS2_REF "
echo "$out" | grep -qx "CIS2_REF digest=$(sed -n 's/^cis2_ref=//p' $V) prompt_idx=0 prompt_toks=5 gen_toks=6 dtype=fp32" \
    && pass run.cis2_ref-line || fail run.cis2_ref-line "$out"
# a second OS process gives the same bits (§13.2 b)
out2=$("$CIS2" run --model "$M" --prompt-ids 5,17,42,7,99 -n 6)
expect_eq run.cross-process-identical "$(echo "$out2" | tail -1)" "$(echo "$out" | tail -1)"
"$CIS2" run --model "$M" --prompt-ids 5,17,42,7,99 -n 6 --check-determinism | grep -qx 'determinism=PASS' \
    && pass run.check-determinism || fail run.check-determinism ""
# -n 1 uses only prefill logits; longer runs extend the same prefix of token ids
g1=$("$CIS2" run --model "$M" --prompt-ids 5,17,42,7,99 -n 1 | sed -n 's/^generated_token_ids=//p')
g6=$(echo "$out" | sed -n 's/^generated_token_ids=//p')
expect_eq run.n1-prefix "$g1" "${g6%%,*}"

# --- receipts and verify
head -1 "$T/r.txt" | grep -qx 'CIS-2-RECEIPT v1' && [ "$(wc -l < "$T/r.txt")" -eq 14 ] && pass receipt.written || fail receipt.written "$(cat "$T/r.txt")"
ls "$T" | grep -q '\.tmp\.' && fail receipt.no-temp-left "temp file left behind" || pass receipt.no-temp-left
out=$("$CIS2" verify "$T/r.txt" --model "$M"); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q '^receipt verified' && pass verify.good-receipt || fail verify.good-receipt "rc=$rc $out"
for field in weights-sha256 config-sha256 tokenizer-sha256 table-digest inv-freq-table-digest argmax-digest witness-digest; do
    awk -v f="$field" '$1 == f { c = substr($2, 64, 1); $2 = substr($2, 1, 63) (c == "0" ? "1" : "0") } { print }' "$T/r.txt" > "$T/bad-$field.txt"
    out=$("$CIS2" verify "$T/bad-$field.txt" --model "$M"); rc=$?
    nbad=$(echo "$out" | grep -c '^MISMATCH')
    [ $rc -eq 1 ] && echo "$out" | grep -q "^MISMATCH $field:" && [ "$nbad" -eq 1 ] && pass "verify.names.$field" || fail "verify.names.$field" "rc=$rc $out"
done
sed 's/^generated-token-ids \([0-9]*\)/generated-token-ids 1\1/' "$T/r.txt" > "$T/bad-gen.txt"
out=$("$CIS2" verify "$T/bad-gen.txt" --model "$M"); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q '^MISMATCH generated-token-ids' && pass verify.names.generated-token-ids || fail verify.names.generated-token-ids "$out"
# a different model dir: artifact hashes are named first
out=$("$CIS2" verify "$T/r.txt" --model "$T/qwen2"); rc=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | head -1)" == "$(echo "$out" | grep -m1 MISMATCH)" ] && echo "$out" | head -1 | grep -q weights-sha256 \
    && pass verify.artifact-hashes-first || fail verify.artifact-hashes-first "$out"
sed '3d' "$T/r.txt" > "$T/missing.txt"
expect_err verify.rejects-malformed-receipt "out of order" "$CIS2" verify "$T/missing.txt" --model "$M"
expect_err verify.rejects-missing-receipt "cannot open" "$CIS2" verify "$T/nope.txt" --model "$M"

# --- §3.5: the KV cache equals recomputing from scratch. With greedy ids g,
# running prompt+g[0..k) with -n 1 must give g[k] and the same step logits,
# checked through the witness of a 1-step run on the extended prompt.
ids=5,17,42,7,99; ok=1
IFS=, read -ra G <<< "$g6"
for k in 1 2 3 4 5; do
    pre="$ids"; for ((j=0;j<k;j++)); do pre="$pre,${G[$j]}"; done
    gk=$("$CIS2" run --model "$M" --prompt-ids "$pre" -n 1 | sed -n 's/^generated_token_ids=//p')
    [ "$gk" == "${G[$k]}" ] || ok=0
done
[ $ok -eq 1 ] && pass kv-cache.equals-recompute-ids || fail kv-cache.equals-recompute-ids "ids differ"

# --- bad inputs: one clear line, non-zero exit, never a crash
expect_err bad.no-model "--model DIR is required" "$CIS2" run --prompt-ids 1
expect_err bad.model-dir-missing "cannot open" "$CIS2" run --model "$T/none" --prompt-ids 1
expect_err bad.unknown-flag "unknown option '--frobnicate'" "$CIS2" run --model "$M" --prompt-ids 1 --frobnicate 3
expect_err bad.n-zero "-n must be an integer" "$CIS2" run --model "$M" --prompt-ids 1 -n 0
expect_err bad.n-text "-n must be an integer" "$CIS2" run --model "$M" --prompt-ids 1 -n abc
expect_err bad.n-absurd "-n must be an integer" "$CIS2" run --model "$M" --prompt-ids 1 -n 99999999999
expect_err bad.n-beyond-max-pos "max_position_embeddings" "$CIS2" run --model "$M" --prompt-ids 1 -n 9000
expect_err bad.both-prompts "exactly one of" "$CIS2" run --model "$M" --prompt-ids 1 --prompt hi
expect_err bad.missing-value "needs a value" "$CIS2" run --model "$M" --prompt-ids
expect_err bad.id-ge-vocab "outside the vocabulary" "$CIS2" run --model "$M" --prompt-ids 1,320
expect_err bad.ids-malformed "bad token id list" "$CIS2" run --model "$M" --prompt-ids "1, 2"
expect_err bad.backend "--backend must be ref or fast" "$CIS2" run --model "$M" --prompt-ids 1 --backend gpu
expect_err bad.receipt-unwritable "cannot write" "$CIS2" run --model "$M" --prompt-ids 1 -n 1 --receipt "$T/no/such/dir/r.txt"
expect_err bad.unknown-command "unknown command" "$CIS2" frobnicate

cpm() { rm -rf "$T/$1"; cp -r "$M" "$T/$1"; }
cpm trunc; head -c 5000 "$M/model.safetensors" > "$T/trunc/model.safetensors"
expect_err bad.truncated-safetensors "past the end" "$CIS2" run --model "$T/trunc" --prompt-ids 1
cpm tiny; head -c 4 "$M/model.safetensors" > "$T/tiny/model.safetensors"
expect_err bad.tiny-safetensors "truncated" "$CIS2" run --model "$T/tiny" --prompt-ids 1
cpm hdrlen; python3 - "$T/hdrlen/model.safetensors" <<'PY'
import sys, struct
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[0:8] = struct.pack('<Q', len(b) * 2); open(p, 'wb').write(b)
PY
expect_err bad.header-len-beyond-file "header length" "$CIS2" run --model "$T/hdrlen" --prompt-ids 1
# edit the header JSON in place (same length) to make specific lies
hdr_edit() { python3 - "$1" "$2" "$3" <<'PY'
import sys, struct
p, a, b = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
d = bytearray(open(p, 'rb').read()); n = struct.unpack('<Q', d[:8])[0]
h = bytes(d[8:8 + n]); assert a in h, a; h = h.replace(a, b, 1)
h = h + b' ' * (n - len(h)) if len(h) <= n else None
d[8:8 + n] = h; open(p, 'wb').write(d)
PY
}
cpm dtype; hdr_edit "$T/dtype/model.safetensors" '"dtype":"BF16"' '"dtype":"I16" ' 
expect_err bad.unknown-dtype "unsupported dtype \"I16\"" "$CIS2" run --model "$T/dtype" --prompt-ids 1
cpm rename; hdr_edit "$T/rename/model.safetensors" 'model.norm.weight' 'model.norx.weight'
expect_err bad.missing-tensor "missing tensor \"model.norm.weight\"" "$CIS2" run --model "$T/rename" --prompt-ids 1
cpm shape; sed -i 's/"intermediate_size": 100/"intermediate_size": 96/' "$T/shape/config.json"
expect_err bad.shape-vs-config "but config.json implies" "$CIS2" run --model "$T/shape" --prompt-ids 1
cpm badjson; echo '{"model_type": "llama",' > "$T/badjson/config.json"
expect_err bad.config-json "invalid JSON" "$CIS2" run --model "$T/badjson" --prompt-ids 1
cpm notok; rm "$T/notok/tokenizer.json"
expect_err bad.no-tokenizer "tokenizer.json: cannot open" "$CIS2" run --model "$T/notok" --prompt-ids 1
cpm tiedlm; cp "$T/untied-f32/model.safetensors" "$T/tiedlm/"; cp "$T/untied-f32/config.json" "$T/tiedlm/"
sed -i 's/"tie_word_embeddings": false/"tie_word_embeddings": true/' "$T/tiedlm/config.json"
# §11.1 as Hugging Face reads it: the embedding is the head, one warning line (t_model.sh head.*)
out=$("$CIS2" run --model "$T/tiedlm" --prompt-ids 1 2>&1 >/dev/null); rc=$?
[ $rc -eq 0 ] && [ "$(echo "$out" | grep -c .)" -eq 1 ] && echo "$out" | grep -q '"lm_head.weight" is ignored' \
    && pass run.tied-with-lm-head-warns || fail run.tied-with-lm-head-warns "rc=$rc $out"
cpm nan; python3 - "$T/nan/model.safetensors" <<'PY'
import sys, struct, json
p = sys.argv[1]; d = bytearray(open(p, 'rb').read()); n = struct.unpack('<Q', d[:8])[0]
h = json.loads(d[8:8 + n]); a = h['model.norm.weight']['data_offsets'][0]
d[8 + n + a: 8 + n + a + 2] = struct.pack('<H', 0x7FC0); open(p, 'wb').write(d)
PY
expect_err bad.nan-norm-weight "holds NaN or Inf" "$CIS2" run --model "$T/nan" --prompt-ids 1

# --- selftest
out=$("$CIS2" selftest); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -qx 'table_digest=23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d' \
    && echo "$out" | grep -qx 'inv_freq_table_digest=da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12' \
    && [ "$(echo "$out" | grep -c '^PASS fpenv 0x')" -eq 6 ] && pass selftest.cli || fail selftest.cli "rc=$rc"
expect_err selftest.rejects-args "takes no arguments" "$CIS2" selftest extra

# --- --stop-at-eos is opt-in: with eos_token_id set to the first generated id it stops there
cpm eos; first=${g6%%,*}; sed -i "s/\"eos_token_id\": 0/\"eos_token_id\": $first/" "$T/eos/config.json"
out=$("$CIS2" run --model "$T/eos" --prompt-ids 5,17,42,7,99 -n 6 --stop-at-eos --receipt "$T/eos.txt")
echo "$out" | grep -qx "generated_token_ids=$first" && echo "$out" | grep -qx 'stop_at_eos=1 stopped=1' \
    && echo "$out" | grep -q 'gen_toks=1 dtype=fp32' && pass run.stop-at-eos || fail run.stop-at-eos "$out"
"$CIS2" verify "$T/eos.txt" --model "$T/eos" >/dev/null && pass run.stop-at-eos-receipt-verifies || fail run.stop-at-eos-receipt-verifies ""
n6=$("$CIS2" run --model "$T/eos" --prompt-ids 5,17,42,7,99 -n 6 | sed -n 's/^generated_token_ids=//p')
expect_eq run.eos-ignored-by-default "$n6" "$g6"

# --- --prompt goes through the tokenizer; the receipt carries the raw bytes
out=$("$CIS2" run --model "$M" --prompt "Once upon a time" -n 4 --receipt "$T/rp.txt"); rc=$?
want=$("$CIS2" tokenize --model "$M" "Once upon a time")
# (these 4 ids end inside a UTF-8 sequence: text_error= says so instead of inventing characters)
echo "$out" | grep -qx "prompt_token_ids=$want" && echo "$out" | grep -q '^text_error=.*not valid UTF-8' && pass run.prompt-text || fail run.prompt-text "rc=$rc $out"
g76=$("$CIS2" run --model "$M" --prompt-ids 5,17,42,7,99 -n 2 | sed -n 's/^text=//p')
expect_eq run.text-json-escaped "$g76" "\"$("$CIS2" detokenize --model "$M" 76,76 | sed 's/\\/\\\\/g;s/"/\\"/g')\""
expect_eq receipt.prompt-hex "$(sed -n 's/^prompt-hex //p' "$T/rp.txt")" "$(printf 'Once upon a time' | od -An -tx1 | tr -d ' \n')"
"$CIS2" verify "$T/rp.txt" --model "$M" | grep -q '^MATCH prompt-hex' && pass verify.prompt-hex || fail verify.prompt-hex ""
sed "s/^prompt-hex .*/prompt-hex $(printf 'Once upon a tim' | od -An -tx1 | tr -d ' \n')/" "$T/rp.txt" > "$T/rp-bad.txt"
"$CIS2" verify "$T/rp-bad.txt" --model "$M" | grep -q '^MISMATCH prompt-hex' && pass verify.prompt-hex-mismatch || fail verify.prompt-hex-mismatch ""
expect_err bad.prompt-not-utf8 "UTF-8" "$CIS2" run --model "$M" --prompt "$(printf 'ab\xffcd')"

# --- receipts every peer parses: prompt-hex is the bytes the prompt ids decode to
# (byte-level BPE decoding is total), never empty; verify checks the relation
hexof() { od -An -tx1 | tr -d ' \n'; }
"$CIS2" run --model "$M" --prompt-ids 150,200 -n 2 --receipt "$T/r-raw.txt" >/dev/null 2>&1
expect_eq receipt.prompt-hex-raw-bytes-not-utf8 "$(sed -n 's/^prompt-hex //p' "$T/r-raw.txt")" \
    "$(printf '\x85\xb7' | hexof)"
out=$("$CIS2" verify "$T/r-raw.txt" --model "$M"); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q '^MATCH prompt-hex' && pass verify.prompt-hex-raw-bytes || fail verify.prompt-hex-raw-bytes "rc=$rc $out"
"$CIS2" run --model "$M" --prompt-ids 0,5 -n 1 --receipt "$T/r-special.txt" >/dev/null 2>&1
expect_eq receipt.prompt-hex-special-token-content "$(sed -n 's/^prompt-hex //p' "$T/r-special.txt")" \
    "$(printf '<|endoftext|>%s' "$("$CIS2" detokenize --model "$M" 5)" | hexof)"
# an id the model has but tokenizer.json names no token for adds no bytes (HF's decode
# skips it); a prompt of only such ids has no prompt-hex, so no receipt
$MK "$T/v600" --layers 1 --vocab 600 >/dev/null   # tokenizer.json has 499 tokens
"$CIS2" run --model "$T/v600" --prompt-ids 150,599,200 -n 1 --receipt "$T/r-pad.txt" >/dev/null 2>&1
expect_eq receipt.prompt-hex-skips-ids-without-a-token "$(sed -n 's/^prompt-hex //p' "$T/r-pad.txt")" 85b7
"$CIS2" verify "$T/r-pad.txt" --model "$T/v600" | grep -q '^MATCH prompt-hex' && pass verify.prompt-hex-skips-ids-without-a-token \
    || fail verify.prompt-hex-skips-ids-without-a-token "$(cat "$T/r-pad.txt")"
expect_err run.receipt-refused-without-prompt-bytes "prompt-hex may not be empty" "$CIS2" run --model "$T/v600" --prompt-ids 599 -n 1 --receipt "$T/r-none.txt"
sed 's/^prompt-hex .*/prompt-hex /' "$T/r-raw.txt" > "$T/r-empty.txt"
out=$("$CIS2" verify "$T/r-empty.txt" --model "$M"); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q '^MISMATCH prompt-hex: receipt (empty)' && pass verify.empty-prompt-hex-is-a-mismatch \
    || fail verify.empty-prompt-hex-is-a-mismatch "rc=$rc $out"
# no receipt a run writes has a key without a value (a peer's strict parser refuses one)
bad=""
for f in r.txt rp.txt eos.txt r-raw.txt r-special.txt; do
    [ -s "$T/$f" ] && awk 'NR > 1 && (NF != 2 || $2 == "") { bad = 1 } END { exit bad }' "$T/$f" || bad="$bad $f"
done
expect_eq receipt.no-empty-values "$bad" ""
# The receipt as a published peer renders it (its render(): "CIS-2-RECEIPT v1",
# the 13 keys in order, "key value\n", lowercase hex, ids comma-separated),
# rebuilt here from the run's own output lines, not from our receipt file: the
# bytes must be ours, and our parser and verify must take it.
out=$("$CIS2" run --model "$M" --prompt-ids 150,200,17 -n 3 --receipt "$T/r-ours.txt")
python3 - "$M" "$T/r-peer.txt" "$out" <<'PY'
import hashlib, sys
m, dst, out = sys.argv[1], sys.argv[2], sys.argv[3]
kv = dict(l.split('=', 1) for l in out.splitlines() if '=' in l and not l.startswith('CIS2_REF'))
ref = [w.split('=', 1)[1] for w in out.splitlines()[-1].split() if w.startswith('digest=')][0]
sha = lambda f: hashlib.sha256(open(m + '/' + f, 'rb').read()).hexdigest()
pids = kv['prompt_token_ids']; gids = kv['generated_token_ids']
# the prompt's bytes: byte-level BPE decoding of ids 150, 200 (0x85, 0xb7) and 17 (from tokenizer.json)
import json
tok = json.load(open(m + '/tokenizer.json'))
inv = {v: k for k, v in tok['model']['vocab'].items()}
bs = list(range(ord('!'), ord('~') + 1)) + list(range(ord('¡'), ord('¬') + 1)) + list(range(ord('®'), ord('ÿ') + 1))
cs = bs[:]; n = 0
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256 + n); n += 1
dec = {chr(c): b for b, c in zip(bs, cs)}
prompt = b''.join(bytes(dec[ch] for ch in inv[int(i)]) for i in pids.split(','))
lines = ['CIS-2-RECEIPT v1', 'spec-version 0.3b', 'weights-sha256 ' + sha('model.safetensors'),
         'config-sha256 ' + sha('config.json'), 'tokenizer-sha256 ' + sha('tokenizer.json'),
         'prompt-hex ' + prompt.hex(), 'prompt-token-ids ' + pids, 'gen-toks %d' % len(gids.split(',')),
         'dtype fp32', 'table-digest ' + kv['table_digest'], 'inv-freq-table-digest ' + kv['inv_freq_table_digest'],
         'generated-token-ids ' + gids, 'argmax-digest ' + kv['argmax_digest'], 'witness-digest ' + ref]
open(dst, 'w').write('\n'.join(lines) + '\n')
PY
cmp -s "$T/r-peer.txt" "$T/r-ours.txt" && pass receipt.byte-identical-to-peer-rendering || fail receipt.byte-identical-to-peer-rendering "$(diff "$T/r-peer.txt" "$T/r-ours.txt")"
"$CIS2" verify "$T/r-peer.txt" --model "$M" >/dev/null && pass verify.peer-rendered-receipt || fail verify.peer-rendered-receipt ""
out=$("$CIS2" verify - --model "$M" < "$T/r-peer.txt"); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q '^receipt verified' && pass verify.receipt-on-stdin || fail verify.receipt-on-stdin "rc=$rc $out"
# ids outside the model's vocabulary: a MISMATCH (exit 1), not an input error
sed 's/^prompt-token-ids .*/prompt-token-ids 150,999/' "$T/r-raw.txt" > "$T/r-oov.txt"
out=$("$CIS2" verify "$T/r-oov.txt" --model "$M" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q '^MISMATCH token-ids-in-vocabulary' && pass verify.ids-outside-vocab-exit-1 \
    || fail verify.ids-outside-vocab-exit-1 "rc=$rc $out"
# a field that cannot be checked here (prompt-hex, with a tokenizer.json the library
# refuses) is SKIP, and the last line names it instead of "all fields match" (it
# said so even for a doctored prompt-hex). The receipt is a peer's: our run
# refuses --receipt for such a tokenizer.
rm -rf "$T/skiptok"; cp -r "$M" "$T/skiptok"
python3 - "$T/skiptok/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); t["added_tokens"][0]["lstrip"] = True; json.dump(t, open(sys.argv[1], "w"))
PY
wit=$("$CIS2" run --model "$T/skiptok" --prompt-ids 150,200,17 -n 3 | sed -n 's/^CIS2_REF digest=\([0-9a-f]*\).*/\1/p')
sed -e "s/^tokenizer-sha256 .*/tokenizer-sha256 $(sha256sum "$T/skiptok/tokenizer.json" | cut -d' ' -f1)/" \
    -e "s/^witness-digest .*/witness-digest $wit/" -e 's/^prompt-hex .*/prompt-hex 6869/' "$T/r-peer.txt" > "$T/r-skip.txt"
out=$("$CIS2" verify "$T/r-skip.txt" --model "$T/skiptok" 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q '^SKIP prompt-hex: ' && echo "$out" | grep -q '^MATCH witness-digest' \
    && [ "$(echo "$out" | tail -1)" == "receipt verified: every field checked matches; not checked here: prompt-hex" ] \
    && pass verify.skipped-field-named-in-last-line || fail verify.skipped-field-named-in-last-line "rc=$rc $out"

# --- §12.4 as written: both runs compared before any result line; a mismatch
# prints only the failure (CIS2_TEST_HOOK=det-mismatch perturbs the second run)
out=$(CIS2_TEST_HOOK=det-mismatch "$CIS2" conform --model "$M" --vector "$V" 2>&1); rc=$?
[ $rc -eq 1 ] && [ "$out" == "FAIL determinism: determinism check failed: two runs in one process differ in their witness digest (§12.4)
conform: FAIL" ] && pass conform.determinism-failure-prints-only-the-failure || fail conform.determinism-failure-prints-only-the-failure "rc=$rc $out"
out=$(CIS2_TEST_HOOK=det-mismatch "$CIS2" run --model "$M" --prompt-ids 5,17 -n 2 --check-determinism 2>"$T/det.err"); rc=$?
[ $rc -eq 1 ] && [ -z "$out" ] && [ "$(wc -l < "$T/det.err")" -eq 1 ] && grep -q '(§12.4)' "$T/det.err" \
    && pass run.determinism-failure-prints-only-the-failure || fail run.determinism-failure-prints-only-the-failure "rc=$rc out='$out' $(cat "$T/det.err")"
out=$("$CIS2" conform --model "$M" --vector "$V" 2>&1)
[ "$(echo "$out" | grep -n '^PASS determinism' | cut -d: -f1)" -lt "$(echo "$out" | grep -n '^CIS2_REF' | cut -d: -f1)" ] \
    && pass conform.determinism-reported-with-the-results || fail conform.determinism-reported-with-the-results "$out"

# --- CRLF vectors: the same PASS lines as LF, never a FAIL whose values print alike
sed 's/$/\r/' "$V" > "$T/crlf.vector"
out=$("$CIS2" conform --model "$M" --vector "$T/crlf.vector" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(echo "$out" | grep -c '^PASS')" -eq 9 ] && pass conform.crlf-vector || fail conform.crlf-vector "rc=$rc $(echo "$out" | grep FAIL)"
sed 's/^cis2_ref=.*/cis2_ref=D82743059D1DB929E710236FE4EC37F89E6F932524801345A006980F7C3CC9DF/' "$V" > "$T/upper.vector"
expect_err conform.vector-hash-must-be-lowercase-hex "cis2_ref must be 64 lowercase hex digits" "$CIS2" conform --model "$M" --vector "$T/upper.vector"

# --- NaN logits: the witness is not portable, and run/verify/conform say so in one line.
# Fixture: make_nan_logit_model (tests/lib.sh), logit 7 NaN at every step.
make_nan_logit_model "$T/nanlogit"
NAN_NOTE="the logits of step 0 hold a NaN (first at index 7): NaN bit patterns differ by ISA, so this witness is not portable"
out=$("$CIS2" run --model "$T/nanlogit" --prompt-ids 5,17 -n 3 --receipt "$T/nan.txt" 2>"$T/nan.err"); rc=$?
[ $rc -eq 0 ] && [ "$(cat "$T/nan.err")" == "cis2 run: note: $NAN_NOTE (docs/conformance.md)" ] && echo "$out" | grep -q '^CIS2_REF' \
    && pass run.nan-logit-note || fail run.nan-logit-note "rc=$rc $(cat "$T/nan.err")"
out=$("$CIS2" run --model "$M" --prompt-ids 5,17 -n 3 2>&1 >/dev/null)
expect_eq run.no-nan-no-note "$out" ""
out=$("$CIS2" verify "$T/nan.txt" --model "$T/nanlogit" 2>"$T/nanv.err"); rc=$?
[ $rc -eq 0 ] && [ "$(cat "$T/nanv.err")" == "cis2 verify: note: $NAN_NOTE (docs/conformance.md)" ] \
    && pass verify.nan-logit-note || fail verify.nan-logit-note "rc=$rc $(cat "$T/nanv.err") $out"
{ for k in weights-sha256:weights_sha256 config-sha256:config_sha256 tokenizer-sha256:tokenizer_sha256 \
           prompt-token-ids:prompt_token_ids gen-toks:gen_toks generated-token-ids:generated_token_ids \
           table-digest:table_digest inv-freq-table-digest:inv_freq_table_digest argmax-digest:argmax_digest \
           witness-digest:cis2_ref; do
      printf '%s=%s\n' "${k#*:}" "$(sed -n "s/^${k%%:*} //p" "$T/nan.txt")"; done; } > "$T/nan.vector"
out=$("$CIS2" conform --model "$T/nanlogit" --vector "$T/nan.vector" 2>"$T/nanc.err"); rc=$?
[ $rc -eq 0 ] && [ "$(cat "$T/nanc.err")" == "cis2 conform: note: $NAN_NOTE (docs/conformance.md)" ] \
    && pass conform.nan-logit-note || fail conform.nan-logit-note "rc=$rc $(cat "$T/nanc.err") $(echo "$out" | grep FAIL)"

# --threads with --backend ref: the reference backend runs on one thread, so
# the flag is accepted (Slurm scripts always pass it) and changes nothing,
# and cis2 help says so (README: run).
a=$("$CIS2" run --model "$M" --prompt-ids 5,17 -n 3 --backend ref 2>&1); ra=$?
b=$("$CIS2" run --model "$M" --prompt-ids 5,17 -n 3 --backend ref --threads 3 2>&1); rb=$?
[ $ra -eq 0 ] && [ $rb -eq 0 ] && [ "$a" == "$b" ] && pass run.ref-threads-accepted-no-effect \
    || fail run.ref-threads-accepted-no-effect "rc=$ra/$rb: $b"
"$CIS2" help | grep -q 'reference backend runs on one thread (--threads is accepted and has no effect there)' \
    && pass help.ref-threads-documented || fail help.ref-threads-documented "cis2 help does not say --threads has no effect with --backend ref"

# cis2 help lists the dispatcher's command table (src/cli/main.c, COMMANDS), one line each,
# and those are exactly the commands the usage lines describe.
cmds=$("$CIS2" help | sed -n '/^commands:$/,/^[^ ]/{s/^  \([a-z-]*\)  *[^ ].*/\1/p}')
usage_cmds=$("$CIS2" help | sed -n 's/^  cis2 \([a-z-]*\).*/\1/p' | sort -u)
[ "$(echo "$cmds" | wc -w)" -ge 19 ] && [ "$(echo "$cmds" | sort)" == "$usage_cmds" ] \
    && pass "help.command-table ($(echo "$cmds" | wc -w) commands, each with usage lines)" \
    || fail help.command-table "table: $(echo $cmds); usage: $(echo $usage_cmds)"
# cis2 CMD --help / -h (directly after the command) and cis2 help CMD: that
# command's usage lines, exit 0; every command the dispatcher knows has some.
bad=""
for c in $cmds; do
    h=$("$CIS2" "$c" --help 2>&1); rh=$?
    [ $rh -eq 0 ] && printf '%s\n' "$h" | grep -q "^  cis2 $c\( \|$\)" && [ "$h" == "$("$CIS2" "$c" -h 2>&1)" ] \
        && [ "$h" == "$("$CIS2" help "$c" 2>&1)" ] || bad="$bad $c(rc=$rh)"
done
[ -z "$bad" ] && pass help.per-command || fail help.per-command "no usage for:$bad"
# ... and those lines name every option the command accepts: each option of
# its cis2_cli_parse_opts list or option table in src/cli/cmd_CMD.c (--n is
# -n, --output is -o) appears in `cis2 CMD --help` (diff --table, compare -o,
# trace/conform --threads/--isa were accepted but not shown).
bad=""
for f in src/cli/cmd_*.c; do
    c=$(basename "$f" .c); c=${c#cmd_}; c=${c//_/-}; [ "$c" == tokenizer ] && c=tokenize
    [ -f "$f" ] || continue
    opts=$( (grep -o '{ *"--[a-z0-9-]*"' "$f" | grep -o -- '--[a-z0-9-]*'
             grep -A3 'cis2_cli_parse_opts(' "$f" | grep -o '"[^"]*"' | grep -o -- '--[a-z0-9-]*+\?') |
           sort -u | grep -v -- '+$' | grep -vx -- '--help' | sed 's/^--n$/-n/; s/^--output$/-o/')
    h=$("$CIS2" "$c" --help 2>&1) || { bad="$bad $c(no --help)"; continue; }
    for o in $opts; do printf '%s\n' "$h" | grep -q -- "$o\b" || bad="$bad $c:$o"; done
done
[ -z "$bad" ] && pass help.names-every-option || fail help.names-every-option "not in CMD --help:$bad"
h=$("$CIS2" verify --help); [ "$(printf '%s\n' "$h" | grep -c '^  cis2 ')" -eq 1 ] \
    && pass help.verify-not-verify-batch || fail help.verify-not-verify-batch "$h"
[ "$("$CIS2" help --help)" == "$("$CIS2" help)" ] && [ "$("$CIS2" -h help)" == "$("$CIS2" help)" ] \
    && pass help.help-itself || fail help.help-itself "cis2 help --help is not cis2 help"
out=$("$CIS2" nope --help 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$out" == "cis2 nope: unknown command (see cis2 help)" ] && pass help.unknown-command \
    || fail help.unknown-command "rc=$rc: $out"
# -h later on is a value, not a request for help: here the prompt text "-h"
out=$("$CIS2" run --model "$M" --prompt -h -n 1 2>&1); rc=$?
[ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^generated_token_ids=' && pass help.dash-h-as-a-value \
    || fail help.dash-h-as-a-value "rc=$rc: $out"
