#!/usr/bin/env bash
# Regenerates the committed libFuzzer seed corpora under fuzz/corpus/<name>/
# and fuzz/tokenizer.json. Needs python3 and a built cis2 (CIS2=...).
# Seeds are small on purpose: libFuzzer mutates them, it does not need big ones.
set -eu
cd "$(dirname "$0")/.."
CIS2="${CIS2:-./cis2}"
T=tests/tmp/fuzzcorpus; rm -rf "$T"; mkdir -p "$T"
C=fuzz/corpus; rm -rf "$C"; mkdir -p "$C"/{safetensors,json,config,tokenizer_load,tokenizer_encode,receipt,op,trace,tol,vector,answer,cli,escape}
MK="python3 tools/make_model.py"
$MK "$T/tok" --layers 1 >/dev/null                      # the default fixture tokenizer
cp "$T/tok/tokenizer.json" fuzz/tokenizer.json
$MK "$T/tiny" --layers 1 --hidden 8 --heads 2 --kv-heads 1 --inter 8 --vocab 260 >/dev/null
$MK "$T/tiny-f32" --layers 1 --hidden 8 --heads 2 --kv-heads 1 --inter 8 --vocab 260 --dtype f32 --untied >/dev/null
$MK "$T/tiny-f16" --arch qwen2 --layers 1 --hidden 8 --heads 2 --kv-heads 1 --inter 8 --vocab 260 --dtype f16 >/dev/null
$MK "$T/tiny-q3" --arch qwen3 --layers 1 --hidden 8 --heads 2 --kv-heads 1 --head-dim 4 --inter 8 --vocab 260 >/dev/null
# safetensors: real (tiny) files and hand-made tables
for m in tiny tiny-f32 tiny-f16 tiny-q3; do cp "$T/$m/model.safetensors" "$C/safetensors/$m.safetensors"; done
python3 - "$C/safetensors" <<'PY'
import json, struct, sys, os
d = sys.argv[1]
def st(name, hdr, data=b'', raw=None):
    h = raw if raw is not None else json.dumps(hdr, separators=(',', ':')).encode()
    open(os.path.join(d, name), 'wb').write(struct.pack('<Q', len(h)) + h + data)
st('empty-table', {})
st('metadata-only', {'__metadata__': {'format': 'pt', 'k': 'v'}})
st('one-f32', {'a': {'dtype': 'F32', 'shape': [2, 2], 'data_offsets': [0, 16]}}, struct.pack('<4f', 1, 2, 3, 4))
st('one-bf16-scalar', {'s': {'dtype': 'BF16', 'shape': [], 'data_offsets': [0, 2]}}, b'\x80\x3f')
st('f16-zero-dim', {'z': {'dtype': 'F16', 'shape': [0, 3], 'data_offsets': [0, 0]}, 'b': {'dtype': 'F16', 'shape': [1], 'data_offsets': [0, 2]}}, b'\x00\x3c')
st('two-adjacent', {'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}, 'b': {'dtype': 'BF16', 'shape': [2], 'data_offsets': [4, 8]}}, bytes(8))
st('padded-header', None, struct.pack('<f', 1), raw=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}    ')
st('overlap', {'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}, 'b': {'dtype': 'F32', 'shape': [2], 'data_offsets': [4, 12]}}, bytes(12))
st('len-mismatch', {'a': {'dtype': 'F32', 'shape': [3], 'data_offsets': [0, 8]}}, bytes(8))
PY
# json: configs, a tokenizer, and snippets covering every grammar corner
for m in tok tiny-f32 tiny-f16 tiny-q3; do cp "$T/$m/config.json" "$C/json/config-$m.json"; cp "$T/$m/config.json" "$C/config/$m.json"; done
for f in ../shared/models/SmolLM2-135M/config.json models/SmolLM2-135M/config.json; do [ -f "$f" ] && cp "$f" "$C/config/smollm2-135m.json" && break; done
i=0
while IFS= read -r s; do printf '%s' "$s" > "$C/json/snippet-$i.json"; i=$((i + 1)); done <<'J'
{"a":[1,-0,0.5e-3,1E+2,-12.25e10,true,false,null],"b":{"c":"d"}}
["\u0041\u00e9\ud83d\ude00\n\t\"\\\/\b\f\r", "é✓日本", ""]
  [ [ [ [ [ [ [ [ {} ] ] ] ] ] ] ] ]  
{"k":1,"k":2}
123456789012345678901234567890
-1.7976931348623157e308
"\ud800"
{"x":1e-05,"y":100000}
J
# config: contradictions and unsupported features
while IFS= read -r s; do printf '%s' "$s" > "$C/config/case-$i.json"; i=$((i + 1)); done <<'J'
{"model_type":"qwen3","hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":1000000,"tie_word_embeddings":true,"eos_token_id":[1,2]}
{"model_type":"llama","hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":3,"vocab_size":100,"rms_norm_eps":1e-5,"rope_scaling":{"type":"linear"}}
{"model_type":"qwen2","hidden_size":48,"intermediate_size":96,"num_hidden_layers":1,"num_attention_heads":6,"num_key_value_heads":4,"vocab_size":10,"rms_norm_eps":1e-45,"hidden_act":"gelu","use_sliding_window":true}
{"model_type":"llama","hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":5,"rms_norm_eps":1e-5,"eos_token_id":7,"bos_token_id":1,"max_position_embeddings":4}
J
# tokenizer.json
cp fuzz/tokenizer.json "$C/tokenizer_load/fixture.json"
python3 - "$C/tokenizer_load" <<'PY'
import json, sys, os
d = sys.argv[1]
t = json.load(open(os.path.join(d, 'fixture.json')))
m = t['model']
# a minimal byte-level BPE: the first 300 vocab entries and 40 merges
small = dict(t); small['model'] = dict(m)
small['model']['vocab'] = {k: v for k, v in m['vocab'].items() if v < 300}
small['model']['merges'] = [x for x in m['merges'][:40]]
small['added_tokens'] = t['added_tokens'][:2]
json.dump(small, open(os.path.join(d, 'small.json'), 'w'), separators=(',', ':'))
PY
# encode/decode: first byte 0 = encode the rest, 1 = decode the rest as 16-bit ids
for s in "Once upon a time" "Hello, world! 123" "ünïcödé ✓ 日本語 🙂" "<|endoftext|>x<|im_start|>" $'  a\n\n\tb   c  ' "don't you're I'll" ""; do
    printf '\000%s' "$s" > "$C/tokenizer_encode/text-$i"; i=$((i + 1))
done
printf '\000\377\376abc\300\200' > "$C/tokenizer_encode/text-invalid-utf8"
printf '\001\005\000\021\000\052\000\007\000\143\000' > "$C/tokenizer_encode/ids-5-17-42-7-99"
printf '\001\000\000\001\000\377\377\376\377' > "$C/tokenizer_encode/ids-special-and-bad"
# receipts and op vectors
for m in tiny tiny-q3; do
    "$CIS2" run --model "$T/$m" --prompt-ids 5,17,42 -n 2 --receipt "$C/receipt/$m-ids.receipt" >/dev/null
    "$CIS2" run --model "$T/$m" --prompt "Hi there" -n 1 --receipt "$C/receipt/$m-text.receipt" >/dev/null
done
for v in tests/vectors/*.txt; do [ "$(stat -c %s "$v")" -le 16384 ] && cp "$v" "$C/op/"; done
# traces (a small teacher-forced one, a hash-only one), --tol files, §13.1 vectors,
# candidates' answers, argument vectors (NUL-separated, first byte = flag set),
# and text for the escaper
"$CIS2" trace --model "$T/tiny" --prompt-ids 5,17 --teacher-force 3 --layers 0 --nodes attn_scores,logits -o "$C/trace/tiny.st" >/dev/null
"$CIS2" trace --model "$T/tiny-q3" --prompt-ids 5 -n 2 --hash-only -o "$C/trace/hash-only.st" >/dev/null
printf '# default-ish\n* max_rel=1e-4 mean_rel=2e-3 min_cos=0.99999\nlogits top1=1\r\nq_proj max_rel=0\n' > "$C/tol/basic.tol"
printf 'attn_scores max_rel=5e-4 # comment\n\n  \t\n' > "$C/tol/comment.tol"
cp tests/fixtures/llama.vector "$C/vector/llama.vector"
sed 's/$/\r/' tests/fixtures/llama.vector > "$C/vector/llama-crlf.vector"
"$CIS2" op rsqrt < tests/vectors/rsqrt_spec.txt > "$C/answer/ours.txt"
sed 's/$/\r/; s/=/ = /' "$C/answer/ours.txt" > "$C/answer/crlf-blanks.txt"
printf 'out_sha256=ABC\nhello\n' > "$C/answer/bad.txt"
printf '\004--model\000m\000--prompt-ids\0001,2\000-n\0003\000--receipt\000r' > "$C/cli/run"
printf '\006--model\000m\000--backend\000ref\000--backend\000fast\000--exact\000--\000-x' > "$C/cli/compare"
printf '\001--flag\000--int\000-5\000--list\000a\000--list\000b\000pos\000--flag' > "$C/cli/rest"
printf '\002-o\000\000--str\000\000-n\0008\000a\000b' > "$C/cli/errors"
printf 'plain text, caf\303\251 \342\234\223' > "$C/escape/utf8"
printf 'a\nverdict=X\033[2J\302\233\342\200\256\377\000\\' > "$C/escape/hostile"
rm -rf "$T"
for d in "$C"/*; do echo "$(basename "$d"): $(ls "$d" | wc -l) seeds, $(du -sk "$d" | cut -f1) KiB"; done
