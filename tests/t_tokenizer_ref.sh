#!/usr/bin/env bash
# The tokenizer's second readings, rerun: tools/tok_reference.py must still
# produce exactly the committed fixtures that unit_tokenizer checks the C code
# against (tests/fixtures/tokenizer/), its regex reading must agree with
# Oniguruma (tokenizers' own engine, Debian libonig5) where installed, and
# src/model/unicode_tables.c must be tools/gen_unicode_tables.py's output.
source "$(dirname "$0")/lib.sh"

if ! command -v python3 >/dev/null 2>&1; then
    skip "tokenizer reference" "no python3"
    exit 0
fi
out="$TESTTMP/tokfx"
rm -rf "$out"
if python3 tools/tok_reference.py fixtures "$out" 2> "$TESTTMP/tokfx.err"; then
    d=$(diff -r "$out" tests/fixtures/tokenizer | head -3)
    expect_eq "reference fixtures are tools/tok_reference.py's output (4 tokenizers, cases, splits)" "$d" ""
else
    fail "reference fixtures regenerate" "$(tail -1 "$TESTTMP/tokfx.err")"
fi

for t in qwen llama3 gpt2split; do
    o=$(python3 tools/tok_reference.py check "tests/fixtures/tokenizer/$t.json" 11 300 2>&1)
    case "$o" in
    *SKIP-ONIG*) skip "regex reading vs Oniguruma ($t)" "libonig.so.5 not installed (apt-get install libonig5)" ;;
    *" 0 mismatches"*) pass "regex reading vs Oniguruma ($t): $(echo "$o" | tail -1)" ;;
    *) fail "regex reading vs Oniguruma ($t)" "$(echo "$o" | tr '\n' ' ' | cut -c1-300)" ;;
    esac
    case "$o" in
    *"DerivedAge.txt not installed"*) ;;
    *"Unicode <= 9.0"*) pass "reference strings use only Unicode <= 9.0 code points ($t)" ;;
    *) fail "reference strings use only Unicode <= 9.0 code points ($t)" "$(echo "$o" | head -1)" ;;
    esac
done

if [ -f /usr/share/unicode/DerivedAge.txt ] && command -v clang-format >/dev/null 2>&1; then
    if python3 tools/gen_unicode_tables.py 2> "$TESTTMP/uc.err" | clang-format --assume-filename=x.c > "$TESTTMP/unicode_tables.c" \
        && [ -s "$TESTTMP/unicode_tables.c" ]; then
        cmp -s "$TESTTMP/unicode_tables.c" src/model/unicode_tables.c \
            && pass "src/model/unicode_tables.c is tools/gen_unicode_tables.py's output" \
            || fail "src/model/unicode_tables.c is tools/gen_unicode_tables.py's output" "regenerate it (see the script)"
    else
        fail "tools/gen_unicode_tables.py runs" "$(tail -1 "$TESTTMP/uc.err")"
    fi
else
    skip "unicode tables regenerate" "needs /usr/share/unicode (unicode-data) and clang-format"
fi
