#!/usr/bin/env bash
# The bad-input catalogue: every row of the table in docs/errors.md
# is run here, and the one stderr line and the exit status must be exactly
# what the table says (paths of the damaged model written as DIR).
# ERRORS_DUMP=1 prints the table rows from what the binary says instead
# (to regenerate docs/errors.md after a deliberate message change).
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/errors"; rm -rf "$T"; mkdir -p "$T"
MK="python3 tools/make_model.py"
$MK "$T/good" --layers 1 >/dev/null || { fail errors.setup "make_model failed"; exit 1; }
G="$T/good"
$MK "$T/untied" --layers 1 --untied --dtype f32 >/dev/null

# row ID "WHAT IS WRONG" "ALSO TESTED BY" CMD...: tests/lib.sh's errors_row, paths
# of the damaged models written DIR.
row() {
    local id="$1" what="$2" also="$3"; shift 3
    ERRORS_DIR="$T" errors_row "$id" "$what" "t_errors.sh${also:+, $also}" "$@"
}
cpm() { rm -rf "$T/$1"; cp -r "$G" "$T/$1"; }
# st_edit DIR PYTHON-EXPR-ON-h: rewrite model.safetensors' header JSON (new length).
st_edit() { python3 - "$1/model.safetensors" "$2" <<'PY'
import sys, struct, json
p, expr = sys.argv[1], sys.argv[2]
d = open(p, 'rb').read(); n = struct.unpack('<Q', d[:8])[0]
h = json.loads(d[8:8 + n]); data = d[8 + n:]
names = sorted(k for k in h if k != '__metadata__')
exec(expr)
hb = json.dumps(h, separators=(',', ':')).encode()
open(p, 'wb').write(struct.pack('<Q', len(hb)) + hb + data)
PY
}
cfg_edit() { python3 - "$1/config.json" "$2" <<'PY'
import sys, json
p, expr = sys.argv[1], sys.argv[2]
c = json.load(open(p)); exec(expr); open(p, 'w').write(json.dumps(c, indent=2))
PY
}
RUN=(run --prompt-ids 1 -n 1 --model)

# ---- model.safetensors
cpm st-missing; rm "$T/st-missing/model.safetensors"
row st-missing "model.safetensors does not exist" "" "$CIS2" "${RUN[@]}" "$T/st-missing"
cpm st-tiny; head -c 4 "$G/model.safetensors" > "$T/st-tiny/model.safetensors"
row st-tiny "file shorter than the 8-byte header length" "t_engine.sh bad.tiny-safetensors; unit_core safetensors.rejects.truncated" "$CIS2" "${RUN[@]}" "$T/st-tiny"
cpm st-truncated; head -c 5000 "$G/model.safetensors" > "$T/st-truncated/model.safetensors"
row st-truncated "file truncated inside the tensor data" "t_engine.sh bad.truncated-safetensors" "$CIS2" "${RUN[@]}" "$T/st-truncated"
cpm st-hdrlen; python3 - "$T/st-hdrlen/model.safetensors" <<'PY'
import sys, struct
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[0:8] = struct.pack('<Q', len(b) * 2); open(p, 'wb').write(b)
PY
row st-header-len-beyond-file "header length field points past the end of the file" "t_engine.sh bad.header-len-beyond-file; unit_core safetensors.rejects.header-len-beyond-file" "$CIS2" "${RUN[@]}" "$T/st-hdrlen"
cpm st-hdrjson; python3 - "$T/st-hdrjson/model.safetensors" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[8] = ord('['); open(p, 'wb').write(b)
PY
row st-header-not-json "header is not a JSON object" "unit_core safetensors.rejects.13" "$CIS2" "${RUN[@]}" "$T/st-hdrjson"
cpm st-dtype; st_edit "$T/st-dtype" "h['model.norm.weight']['dtype'] = 'I16'"
row st-unknown-dtype "tensor with a dtype other than F32/BF16/F16/I8" "t_engine.sh bad.unknown-dtype; unit_core safetensors.rejects.0" "$CIS2" "${RUN[@]}" "$T/st-dtype"
cpm st-dtype-mismatch; st_edit "$T/st-dtype-mismatch" "h['model.norm.weight']['dtype'] = 'F32'"
row st-dtype-vs-bytes "dtype x shape disagrees with the byte span (BF16 data declared F32)" "unit_core safetensors.rejects.1" "$CIS2" "${RUN[@]}" "$T/st-dtype-mismatch"
cpm st-shape-span; st_edit "$T/st-shape-span" "h['model.norm.weight']['shape'] = [h['model.norm.weight']['shape'][0] + 1]"
row st-shape-vs-bytes "shape disagrees with the byte span" "unit_core safetensors.rejects.1" "$CIS2" "${RUN[@]}" "$T/st-shape-span"
cpm st-overlap; st_edit "$T/st-overlap" "a, b = names[0], names[1]; h[b]['data_offsets'] = [h[a]['data_offsets'][0], h[a]['data_offsets'][0] + h[b]['data_offsets'][1] - h[b]['data_offsets'][0]]"
row st-overlap "two tensors' byte ranges overlap" "unit_core safetensors.rejects.3" "$CIS2" "${RUN[@]}" "$T/st-overlap"
cpm st-range; st_edit "$T/st-range" "t = h['model.norm.weight']; s = t['data_offsets']; t['data_offsets'] = [len(data), len(data) + s[1] - s[0]]"
row st-offset-out-of-range "data_offsets beyond the end of the data" "unit_core safetensors.rejects.2" "$CIS2" "${RUN[@]}" "$T/st-range"
cpm st-begin-end; st_edit "$T/st-begin-end" "t = h['model.norm.weight']; t['data_offsets'] = t['data_offsets'][::-1]"
row st-offsets-reversed "data_offsets with begin > end" "unit_core safetensors.rejects.7" "$CIS2" "${RUN[@]}" "$T/st-begin-end"
cpm st-trailing; printf 'xxxx' >> "$T/st-trailing/model.safetensors"
row st-trailing-bytes "bytes after the last tensor" "unit_core safetensors.rejects.5" "$CIS2" "${RUN[@]}" "$T/st-trailing"
cpm st-name-ctl; st_edit "$T/st-name-ctl" "h['model.norm\\nweight'] = h.pop('model.norm.weight')"
row st-name-control-char "a tensor name with a newline or other control character (found by fuzz_safetensors)" "fuzz/regressions/safetensors/newline-in-tensor-name" "$CIS2" "${RUN[@]}" "$T/st-name-ctl"
cpm st-missing-tensor; st_edit "$T/st-missing-tensor" "h['model.norx.weight'] = h.pop('model.norm.weight')"
row st-missing-tensor "a tensor the architecture needs is absent" "t_engine.sh bad.missing-tensor" "$CIS2" "${RUN[@]}" "$T/st-missing-tensor"
cpm st-shape-config; cfg_edit "$T/st-shape-config" "c['intermediate_size'] = 96"
row st-shape-vs-config "tensor shape contradicts config.json" "t_engine.sh bad.shape-vs-config" "$CIS2" "${RUN[@]}" "$T/st-shape-config"
cpm st-nan; python3 - "$T/st-nan/model.safetensors" <<'PY'
import sys, struct, json
p = sys.argv[1]; d = bytearray(open(p, 'rb').read()); n = struct.unpack('<Q', d[:8])[0]
h = json.loads(d[8:8 + n]); a = h['model.norm.weight']['data_offsets'][0]
d[8 + n + a: 8 + n + a + 2] = struct.pack('<H', 0x7FC0); open(p, 'wb').write(d)
PY
row st-nan-norm "NaN in a norm weight" "t_engine.sh bad.nan-norm-weight" "$CIS2" "${RUN[@]}" "$T/st-nan"
rm -rf "$T/st-tied"; cp -r "$T/untied" "$T/st-tied"; cfg_edit "$T/st-tied" "c['tie_word_embeddings'] = True"
row st-tied-with-lm-head "tie_word_embeddings=true but the file carries lm_head.weight: accepted, the embedding is the head (§11.1), one warning" "t_model.sh head.tied-with-lm_head-uses-the-embedding" "$CIS2" "${RUN[@]}" "$T/st-tied"
rm -rf "$T/st-untied-nohead"; cp -r "$G" "$T/st-untied-nohead"; cfg_edit "$T/st-untied-nohead" "c['tie_word_embeddings'] = False"
row st-untied-without-lm-head "tie_word_embeddings=false but no lm_head.weight: accepted, the embedding is the head (§11.1), one warning" "t_model.sh head.untied-without-lm_head-uses-the-embedding" "$CIS2" "${RUN[@]}" "$T/st-untied-nohead"
cpm st-o-bias; st_edit "$T/st-o-bias" "h['model.layers.0.self_attn.o_proj.bias'] = {'dtype': 'BF16', 'shape': [0], 'data_offsets': [len(data), len(data)]}"
row st-unexpected-tensor "a tensor CIS-2 does not define (an o_proj bias: Hugging Face's attention_bias=true on Llama)" "t_model.sh bias.o_proj-bias-refused" "$CIS2" "${RUN[@]}" "$T/st-o-bias"

# ---- int8 checkpoints (docs/quantization.md §4): what the tensors say must match quantization_config
"$CIS2" quantize --model "$G" --out "$T/q8" >/dev/null 2>&1
cpq() { rm -rf "$T/$1"; cp -r "$T/q8" "$T/$1"; }
cpq i8-noqc; cfg_edit "$T/i8-noqc" "del c['quantization_config']"
row int8-without-quantization-config "I8 linears but config.json has no quantization_config" "t_int8.sh" "$CIS2" "${RUN[@]}" "$T/i8-noqc"
cpm i8-float; cfg_edit "$T/i8-float" "c['quantization_config'] = __import__('json').load(open('$T/q8/config.json'))['quantization_config']"
row int8-config-but-float "quantization_config makes a linear int8 but the tensor is float" "t_int8.sh" "$CIS2" "${RUN[@]}" "$T/i8-float"
cpq i8-ignored; cfg_edit "$T/i8-ignored" "c['quantization_config']['ignore'].append('model.layers.0.mlp.up_proj')"
row int8-ignored-but-int8 "an I8 linear that quantization_config's ignore leaves in float" "t_int8.sh" "$CIS2" "${RUN[@]}" "$T/i8-ignored"
cpq i8-noscale; st_edit "$T/i8-noscale" "k = 'model.layers.0.mlp.up_proj.weight_scale'; h[k + 'x'] = h.pop(k)"
row int8-no-scale "an I8 linear without its weight_scale" "t_int8.sh" "$CIS2" "${RUN[@]}" "$T/i8-noscale"
cpq i8-scaleshape; st_edit "$T/i8-scaleshape" "k = 'model.layers.0.mlp.up_proj.weight_scale'; h[k]['shape'] = h[k]['shape'][::-1]"
row int8-scale-shape "a weight_scale that is not [rows, 1]" "t_int8.sh" "$CIS2" "${RUN[@]}" "$T/i8-scaleshape"
cpq i8-scalenan; python3 - "$T/i8-scalenan/model.safetensors" <<'PY'
import sys, struct, json
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); n = struct.unpack('<Q', b[:8])[0]
a = json.loads(b[8:8 + n])['model.layers.0.mlp.up_proj.weight_scale']['data_offsets'][0]
b[8 + n + a + 12:8 + n + a + 16] = struct.pack('<f', float('inf')); open(p, 'wb').write(b)
PY
row int8-scale-inf "a row scale that is Inf or NaN" "t_int8.sh" "$CIS2" "${RUN[@]}" "$T/i8-scalenan"
cpq i8-receipt-dtype; "$CIS2" run --model "$T/q8" --prompt-ids 1 -n 1 --receipt "$T/i8r.txt" >/dev/null 2>&1
sed 's/^dtype int8-row$/dtype int8-col/' "$T/i8r.txt" > "$T/i8r-bad.txt"
row receipt-unknown-dtype "a receipt whose dtype is neither fp32 nor int8-row" "t_int8.sh" "$CIS2" verify "$T/i8r-bad.txt" --model "$T/q8"
row armd-receipt "--receipt with --backend approx (arm D is not reproducible)" "t_int8.sh" "$CIS2" "${RUN[@]}" "$T/q8" --backend approx --receipt "$T/armd.r"
row armd-float-checkpoint "--backend approx on a checkpoint without int8 linears" "" "$CIS2" "${RUN[@]}" "$G" --backend approx
row armd-verify "--backend approx for a command that checks or writes receipts" "t_int8.sh" "$CIS2" verify "$T/i8r.txt" --model "$T/q8" --backend approx
row armd-compare-exact "compare --exact with --backend approx (arm D is judged by its table)" "" "$CIS2" compare --model "$T/q8" --backend ref --backend approx --prompt-ids 5 --exact
# cis2 arms (docs/divergence.md §7)
AR=(arms --source "$G" --prompt-ids 5 --teacher-force 7)
row arms-threads-zero "arms --threads 0 (was taken as the default; every other command wants at least 1)" "" "$CIS2" arms --threads 0
row arms-no-source "arms without --source" "" "$CIS2" arms --quantized "$T/q8" --prompt-ids 5 --teacher-force 7
row arms-no-teacher-force "arms without --teacher-force" "" "$CIS2" arms --source "$G" --quantized "$T/q8" --prompt-ids 5
row arms-float-quantized "arms --quantized naming a float checkpoint" "" "$CIS2" "${AR[@]}" --quantized "$G"
row arms-workdir-file "arms -o naming a file, not a directory" "" "$CIS2" "${AR[@]}" --quantized "$T/q8" -o "$T/q8/config.json"
row arms-fault-arg-alone "arms --fault-arg without --fault" "" "$CIS2" "${AR[@]}" --quantized "$T/q8" --fault-arg 1
row arms-fault-unknown "arms --fault with an unknown name" "" "$CIS2" "${AR[@]}" --quantized "$T/q8" --fault bogus -o "$T/arms-w"
[ ! -e "$T/arms-w" ] && pass errors.arms-refused-leaves-no-workdir || fail errors.arms-refused-leaves-no-workdir "$(ls -la "$T/arms-w")"
row arms-ids-vocab "arms with an id outside the vocabulary (was refused by arm C, after the work directory was made)" "" "$CIS2" arms --source "$G" --quantized "$T/q8" --prompt-ids 5 --teacher-force 7,99999 -o "$T/arms-w3"
[ ! -e "$T/arms-w3" ] && pass errors.arms-ids-vocab-leaves-no-workdir || fail errors.arms-ids-vocab-leaves-no-workdir "$(ls -la "$T/arms-w3")"
row arms-source-missing "arms --source naming no checkpoint (was a FAILED arm A, verdict=SHIP and exit 0)" "" "$CIS2" arms --source "$T/nope" --quantized "$T/q8" --prompt-ids 5 --teacher-force 7 -o "$T/arms-w2"
row arms-source-int8 "arms --source naming the int8 checkpoint itself" "" "$CIS2" arms --source "$T/q8" --quantized "$T/q8" --prompt-ids 5 --teacher-force 7 -o "$T/arms-w2"
$MK "$T/l2" --layers 2 >/dev/null
row arms-source-other-shape "arms --source naming another checkpoint (another shape than --quantized's)" "" "$CIS2" arms --source "$T/l2" --quantized "$T/q8" --prompt-ids 5 --teacher-force 7 -o "$T/arms-w2"
# "-" is standard output elsewhere: a command writing a directory refuses it
# rather than make a directory named "-" (run inside $T/dash to see none appears)
mkdir -p "$T/dash"; A_CIS2=$(realpath "$(command -v "$CIS2")"); A_G=$(realpath "$G"); A_Q=$(realpath "$T/q8")
row arms-workdir-dash "arms -o - (a work directory cannot be standard output)" "" sh -c 'cd "$0" && exec "$@"' "$T/dash" "$A_CIS2" arms --source "$A_G" --quantized "$A_Q" --prompt-ids 5 --teacher-force 7 --python /bin/false -o -
row quantize-out-dash "quantize --out - (a checkpoint directory cannot be standard output)" "" sh -c 'cd "$0" && exec "$@"' "$T/dash" "$A_CIS2" quantize --model "$A_G" --out -
# the chat template's files go with the int8 twin (so --chat renders as on the
# source), and one the source lacks is not left in QDIR for the twin to use
cpm chat-src; cp tests/fixtures/chat/chatml.jinja "$T/chat-src/chat_template.jinja"
"$CIS2" quantize --model "$T/chat-src" --out "$T/chat-q" >/dev/null 2>&1
printf '[{"role":"user","content":"hi"}]' > "$T/chat.json"
if [ -z "${ERRORS_DUMP:-}" ]; then
    a=$("$CIS2" run --model "$T/chat-src" --chat "$T/chat.json" -n 1 2>&1 | head -1)
    b=$("$CIS2" run --model "$T/chat-q" --chat "$T/chat.json" -n 1 2>&1 | head -1)
    cmp -s "$T/chat-src/chat_template.jinja" "$T/chat-q/chat_template.jinja" && [ "$a" == "$b" ] \
        && pass errors.quantize-copies-chat-template || fail errors.quantize-copies-chat-template "$a / $b"
fi
row quantize-stale-chat-file "quantize --out holding a chat template its source lacks (another checkpoint's)" "" "$CIS2" quantize --model "$G" --out "$T/chat-q"
# QDIR is checked before the checkpoint is read and quantized (a damaged
# source shows the order: its error came first, after all the work, before)
row quantize-out-checked-first "quantize --out in a directory that does not exist (refused before the source is read)" "t_quant.sh quant.err-out-*" "$CIS2" quantize --model "$T/st-tiny" --out "$T/no-such-dir/q"
ln -sfn "$T/no-such-target" "$T/dangling-q"
row quantize-out-dangling-link "quantize --out naming a symbolic link to nothing (was 'File exists')" "" "$CIS2" quantize --model "$T/st-tiny" --out "$T/dangling-q"

# ---- sharded checkpoints (model/shards.h): the loader's hint, join-shards' refusals
sh_make() { # sh_make NAME [PYTHON-ON-wm]: $G in 2 shards under $T/NAME, its weight_map edited
    rm -rf "$T/$1"; mkdir -p "$T/$1"; python3 tests/shard_split.py split "$G" "$T/$1" 2 chunk 1
    [ -z "${2:-}" ] || python3 - "$T/$1/model.safetensors.index.json" "$2" <<'PY'
import json, sys
p = sys.argv[1]; d = json.load(open(p)); wm = d['weight_map']; exec(sys.argv[2]); json.dump(d, open(p, 'w'))
PY
}
sh_make sharded
row model-sharded "a model directory holding a sharded checkpoint (model.safetensors.index.json) and no model.safetensors" "" "$CIS2" "${RUN[@]}" "$T/sharded"
row join-no-index "join-shards on a directory without model.safetensors.index.json" "" "$CIS2" join-shards --model "$G" --out "$T/j.st"
sh_make sh-nomap "d.pop('weight_map')"
row join-no-weight-map "a shard index without a weight_map object" "" "$CIS2" join-shards --model "$T/sh-nomap" --out "$T/j.st"
sh_make sh-path "wm['model.norm.weight'] = '../model-00002-of-00002.safetensors'"
row join-shard-path "a weight_map entry naming a shard outside the directory" "" "$CIS2" join-shards --model "$T/sh-path" --out "$T/j.st"
sh_make sh-extra "wm['model.layers.0.extra.weight'] = 'model-00001-of-00002.safetensors'"
row join-tensor-missing "the index lists a tensor its shard does not hold" "" "$CIS2" join-shards --model "$T/sh-extra" --out "$T/j.st"
sh_make sh-unlisted "del wm['model.norm.weight']"
row join-tensor-unlisted "a shard holds a tensor the index does not list (it would be dropped)" "" "$CIS2" join-shards --model "$T/sh-unlisted" --out "$T/j.st"
sh_make sh-moved "k = 'model.norm.weight'; wm[k] = [f for f in set(wm.values()) if f != wm[k]][0]"
row join-tensor-moved "the index puts a tensor in another shard than the one holding it" "" "$CIS2" join-shards --model "$T/sh-moved" --out "$T/j.st"
sh_make sh-twice; python3 - "$T/sh-twice" <<'PY'
import json, sys
sys.path.insert(0, 'tests'); import shard_split as s
d = sys.argv[1]; wm = json.load(open(d + '/model.safetensors.index.json'))['weight_map']
k = 'model.norm.weight'; other = [f for f in set(wm.values()) if f != wm[k]][0]
t = s.read(d + '/' + other); t[k] = s.read(d + '/' + wm[k])[k]
s.write(d + '/' + other, t, list(t), {'format': 'pt'})
PY
row join-tensor-in-two-shards "a tensor held by two shards (the index names one)" "" "$CIS2" join-shards --model "$T/sh-twice" --out "$T/j.st"
sh_make sh-gone; rm "$T/sh-gone/model-00002-of-00002.safetensors"
row join-shard-missing "a shard the index names is not there" "" "$CIS2" join-shards --model "$T/sh-gone" --out "$T/j.st"
row join-out-is-shard "join-shards --out naming one of the shards" "" "$CIS2" join-shards --model "$T/sharded" --out "$T/sharded/model-00001-of-00002.safetensors"
row join-out-dir "join-shards --out naming a directory" "" "$CIS2" join-shards --model "$T/sharded" --out "$T/sharded"
if [ -z "${ERRORS_DUMP:-}" ]; then
    [ ! -e "$T/dash/-" ] && pass errors.dash-no-directory-made || fail errors.dash-no-directory-made "$(ls -la "$T/dash")"
fi

# ---- config.json
cpm cfg-missing; rm "$T/cfg-missing/config.json"
row cfg-missing "config.json does not exist" "" "$CIS2" "${RUN[@]}" "$T/cfg-missing"
cpm cfg-huge; truncate -s 17M "$T/cfg-huge/config.json"
row cfg-too-large "config.json over 16 MiB (refused by its size, unread)" "" "$CIS2" "${RUN[@]}" "$T/cfg-huge"
cpm cfg-json; echo '{"model_type": "llama",' > "$T/cfg-json/config.json"
row cfg-invalid-json "config.json is not valid JSON" "t_engine.sh bad.config-json" "$CIS2" "${RUN[@]}" "$T/cfg-json"
cpm cfg-dup; sed -i 's/"model_type": "llama",/"model_type": "llama", "model_type": "qwen2",/' "$T/cfg-dup/config.json"
row cfg-duplicate-key "a key given twice" "unit_core config.duplicate-key-rejected" "$CIS2" "${RUN[@]}" "$T/cfg-dup"
cpm cfg-type; cfg_edit "$T/cfg-type" "c['model_type'] = 'gpt2'"
row cfg-model-type "unsupported model_type" "unit_core config.rejects.0-model_type" "$CIS2" "${RUN[@]}" "$T/cfg-type"
cpm cfg-layers0; cfg_edit "$T/cfg-layers0" "c['num_hidden_layers'] = 0"
row cfg-out-of-range "integer field out of range" "unit_core config.rejects.6-max_position_embeddings" "$CIS2" "${RUN[@]}" "$T/cfg-layers0"
cpm cfg-frac; sed -i 's/"hidden_size": 64/"hidden_size": 64.0/' "$T/cfg-frac/config.json"
row cfg-not-integer "integer field spelled as a float" "unit_core config.rejects.8-hidden_size" "$CIS2" "${RUN[@]}" "$T/cfg-frac"
cpm cfg-i64; sed -i 's/"hidden_size": 64/"hidden_size": 9223372036854775808/' "$T/cfg-i64/config.json"
row cfg-int-beyond-int64 "integer field beyond the 64-bit range" "unit_core config.int-beyond-int64" "$CIS2" "${RUN[@]}" "$T/cfg-i64"
cpm cfg-req; cfg_edit "$T/cfg-req" "del c['vocab_size']"
row cfg-required-missing "a required field is missing" "unit_core config.rejects.9-intermediate_size" "$CIS2" "${RUN[@]}" "$T/cfg-req"
cpm cfg-kv; cfg_edit "$T/cfg-kv" "c['num_key_value_heads'] = 3"
row cfg-kv-heads "num_key_value_heads does not divide num_attention_heads" "unit_core config.rejects.5-num_key_value_heads" "$CIS2" "${RUN[@]}" "$T/cfg-kv"
cpm cfg-heads; cfg_edit "$T/cfg-heads" "c['num_attention_heads'] = 3; c['num_key_value_heads'] = 3"
row cfg-hidden-vs-heads "hidden_size not a multiple of the heads (no head_dim)" "" "$CIS2" "${RUN[@]}" "$T/cfg-heads"
cpm cfg-hd; cfg_edit "$T/cfg-hd" "c['head_dim'] = 15"
row cfg-head-dim-odd "odd head_dim" "unit_core config.rejects.4-head_dim" "$CIS2" "${RUN[@]}" "$T/cfg-hd"
cpm cfg-eps; sed -i 's/"rms_norm_eps": 1e-05/"rms_norm_eps": -1e-05/' "$T/cfg-eps/config.json"
row cfg-eps-negative "rms_norm_eps negative (0 and subnormal values are computed as written, §2.3)" "unit_core config.rejects-negative-eps; t_model.sh eps.*" "$CIS2" "${RUN[@]}" "$T/cfg-eps"
cpm cfg-theta; cfg_edit "$T/cfg-theta" "c['rope_theta'] = -1"
row cfg-theta-negative "rope_theta not positive" "unit_core config.rejects.3-rope_theta" "$CIS2" "${RUN[@]}" "$T/cfg-theta"
cpm cfg-eos; cfg_edit "$T/cfg-eos" "c['eos_token_id'] = c['vocab_size']"
row cfg-eos-ge-vocab "eos_token_id not below vocab_size (found by fuzz_config)" "fuzz/corpus/config/case-11.json" "$CIS2" "${RUN[@]}" "$T/cfg-eos"
cpm cfg-bos; cfg_edit "$T/cfg-bos" "c['bos_token_id'] = c['vocab_size'] + 5"
row cfg-bos-ge-vocab "bos_token_id not below vocab_size" "" "$CIS2" "${RUN[@]}" "$T/cfg-bos"
cpm cfg-act; cfg_edit "$T/cfg-act" "c['hidden_act'] = 'gelu'"
row cfg-hidden-act "an activation other than silu" "unit_core config.rejects.1-hidden_act" "$CIS2" "${RUN[@]}" "$T/cfg-act"
cpm cfg-scaling; cfg_edit "$T/cfg-scaling" "c['rope_scaling'] = {'type': 'linear', 'factor': 2.0}"
row cfg-rope-scaling "RoPE scaling" "unit_core config.rejects.2-rope_scaling" "$CIS2" "${RUN[@]}" "$T/cfg-scaling"
cpm cfg-swa; cfg_edit "$T/cfg-swa" "c['use_sliding_window'] = True"
row cfg-sliding-window "sliding-window attention" "" "$CIS2" "${RUN[@]}" "$T/cfg-swa"
cpm cfg-prf; cfg_edit "$T/cfg-prf" "c['partial_rotary_factor'] = 0.5"
row cfg-partial-rotary "RoPE on part of each head (partial_rotary_factor != 1)" "" "$CIS2" "${RUN[@]}" "$T/cfg-prf"

# ---- tokenizer.json
cpm tok-missing; rm "$T/tok-missing/tokenizer.json"
row tok-missing "tokenizer.json does not exist (it is hashed into every receipt)" "t_engine.sh bad.no-tokenizer" "$CIS2" "${RUN[@]}" "$T/tok-missing"
cpm tok-json; echo 'not json' > "$T/tok-json/tokenizer.json"
row tok-invalid-json "tokenizer.json is not valid JSON" "unit_tokenizer" "$CIS2" tokenize --model "$T/tok-json" hello

# ---- prompts, ids and -n
row prompt-not-utf8 "--prompt bytes that are not UTF-8" "" "$CIS2" run --model "$G" --prompt $'ab\xff' -n 1
row prompt-empty "--prompt that encodes to no tokens" "" "$CIS2" run --model "$G" --prompt "" -n 1
row ids-ge-vocab "a prompt id >= vocab_size" "t_engine.sh bad.id-ge-vocab" "$CIS2" run --model "$G" --prompt-ids 1,320 -n 1
row ids-negative "a negative prompt id" "unit_core ids.rejects-malformed" "$CIS2" run --model "$G" --prompt-ids -1 -n 1
row ids-malformed "ids with spaces" "t_engine.sh bad.ids-malformed" "$CIS2" run --model "$G" --prompt-ids "1, 2" -n 1
row ids-leading-zero "an id with a leading zero" "unit_core ids.rejects-malformed" "$CIS2" run --model "$G" --prompt-ids 01 -n 1
row ids-empty "an empty id list" "" "$CIS2" run --model "$G" --prompt-ids "" -n 1
row prompt-both "both --prompt and --prompt-ids" "t_engine.sh bad.both-prompts" "$CIS2" run --model "$G" --prompt-ids 1 --prompt hi
row n-zero "-n 0" "t_engine.sh bad.n-zero" "$CIS2" run --model "$G" --prompt-ids 1 -n 0
row n-absurd "-n 99999999999" "t_engine.sh bad.n-absurd" "$CIS2" run --model "$G" --prompt-ids 1 -n 99999999999
row n-beyond-max-pos "prompt + -n beyond max_position_embeddings" "t_engine.sh bad.n-beyond-max-pos" "$CIS2" run --model "$G" --prompt-ids 1 -n 9000
row detok-id-ge-vocab "detokenize an id >= vocab" "" "$CIS2" detokenize --model "$G" 99999
row tokenize-not-utf8 "tokenize bytes that are not UTF-8" "" "$CIS2" tokenize --model "$G" $'\xc3('
printf 'a\xff' > "$T/bad-utf8.txt"
row tokenize-bench-not-utf8 "tokenize --bench of a file whose bytes are not UTF-8" "" "$CIS2" tokenize --model "$G" --bench "$T/bad-utf8.txt"

# ---- flags
row no-model "run without --model" "t_engine.sh bad.no-model" "$CIS2" run --prompt-ids 1
row model-dir-missing "--model DIR that does not exist" "t_engine.sh bad.model-dir-missing" "$CIS2" run --model "$T/none" --prompt-ids 1
row unknown-flag "an unknown option" "t_engine.sh bad.unknown-flag" "$CIS2" run --model "$G" --prompt-ids 1 --frobnicate 3
row missing-value "an option without its value" "t_engine.sh bad.missing-value" "$CIS2" run --model "$G" --prompt-ids
row backend-unknown "--backend other than ref/fast" "t_engine.sh bad.backend" "$CIS2" run --model "$G" --prompt-ids 1 --backend gpu
row threads-zero "--threads 0" "" "$CIS2" run --model "$G" --prompt-ids 1 --backend fast --threads 0
row isa-unknown "--isa that does not exist" "t_fast.sh" "$CIS2" run --model "$G" --prompt-ids 1 --backend fast --isa bogus
row isa-without-fast "--isa with the reference backend (it has no SIMD paths; the flag was ignored)" "" "$CIS2" run --model "$G" --prompt-ids 1 --isa scalar
row unknown-command "an unknown command" "t_engine.sh bad.unknown-command" "$CIS2" frobnicate

# ---- receipts: never half-written
row receipt-unwritable "--receipt in a directory that does not exist" "t_engine.sh bad.receipt-unwritable" "$CIS2" run --model "$G" --prompt-ids 1 -n 1 --receipt "$T/nodir/r.txt"
mkdir -p "$T/rdir"
row receipt-is-directory "--receipt naming a directory" "" "$CIS2" run --model "$G" --prompt-ids 1 -n 1 --receipt "$T/rdir"
if [ -z "${ERRORS_DUMP:-}" ]; then
    ls -a "$T" | grep -q '\.tmp\.' && fail errors.receipt-no-temp-left "$(ls -a "$T" | grep '\.tmp\.')" || pass errors.receipt-no-temp-left
    echo "keep me" > "$T/keep.txt"
    "$CIS2" run --model "$G" --prompt-ids 1,999 -n 1 --receipt "$T/keep.txt" 2>/dev/null
    [ "$(cat "$T/keep.txt")" == "keep me" ] && pass errors.failed-run-leaves-receipt-intact || fail errors.failed-run-leaves-receipt-intact "overwritten"
fi
"$CIS2" run --model "$G" --prompt-ids 5,17 -n 2 --receipt "$T/r.txt" >/dev/null 2>&1
row verify-missing "verify a receipt that does not exist" "t_engine.sh verify.rejects-missing-receipt" "$CIS2" verify "$T/nope.txt" --model "$G"
sed '3d' "$T/r.txt" > "$T/r-order.txt"
row verify-malformed "verify a receipt with a line missing" "t_engine.sh verify.rejects-malformed-receipt; unit_core receipt.rejects.*" "$CIS2" verify "$T/r-order.txt" --model "$G"
sed 's/^gen-toks 2/gen-toks 3/' "$T/r.txt" > "$T/r-count.txt"
row verify-gen-toks "gen-toks disagreeing with the ids" "unit_core receipt.rejects.0" "$CIS2" verify "$T/r-count.txt" --model "$G"
head -c 100 "$T/r.txt" > "$T/r-trunc.txt"
row verify-truncated "a truncated receipt" "unit_core receipt.rejects.truncated" "$CIS2" verify "$T/r-trunc.txt" --model "$G"
$MK "$T/mp16" --layers 1 --max-pos 16 >/dev/null
"$CIS2" run --model "$T/mp16" --prompt-ids 5,17 -n 2 --receipt "$T/r-mp16.txt" >/dev/null 2>&1
sed -e 's/^gen-toks 2/gen-toks 20/' -e "s/^generated-token-ids .*/generated-token-ids $(printf '3,%.0s' $(seq 19))3/" "$T/r-mp16.txt" > "$T/r-long.txt"
row verify-beyond-max-pos "a receipt needing more positions than the model has (named -n, a flag verify has not)" "t_batch.sh verify-batch.receipt-beyond-max-pos-is-one-line" "$CIS2" verify "$T/r-long.txt" --model "$T/mp16"

# ---- op vectors (conformance candidate)
row op-unknown "cis2 op with an unknown op" "t_conformance.sh" "$CIS2" op frob
printf 'op=rmsnorm\n' > "$T/op1.txt"
row op-missing-field "an op vector without a required field" "t_conformance.sh" sh -c "\"$CIS2\" op rmsnorm < \"$T/op1.txt\""
printf 'op=rmsnorm\nop=rmsnorm\n' > "$T/op2.txt"
row op-duplicate-key "an op vector with a key twice" "t_conformance.sh" sh -c "\"$CIS2\" op rmsnorm < \"$T/op2.txt\""
printf 'op=softmax\nn=2\nscores_bits=0x3F800000,zz\n' > "$T/op3.txt"
row op-bad-bits "an op vector with malformed bits" "t_conformance.sh" sh -c "\"$CIS2\" op softmax < \"$T/op3.txt\""
printf 'op=silu\n' > "$T/op4.txt"
row op-wrong-op "a vector for another op" "t_conformance.sh" sh -c "\"$CIS2\" op rmsnorm < \"$T/op4.txt\""

# ---- a hostile file system: what is not a regular file is never written over
# nor opened blocking; sizes are checked before reading (docs/errors.md)
H="$T/hostile"; rm -rf "$H"; mkdir -p "$H/dir"
mkfifo "$H/fifo"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$H/sock"
echo "keep me" > "$H/keep.txt"; ln -s keep.txt "$H/link"
"$CIS2" run --model "$G" --prompt-ids 5,17 -n 2 --receipt "$H/r.txt" >/dev/null 2>&1
"$CIS2" trace --model "$G" --prompt-ids 5,17 -o "$H/t.st" >/dev/null 2>&1
TR=(trace --model "$G" --prompt-ids 5)
row out-receipt-fifo "--receipt naming a FIFO" "" "$CIS2" "${RUN[@]}" "$G" --receipt "$H/fifo"
row out-receipt-socket "--receipt naming a socket" "" "$CIS2" "${RUN[@]}" "$G" --receipt "$H/sock"
row out-receipt-symlink "--receipt naming a symbolic link (its target is not written through)" "" "$CIS2" "${RUN[@]}" "$G" --receipt "$H/link"
row out-receipt-dash "--receipt - (standard output carries the run's results)" "" "$CIS2" "${RUN[@]}" "$G" --receipt -
if mknod "$H/null" c 1 3 2>/dev/null; then
    row out-receipt-device "--receipt naming a character device (as root it would become a file)" "unit_io io.output.device-refused-and-kept" "$CIS2" "${RUN[@]}" "$G" --receipt "$H/null"
    [ -c "$H/null" ] && pass errors.out-device-still-a-device || fail errors.out-device-still-a-device "replaced"
elif [ -z "${ERRORS_DUMP:-}" ]; then skip errors.out-receipt-device "mknod needs root"; fi
row out-trace-fifo "trace -o naming a FIFO" "" "$CIS2" "${TR[@]}" -o "$H/fifo"
row out-trace-dir "trace -o naming a directory" "" "$CIS2" "${TR[@]}" -o "$H/dir"
row out-compare-dash "compare -o - (standard output carries the report)" "" "$CIS2" compare --model "$G" --against "$H/t.st" -o -
if [ -z "${ERRORS_DUMP:-}" ]; then
    [ -p "$H/fifo" ] && [ -S "$H/sock" ] && [ -d "$H/dir" ] && [ -L "$H/link" ] && [ "$(cat "$H/keep.txt")" == "keep me" ] \
        && pass errors.out-nothing-replaced || fail errors.out-nothing-replaced "$(ls -la "$H")"
    # a link planted at the old predictable temporary name PATH.tmp.PID is never
    # followed (exec keeps the shell's pid, so $$ is cis2's pid)
    echo "victim" > "$H/victim"
    sh -c 'ln -s "$1" "$2.tmp.$$"; exec "$3" run --model "$4" --prompt-ids 5,17 -n 2 --receipt "$2"' _ \
        "$H/victim" "$H/planted.txt" "$CIS2" "$G" >/dev/null 2>&1; prc=$?
    sh -c 'ln -s "$1" "$2.tmp.$$"; exec "$3" trace --model "$4" --prompt-ids 5 -o "$2"' _ \
        "$H/victim" "$H/planted.st" "$CIS2" "$G" >/dev/null 2>&1; trc=$?
    [ $prc -eq 0 ] && [ $trc -eq 0 ] && [ "$(cat "$H/victim")" == victim ] && cmp -s "$H/planted.txt" "$H/r.txt" \
        && [ -s "$H/planted.st" ] && pass errors.tmp-planted-symlink-not-followed \
        || fail errors.tmp-planted-symlink-not-followed "rc=$prc/$trc victim=$(cat "$H/victim")"
    rm -f "$H"/planted.*.tmp.*
fi
# the file system refuses the write (a file-size limit): the old file stays, no temporary is left
echo "old trace" > "$H/big.st"
row out-write-fails "the file system refuses the write (ulimit -f)" "unit_io io.atomic.failed-write-keeps-file-and-leaves-no-temp" sh -c 'ulimit -f 1; trap "" XFSZ; exec "$@"' _ "$CIS2" "${TR[@]}" -o "$H/big.st"
if [ -z "${ERRORS_DUMP:-}" ]; then
    [ "$(cat "$H/big.st")" == "old trace" ] && ! ls -a "$H" | grep -q '\.tmp\.' && pass errors.out-failed-write-leaves-no-temp \
        || fail errors.out-failed-write-leaves-no-temp "$(ls -a "$H" | grep tmp; cat "$H/big.st" | head -c 20)"
fi

# an output that is one of the command's inputs would be destroyed by the write
# (a receipt over config.json, a trace over the weights or over the --against
# trace): refused before any work, the input kept byte for byte
cpm oi; ln "$T/oi/model.safetensors" "$T/oi-weights.st"; cp "$H/t.st" "$T/oi-against.st"
"$CIS2" trace --model "$T/untied" --prompt-ids 5,17 -o "$T/oi-diverged.st" >/dev/null 2>&1
printf 'op=rsqrt\nn=1\nx_bits=0x40800000\n' > "$T/op-ok.txt"
row out-is-model-file "--receipt naming the model's own config.json" "" "$CIS2" "${RUN[@]}" "$T/oi" --receipt "$T/oi/config.json"
row out-is-model-hardlink "trace -o naming a hard link to the model's weights" "" "$CIS2" trace --model "$T/oi" --prompt-ids 5 -o "$T/oi-weights.st"
row out-is-against "compare -o naming its own --against trace" "" "$CIS2" compare --model "$G" --prompt-ids 5,17 --against "$T/oi-against.st" -o "$T/oi-against.st"
if [ -z "${ERRORS_DUMP:-}" ]; then
    cmp -s "$T/oi/config.json" "$G/config.json" && cmp -s "$T/oi/model.safetensors" "$G/model.safetensors" \
        && cmp -s "$T/oi-against.st" "$H/t.st" && pass errors.out-is-input-kept \
        || fail errors.out-is-input-kept "an input was written over"
fi

# standard output that cannot be written (a full disk): the results are lost,
# so the command says so and fails; a failed check keeps its status 1
if [ -c /dev/full ]; then
    FULL=(sh -c 'exec "$@" > /dev/full' _)
    row stdout-full "tokenize with standard output on a full disk (/dev/full)" "" "${FULL[@]}" "$CIS2" tokenize --model "$G" hello
    row stdout-full-run "run with standard output on a full disk (its own flush met the error first)" "" "${FULL[@]}" "$CIS2" "${RUN[@]}" "$G"
    row stdout-full-op "cis2 op with standard output on a full disk" "" sh -c "exec \"$CIS2\" op rsqrt < \"$T/op-ok.txt\" > /dev/full"
    row stdout-full-check "diff of diverging traces with standard output on a full disk (the verdict's status stays 1)" "" "${FULL[@]}" "$CIS2" diff "$H/t.st" "$T/oi-diverged.st"
elif [ -z "${ERRORS_DUMP:-}" ]; then skip errors.stdout-full "no /dev/full"; fi

# inputs: a FIFO is refused before a blocking open, a directory or a missing file by name
truncate -s 1G "$H/huge"
cpm in-cfg-fifo; rm "$T/in-cfg-fifo/config.json"; mkfifo "$T/in-cfg-fifo/config.json"
row in-config-fifo "config.json is a FIFO" "" "$CIS2" "${RUN[@]}" "$T/in-cfg-fifo"
cpm in-tok-fifo; rm "$T/in-tok-fifo/tokenizer.json"; mkfifo "$T/in-tok-fifo/tokenizer.json"
row in-tokenizer-fifo "tokenizer.json is a FIFO" "" "$CIS2" "${RUN[@]}" "$T/in-tok-fifo"
cpm in-st-fifo; rm "$T/in-st-fifo/model.safetensors"; mkfifo "$T/in-st-fifo/model.safetensors"
row in-weights-fifo "model.safetensors is a FIFO (needs the model loader's non-blocking open)" "" "$CIS2" "${RUN[@]}" "$T/in-st-fifo"
row in-receipt-fifo "verify a receipt that is a FIFO" "" "$CIS2" verify "$H/fifo" --model "$G"
row in-receipt-dir "verify a receipt that is a directory" "" "$CIS2" verify "$H/dir" --model "$G"
row in-receipt-huge "verify a 1 GiB receipt (refused by its size, unread)" "unit_io io.read-max.1GiB-refused-by-size" "$CIS2" verify "$H/huge" --model "$G"
row in-vector-fifo "conform --vector naming a FIFO" "" "$CIS2" conform --model "$G" --vector "$H/fifo"
row in-vector-huge "conform --vector of 1 GiB" "" "$CIS2" conform --model "$G" --vector "$H/huge"
sed 's/^gen_toks=6$/gen_toks=1000000/' tests/fixtures/llama.vector > "$T/gen-toks.vector"
row conform-gen-toks "conform --vector whose gen_toks disagrees with its generated_token_ids (a run that can never pass)" "" "$CIS2" conform --model "$G" --vector "$T/gen-toks.vector"
row in-trace-fifo "diff a trace that is a FIFO" "" "$CIS2" diff "$H/t.st" "$H/fifo"
row in-dash-diff "diff - (standard input is not read there; was 'cannot open: No such file or directory')" "unit_io io.open-input.dash" "$CIS2" diff - "$H/t.st"
row in-dash-tokenizer "tokenize --tokenizer - (standard input is not read there)" "unit_io io.open-input.dash" "$CIS2" tokenize --tokenizer - hi
# serve's row needs a cis2 built with libmicrohttpd (the aarch64 leg builds without it)
if "$CIS2" serve --model /nonexistent 2>&1 | grep -q 'without libmicrohttpd'; then
    skip errors.in-dash-verifier-dir "this cis2 was built without libmicrohttpd"
else
    row in-dash-verifier-dir "serve --verifier-dir - (a directory; was 'No such file or directory')" "" "$CIS2" serve --model "$G" --verifier-dir -
fi
row in-dash-vectors "suite --vectors - (a directory; was 'cannot open vector folder -: No such file or directory')" "" "$CIS2" suite --vectors - "$CIS2" op
row in-dash-model "run --model - (a directory; was '-/config.json: cannot open: No such file or directory')" "" "$CIS2" run --model - --prompt-ids 1
row in-dash-model-bench "bench --model - (its own load, the same check)" "" "$CIS2" bench --model -
row in-dash-model-tokenize "tokenize --model - (reads DIR/tokenizer.json)" "" "$CIS2" tokenize --model - hi
row in-dash-model-quantize "quantize --model - (its own reader)" "" "$CIS2" quantize --model - --out "$T/q-dash"
row in-trace-huge "diff a 1 GiB file of zeros (its header length is refused before the data is read)" "" "$CIS2" diff "$H/t.st" "$H/huge"
row in-against-fifo "compare --against a FIFO" "" "$CIS2" compare --model "$G" --against "$H/fifo"
row in-tol-fifo "diff --tol naming a FIFO" "" "$CIS2" diff "$H/t.st" "$H/t.st" --tol "$H/fifo"
row in-tol-huge "diff --tol of 1 GiB" "" "$CIS2" diff "$H/t.st" "$H/t.st" --tol "$H/huge"
row in-tokenizer-arg-huge "tokenize --tokenizer of 1 GiB (was read whole into memory, then called invalid JSON)" "" "$CIS2" tokenize --tokenizer "$H/huge" hi
row diff-table-unknown "diff --table naming no built-in table" "" "$CIS2" diff "$H/t.st" "$H/t.st" --table fp16
row diff-table-exact "diff --table with --exact" "" "$CIS2" diff "$H/t.st" "$H/t.st" --table armd --exact
"$CIS2" trace --model "$G" --prompt-ids 5,17 -o "$T/hash.st" --hash-only >/dev/null 2>&1
row diff-hash-only-tol "diff --table (or --tol) with a hash-only trace (it was compared bit for bit instead)" "" "$CIS2" diff "$H/t.st" "$T/hash.st" --table fp32
row compare-hash-only-tol "compare --against a hash-only trace with --table (or --tol)" "" "$CIS2" compare --model "$G" --prompt-ids 5,17 --against "$T/hash.st" --table fp32
python3 - "$H/t.st" "$T/vocab.st" <<'PY'
import sys, struct, json
d = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', d[:8])[0]
h = json.loads(d[8:8 + n]); h['__metadata__']['token_ids'] += ',99999'
hb = json.dumps(h, separators=(',', ':')).encode()
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(hb)) + hb + d[8 + n:])
PY
row compare-against-ids-vocab "compare --against a trace whose token_ids leave the vocabulary (was blamed on --teacher-force)" "" "$CIS2" compare --model "$G" --against "$T/vocab.st"
# a --tol file settles nothing by the order of its lines, and holds no bound
# a check can never meet
printf '* max_rel=1e-3 max_rel=1e-2\n' > "$T/tol-dup.tol"
row tol-duplicate-key "--tol file giving a key twice for the same node" "unit_verify tol.*" "$CIS2" diff "$H/t.st" "$H/t.st" --tol "$T/tol-dup.tol"
printf 'logits max_rel=1e-2\n* max_rel=1e-4\n' > "$T/tol-star.tol"
row tol-star-after-node "--tol file whose '*' line comes after a node's own line for the same key" "unit_verify tol.*" "$CIS2" diff "$H/t.st" "$H/t.st" --tol "$T/tol-star.tol"
printf '* min_cos=2\n' > "$T/tol-cos.tol"
row tol-min-cos-above-1 "--tol min_cos above 1 (no cosine reaches it)" "unit_verify tol.*" "$CIS2" diff "$H/t.st" "$H/t.st" --tol "$T/tol-cos.tol"
printf 'logits top1=2\n' > "$T/tol-top1.tol"
row tol-top1-not-flag "--tol top1 other than 0 or 1 (was called an unknown key)" "unit_verify tol.*" "$CIS2" diff "$H/t.st" "$H/t.st" --tol "$T/tol-top1.tol"
printf '* max_rel=0x1p-3\n' > "$T/tol-hex.tol"
row tol-hex-float "--tol value written as a hex float (strtod took it)" "unit_verify tol.*" "$CIS2" diff "$H/t.st" "$H/t.st" --tol "$T/tol-hex.tol"
printf '* max_rel=1e-999\n' > "$T/tol-under.tol"
row tol-underflow "--tol value that underflows to 0 (was taken as 0)" "unit_verify tol.*" "$CIS2" diff "$H/t.st" "$H/t.st" --tol "$T/tol-under.tol"
row in-tokenizer-arg-fifo "tokenize --tokenizer naming a FIFO" "" "$CIS2" tokenize --tokenizer "$H/fifo" hi
row in-bench-text-fifo "tokenize --bench naming a FIFO" "" "$CIS2" tokenize --model "$G" --bench "$H/fifo"
if [ "$(id -u)" != 0 ]; then
    echo x > "$H/noread"; chmod 000 "$H/noread"
    row in-unreadable "verify a receipt without read permission (the reason, from strerror)" "" "$CIS2" verify "$H/noread" --model "$G"
elif [ -z "${ERRORS_DUMP:-}" ]; then skip errors.in-unreadable "root reads every file"; fi
rm -f "$H/huge"

# ---- receipts stay strict; the CLI is one parser
sed 's/$/\r/' "$H/r.txt" > "$H/r-crlf.txt"
row verify-crlf "a receipt with CRLF line ends (receipts are strict: peers reject them too)" "unit_core receipt.rejects.*" "$CIS2" verify "$H/r-crlf.txt" --model "$G"
row receipt-with-fault "--receipt with --fault (a faulted run must not produce a normal-looking receipt)" "" "$CIS2" "${RUN[@]}" "$G" --fault no-ftz --receipt "$H/f.txt"
row run-fault-arg-alone "run --fault-arg without --fault (nothing to apply it to)" "" "$CIS2" "${RUN[@]}" "$G" --fault-arg 3
row trace-fault-arg-alone "trace --fault-arg without --fault" "" "$CIS2" "${TR[@]}" -o "$H/fa.st" --fault-arg 3
row trace-nodes-absent "trace --nodes naming a node this model does not have (q_norm on llama: a trace of nothing)" "" "$CIS2" trace --model "$G" --prompt-ids 5 --nodes q_norm -o "$T/nodes.st"
row trace-nodes-twice "trace --nodes naming a node twice (was merged silently)" "" "$CIS2" trace --model "$G" --prompt-ids 5 --nodes embed,logits,embed -o "$T/nodes.st"
row trace-layers-twice "trace --layers naming a layer twice, here through a range (was merged silently)" "" "$CIS2" trace --model "$T/mp16" --prompt-ids 5 --layers 0-0,0 -o "$T/nodes.st"
row model-empty "--model ''" "" "$CIS2" run --model "" --prompt-ids 1
row repeat-run "a flag given twice (run)" "" "$CIS2" run --model "$G" --prompt-ids 1 -n 1 -n 2
row repeat-trace "a flag given twice (trace: -o and --output are one flag)" "" "$CIS2" "${TR[@]}" -o "$H/a.st" --output "$H/b.st"
row repeat-diff "a flag given twice (diff)" "" "$CIS2" diff "$H/t.st" "$H/t.st" --brief --brief
row repeat-bench "a flag given twice (bench)" "" "$CIS2" bench --model "$G" --model "$G"
row opt-equals-form "an option written --option=value takes the value after '=' and checks it as the spaced form does" "" "$CIS2" verify "$T/r.txt" --model "$G" --threads=0
# --option=value (the GNU long form) is the same run as --option value
eqa=$("$CIS2" run --model "$G" --prompt-ids 5,6 -n 2 --threads 1 2>&1); eqra=$?
eqb=$("$CIS2" run --model="$G" --prompt-ids=5,6 --n=2 --threads=1 2>&1); eqrb=$?
if [ $eqra -eq 0 ] && [ $eqrb -eq 0 ] && [ "$eqa" = "$eqb" ] && printf '%s' "$eqb" | grep -q CIS2_REF; then
    pass "errors.opt-equals-same-run"
else fail "errors.opt-equals-same-run" "rc $eqra/$eqrb: $(printf '%s' "$eqb" | tail -1)"; fi
row opt-equals-flag "a flag written --flag=value" "" "$CIS2" bench --peak=1
row bench-batch-range "bench --batch with a size outside [1, 4096]" "" "$CIS2" bench --model "$G" --batch 4,0
row bench-batch-list "bench --batch that is not a list of numbers" "" "$CIS2" bench --model "$G" --batch 4,x
row bench-peak-model-flag "bench --peak without --model given a flag of the model run (was ignored silently)" "" "$CIS2" bench --peak --prompt-len 3
row bench-list-twice "bench --positions naming a position twice (its row measured twice)" "" "$CIS2" bench --model "$G" --positions 5,5
row bench-list-too-long "bench --prompt-len with 33 lengths (was called not a list)" "" "$CIS2" bench --model "$G" --prompt-len "$(seq -s, 1 33)"
# a bad flag is refused before --peak measures the ceilings (seconds of work, printed first before)
out=$(timeout 20 "$CIS2" bench --peak --model "$G" --batch 4,0 2>/dev/null); rc=$?
[ $rc -eq 2 ] && [ -z "$out" ] && pass errors.bench-peak-checks-flags-first || fail errors.bench-peak-checks-flags-first "rc=$rc $out"
row repeat-tokenize "a flag given twice (tokenize)" "" "$CIS2" tokenize --model "$G" --model "$G" hi
row repeat-suite "a flag given twice (suite)" "" "$CIS2" suite --timeout 1 --timeout 2 "$CIS2" op
mkdir -p "$T/no-vectors"
row suite-no-vectors "suite --vectors naming a folder without vectors (the folder was not named)" "t_conformance.sh" "$CIS2" suite --vectors "$T/no-vectors" "$CIS2" op
row repeat-op "an extra argument (op)" "" "$CIS2" op rsqrt rsqrt

# ---- strings from files are printed escaped (one line, no terminal control)
cpm esc-dtype; st_edit "$T/esc-dtype" "h['model.norm.weight']['dtype'] = 'I16\x1b[2J\nverdict=WITHIN-TOLERANCE'"
row esc-tensor-dtype "a dtype string with an escape sequence and a newline" "unit_io escape.*" "$CIS2" "${RUN[@]}" "$T/esc-dtype"
mkdir -p "$H/a
b"
row esc-path "a path with a newline and an escape sequence" "" "$CIS2" verify "$H/a
b/"$'\x1b[31m' --model "$G"
