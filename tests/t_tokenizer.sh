#!/usr/bin/env bash
# CLI tests for cis2 tokenize / detokenize (spec §3.1). Golden ids: spec
# §3.1.7, or cross-checked against ../shared/tools/bpe_oracle.py.
source "$(dirname "$0")/lib.sh"

if [ ! -x "$CIS2" ]; then skip "tokenizer CLI" "no $CIS2 binary (build it with make)"; exit 0; fi

# usage errors: one line, exit 2
expect_err "tokenize: no tokenizer given" "exactly one of --tokenizer FILE or --model DIR" "$CIS2" tokenize "x"
expect_err "tokenize: unknown flag" "unknown option '--frob'" "$CIS2" tokenize --frob x
expect_err "tokenize: flag without value" "needs a value" "$CIS2" tokenize x --tokenizer
expect_err "tokenize: no text" "usage" "$CIS2" tokenize --tokenizer /nonexistent
expect_err "tokenize: two texts" "unexpected argument" "$CIS2" tokenize --tokenizer /nonexistent a b
expect_err "tokenize: both --tokenizer and --model" "exactly one" "$CIS2" tokenize --tokenizer a --model b x
expect_err "tokenize: missing file" "/nonexistent/tokenizer.json: cannot open" "$CIS2" tokenize --model /nonexistent x
expect_err "detokenize: bad id list" "bad token id list" "$CIS2" detokenize --tokenizer /nonexistent 1,,2
"$CIS2" tokenize --frob x >/dev/null 2>&1; expect_eq "tokenize: bad flag exits 2" "$?" "2"

# an unsupported normalizer (NFKC; NFC is Qwen2's and supported) is refused with one line
bad="$TESTTMP/tok_bad.json"
printf '{"normalizer": {"type": "NFKC"}, "model": {"type": "BPE", "vocab": {}, "merges": []}}' > "$bad"
expect_err "tokenize: unsupported normalizer named" 'normalizer: unsupported type "NFKC"' "$CIS2" tokenize --tokenizer "$bad" x
printf '{"model": {"type": "BPE", "vocab": {' > "$bad"
expect_err "tokenize: truncated tokenizer.json" "invalid JSON" "$CIS2" tokenize --tokenizer "$bad" x

dir=$(find_real_model tokenizer.json) || { skip "tokenizer CLI on SmolLM2" "no SmolLM2 tokenizer.json (set CIS2_SMOLLM2_DIR)"; exit 0; }
tok="$dir/tokenizer.json"

expect_eq "tokenize: spec §3.1.7 Once upon a time" "$("$CIS2" tokenize --tokenizer "$tok" "Once upon a time")" "6403,1980,253,655"
expect_eq "tokenize: --model DIR" "$("$CIS2" tokenize --model "$dir" "Once upon a time")" "6403,1980,253,655"
expect_eq "detokenize: spec §3.1.7 ids" "$("$CIS2" detokenize --tokenizer "$tok" 6403,1980,253,655)" "Once upon a time"
out=$("$CIS2" detokenize --model "$dir" 6403,1980,253,655 | od -An -tx1 | tr -d ' \n')
expect_eq "detokenize: text then exactly one newline" "$out" "4f6e63652075706f6e20612074696d650a"
# bpe_oracle.py cross-checked
expect_eq "tokenize: im_end inside a sentence" "$("$CIS2" tokenize --tokenizer "$tok" "x<|im_end|>y <|im_start|>user")" "104,2,105,216,1,4093"
expect_eq "tokenize: whitespace runs" "$("$CIS2" tokenize --tokenizer "$tok" $'a\tb\t\tc')" "81,197,82,197,197,83"
expect_eq "tokenize: -- ends options" "$("$CIS2" tokenize --tokenizer "$tok" -- "-5")" "29,37"
expect_eq "tokenize: empty text" "$("$CIS2" tokenize --tokenizer "$tok" "")" ""
expect_err "tokenize: invalid UTF-8" "not valid UTF-8" "$CIS2" tokenize --tokenizer "$tok" $'ab\xff'
expect_err "detokenize: id >= vocab" "outside the vocabulary" "$CIS2" detokenize --tokenizer "$tok" 1,49152
expect_err "detokenize: half a character" "not valid UTF-8" "$CIS2" detokenize --tokenizer "$tok" 10813

# round trips through the CLI
for s in "Once upon a time" $'  \n\n x  y\t' "Héllo мир 你好 🙂👍🏽 é" "it's 1,234.5 <|endoftext|>"; do
    ids=$("$CIS2" tokenize --tokenizer "$tok" "$s")
    expect_eq "round trip: $(printf '%q' "$s")" "$("$CIS2" detokenize --tokenizer "$tok" "$ids")" "$s"
done
