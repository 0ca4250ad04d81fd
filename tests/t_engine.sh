#!/usr/bin/env bash
# CLI tests for the engine (issue 2): pinned fixture vectors, receipts and
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
