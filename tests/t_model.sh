#!/usr/bin/env bash
# The checkpoint surface a CIS-2 peer or a Hugging Face export may hand us,
# read as the spec reads it (§2.2, §9.1, §11.1, §2.3): configs without
# model_type, q/k/v biases in a Llama-type checkpoint, every tie/lm_head
# combination, rms_norm_eps of 0 or subnormal — and a bad safetensors header
# refused before the file's data is read.
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/model"; rm -rf "$T"; mkdir -p "$T"
MK="python3 tools/make_model.py"
P=5,17,42,7,99
# cfg_edit DIR PYTHON (on the dict c)
cfg_edit() { python3 - "$1/config.json" "$2" <<'PY'
import sys, json
p, expr = sys.argv[1], sys.argv[2]
c = json.load(open(p)); exec(expr); open(p, 'w').write(json.dumps(c, indent=2))
PY
}
# variant NAME FROM [PYTHON]: a copy of FROM with its config edited
variant() { rm -rf "$T/$1"; cp -r "$T/$2" "$T/$1"; [ -z "${3:-}" ] || cfg_edit "$T/$1" "$3"; }
# outcome DIR: "ids argmax" of a 6-token run (stderr to DIR.err, exit status to DIR.rc)
outcome() {
    local out
    out=$("$CIS2" run --model "$1" --prompt-ids $P -n 6 2> "$1.err"); echo $? > "$1.rc"
    echo "$(echo "$out" | sed -n 's/^generated_token_ids=//p') $(echo "$out" | sed -n 's/^argmax_digest=//p')"
}
witness() { "$CIS2" run --model "$1" --prompt-ids $P -n 6 2>/dev/null | sed -n 's/^CIS2_REF digest=\([0-9a-f]*\).*/\1/p'; }
# same NAME DIR REFDIR [WARNING-SUBSTRING]: DIR runs (exit 0) with REFDIR's ids and argmax
# digest; stderr empty, or exactly one line holding the warning.
same() {
    local name="$1" got want nerr
    got=$(outcome "$2"); want=$(outcome "$3")
    nerr=$(grep -c . "$2.err")
    if [ "$(cat "$2.rc")" != 0 ]; then fail "$name" "exit $(cat "$2.rc"): $(cat "$2.err")"
    elif [ "$got" != "$want" ] || [ "$got" = " " ]; then fail "$name" "got '$got' want '$want'"
    elif [ -z "${4:-}" ] && [ "$nerr" -ne 0 ]; then fail "$name" "unexpected stderr: $(cat "$2.err")"
    elif [ -n "${4:-}" ] && { [ "$nerr" -ne 1 ] || ! grep -qF "$4" "$2.err"; }; then
        fail "$name" "wanted one warning line with '$4', got: $(cat "$2.err")"
    else pass "$name"; fi
}

$MK "$T/tied" --layers 1 >/dev/null
$MK "$T/untied" --layers 1 --untied --dtype f32 >/dev/null   # same seed: same embedding and layers
$MK "$T/untied-bf16" --layers 1 --untied >/dev/null
$MK "$T/qwen2" --arch qwen2 --heads 4 --kv-heads 1 --hidden 32 >/dev/null

# --- §2.2: model_type is not among the fields the spec reads
variant untied-notype untied-bf16 "del c['model_type']; del c['architectures']"
variant untied-llama untied-bf16 "del c['architectures']; c['model_type'] = 'llama'"
same config.no-model_type-is-llama "$T/untied-notype" "$T/untied-llama"
wa=$(witness "$T/untied-notype"); wb=$(witness "$T/untied-llama")
[ -n "$wa" ] && [ "$wa" != "$wb" ] && pass config.no-model_type-witness-binds-the-config-bytes \
    || fail config.no-model_type-witness-binds-the-config-bytes "$wa vs $wb"
variant qwen2-arch qwen2 "del c['model_type']"          # architectures: [Qwen2ForCausalLM]
same config.architectures-names-qwen2 "$T/qwen2-arch" "$T/qwen2"
variant qwen2-arch-nobias qwen2 "del c['model_type']; c['architectures'] = ['LlamaForCausalLM']"
same config.architectures-llama-with-biases "$T/qwen2-arch-nobias" "$T/qwen2"
variant bad-type tied "c['model_type'] = 'mistral'"
expect_err config.unknown-model_type-refused "field \"model_type\" is not one of the supported" \
    "$CIS2" run --model "$T/bad-type" --prompt-ids 1

# --- §9.1: the bias tensors decide, whatever attention_bias says or omits
for ab in absent false true; do
    e="c['model_type'] = 'llama'; c['architectures'] = ['LlamaForCausalLM']"
    [ $ab = absent ] || e="$e; c['attention_bias'] = $([ $ab = true ] && echo True || echo False)"
    variant "llama-bias-$ab" qwen2 "$e"
    same "bias.llama-type-applies-qkv-biases.attention_bias-$ab" "$T/llama-bias-$ab" "$T/qwen2"
done
# without the biases the run differs (the check above can fail)
variant qwen2-asis qwen2
[ "$(outcome "$T/qwen2-asis")" != "$(outcome "$T/tied")" ] && pass bias.control-differs || fail bias.control-differs ""
# an o_proj bias is not part of CIS-2: refused, never ignored
rm -rf "$T/obias"; cp -r "$T/qwen2" "$T/obias"; cfg_edit "$T/obias" "c['model_type'] = 'llama'"
python3 - "$T/obias/model.safetensors" <<'PY'
import sys, struct, json
p = sys.argv[1]; d = open(p, 'rb').read(); n = struct.unpack('<Q', d[:8])[0]
h = json.loads(d[8:8 + n]); data = d[8 + n:]
h['model.layers.0.self_attn.o_proj.bias'] = {'dtype': 'BF16', 'shape': [32], 'data_offsets': [len(data), len(data) + 64]}
hb = json.dumps(h, separators=(',', ':')).encode()
open(p, 'wb').write(struct.pack('<Q', len(hb)) + hb + data + b'\0' * 64)
PY
expect_err bias.o_proj-bias-refused "unexpected tensor \"model.layers.0.self_attn.o_proj.bias\"" \
    "$CIS2" run --model "$T/obias" --prompt-ids 1

# --- §11.1: which matrix is the LM head
variant notie tied "del c['tie_word_embeddings']"
same head.no-tie-field-no-lm_head-is-the-embedding "$T/notie" "$T/tied"
variant tied-with-head untied "c['tie_word_embeddings'] = True"
same head.tied-with-lm_head-uses-the-embedding "$T/tied-with-head" "$T/tied" \
    'config.json says tie_word_embeddings=true, so the file'"'"'s "lm_head.weight" is ignored'
variant untied-no-head tied "c['tie_word_embeddings'] = False"
same head.untied-without-lm_head-uses-the-embedding "$T/untied-no-head" "$T/tied" \
    'says tie_word_embeddings=false but the file has no "lm_head.weight"'
variant notie-with-head untied "del c['tie_word_embeddings']"
variant untied-asis untied
same head.no-tie-field-with-lm_head-uses-it "$T/notie-with-head" "$T/untied-asis"
[ "$(outcome "$T/untied-asis")" != "$(outcome "$T/tied")" ] && pass head.control-differs || fail head.control-differs ""
# the warning reaches verify's stderr too, and the run's receipt verifies
"$CIS2" run --model "$T/tied-with-head" --prompt-ids $P -n 3 --receipt "$T/tw.txt" >/dev/null 2>&1
out=$("$CIS2" verify "$T/tw.txt" --model "$T/tied-with-head" 2>"$T/tw.err"); rc=$?
[ $rc -eq 0 ] && [ "$(grep -c . "$T/tw.err")" -eq 1 ] && pass head.warned-receipt-verifies || fail head.warned-receipt-verifies "rc=$rc $(cat "$T/tw.err")"

# --- §2.3: rms_norm_eps of 0 or subnormal is computed as written (DAZ reads a subnormal as 0)
variant eps0 tied "c['rms_norm_eps'] = 0"
variant eps-sub tied "c['rms_norm_eps'] = 1e-40"
variant eps-tiny tied "c['rms_norm_eps'] = 1e-50"
same eps.subnormal-runs "$T/eps-sub" "$T/eps0"
same eps.underflow-runs "$T/eps-tiny" "$T/eps0"
# every traced node bit-identical to eps = 0 (and not to eps = 1e-5)
for d in eps-sub eps-tiny eps0 tied; do "$CIS2" trace --model "$T/$d" --prompt-ids $P -o "$T/$d.st" >/dev/null 2>&1; done
verdict() { "$CIS2" diff "$T/$1.st" "$T/$2.st" --exact 2>&1 | sed -n 's/^verdict=//p'; }
expect_eq eps.subnormal-is-zero-at-every-node "$(verdict eps-sub eps0)" IDENTICAL
expect_eq eps.underflow-is-zero-at-every-node "$(verdict eps-tiny eps0)" IDENTICAL
expect_eq eps.control-differs "$(verdict eps0 tied)" DIVERGED
variant eps-neg tied "c['rms_norm_eps'] = -1e-5"
expect_err eps.negative-refused "field \"rms_norm_eps\" must not be negative" "$CIS2" run --model "$T/eps-neg" --prompt-ids 1

# --- a bad header is refused before the data is read (a 4 GiB sparse file
# under a 1 GiB address-space limit: reading or mapping it would fail first)
if ! bash -c 'ulimit -v 1048576; "$0" selftest >/dev/null 2>&1' "$CIS2" 2>/dev/null; then
    skip load.header-first "this build cannot run under a 1 GiB address-space limit (sanitizer shadow memory?)"
    exit 0
fi
rm -rf "$T/sparse"; cp -r "$T/tied" "$T/sparse"
python3 - "$T/sparse/model.safetensors" <<'PY'
import sys, struct
h = b'{"model.norm.weight":{"dtype":"I16","shape":[64],"data_offsets":[0,128]}}'
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<Q', len(h)) + h); f.truncate(4 << 30)
PY
out=$( (ulimit -v 1048576; "$CIS2" run --model "$T/sparse" --prompt-ids 1) 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && [ "$(echo "$out" | grep -c .)" -eq 1 ] && echo "$out" | grep -q 'unsupported dtype "I16"' \
    && pass load.bad-header-refused-before-reading-the-data || fail load.bad-header-refused-before-reading-the-data "rc=$rc $out"
# a header that contradicts config.json: refused before the data too
python3 - "$T/sparse/model.safetensors" <<'PY'
import sys, struct
h = b'{"model.norm.weight":{"dtype":"F32","shape":[1073741760],"data_offsets":[0,4294967040]}}'
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<Q', len(h)) + h); f.truncate(8 + len(h) + 4294967040)
PY
out=$( (ulimit -v 1048576; "$CIS2" run --model "$T/sparse" --prompt-ids 1) 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && [ "$(echo "$out" | grep -c .)" -eq 1 ] && echo "$out" | grep -q 'missing tensor "model.embed_tokens.weight"' \
    && pass load.tensor-table-checked-before-reading-the-data || fail load.tensor-table-checked-before-reading-the-data "rc=$rc $out"
rm -rf "$T/sparse"
