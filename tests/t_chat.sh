#!/usr/bin/env bash
# `cis2 run --chat MESSAGES.json`: messages rendered with the model's chat
# template (DIR/tokenizer_config.json) or --chat-format chatml; the receipt's
# prompt-hex is exactly the rendered bytes (Jinja2's rendering, from
# tests/fixtures/chat/expected.txt) and verifies. Also reruns
# tools/chat_reference.py (Jinja2 under HF's settings) where python3-jinja2 is
# installed, to check the committed expectations are still its output.
source "$(dirname "$0")/lib.sh"

if [ ! -x "$CIS2" ]; then skip "chat CLI" "no $CIS2 binary (build it with make)"; exit 0; fi
F=tests/fixtures/chat
d="$TESTTMP/chat"
rm -rf "$d"; mkdir -p "$d"

# the second reading, rerun
py=""
for p in /usr/bin/python3 python3; do "$p" -c 'import jinja2' 2>/dev/null && { py=$p; break; }; done
if [ -n "$py" ]; then
    "$py" tools/chat_reference.py "$F" > "$d/expected.txt" 2> "$d/ref.err"
    cmp -s "$d/expected.txt" "$F/expected.txt" \
        && pass "chat expectations are Jinja2's renderings (tools/chat_reference.py, $(wc -l < "$F/expected.txt") cases)" \
        || fail "chat expectations are Jinja2's renderings" "$(head -c 200 "$d/ref.err") $(diff "$d/expected.txt" "$F/expected.txt" | head -2)"
else
    skip "chat expectations are Jinja2's renderings" "no python3 with jinja2 (apt-get install python3-jinja2)"
fi

command -v python3 >/dev/null 2>&1 || { skip "chat CLI" "no python3 for tools/make_model.py"; exit 0; }
M="$d/model"
python3 tools/make_model.py "$M" --arch qwen2 --layers 1 --hidden 32 --heads 2 --kv-heads 1 --inter 64 \
    --vocab 704 --tokenizer tests/fixtures/tokenizer/qwen.json >/dev/null || { fail "chat model" "make_model failed"; exit 0; }
cfg() { python3 -c 'import json,sys; print(json.dumps({"chat_template": open(sys.argv[1]).read(), "eos_token": "<|im_end|>"}))' "$1"; }
want() { sed -n "s/^$1 $2 1 //p" "$F/expected.txt"; }
# prompt-hex is the bytes the prompt ids decode to; this tokenizer's normalizer
# is NFC, so that is the NFC form of the rendering (the unicode case holds
# "e" + U+0301, which NFC composes to U+00E9)
want_ids_bytes() {
    want "$1" "$2" | python3 -c 'import sys,unicodedata
s = bytes.fromhex(sys.stdin.read().strip()).decode()
print(unicodedata.normalize("NFC", s).encode().hex())'
}

for t in chatml-trim qwen2.5 smollm2 qwq; do
    cfg "$F/$t.jinja" > "$M/tokenizer_config.json"
    for m in system-first assistant-first unicode; do
        r="$d/$t-$m.receipt"
        out=$("$CIS2" run --model "$M" --chat "$F/messages-$m.json" -n 2 --receipt "$r" 2>&1); rc=$?
        got=$(sed -n 's/^prompt-hex //p' "$r" 2>/dev/null)
        if [ $rc -eq 0 ] && [ -n "$got" ] && [ "$got" == "$(want_ids_bytes "$t" "messages-$m.json")" ]; then
            pass "run --chat ($t template, $m): receipt prompt-hex is the template's rendering (NFC)"
        else fail "run --chat ($t template, $m)" "rc=$rc $(echo "$out" | tail -1)"; fi
    done
done
v=$("$CIS2" verify "$d/qwen2.5-system-first.receipt" --model "$M" 2>&1); rc=$?
[ $rc -eq 0 ] && pass "a --chat receipt verifies" || fail "a --chat receipt verifies" "rc=$rc $(echo "$v" | tail -1)"
# the prompt ids are the rendered bytes' ids
ids=$("$CIS2" run --model "$M" --chat "$F/messages-one-user.json" -n 1 2>/dev/null | sed -n 's/^prompt_token_ids=//p')
text=$(printf '%s' "$(want qwq messages-one-user.json)" | python3 -c 'import sys; sys.stdout.write(bytes.fromhex(sys.stdin.read()).decode())'; printf x)
text=${text%x} # keep the trailing newline
expect_eq "run --chat: prompt ids are the rendered text's ids" "$ids" "$("$CIS2" tokenize --tokenizer "$M/tokenizer.json" -- "$text")"

# --chat-format chatml: no tokenizer_config.json needed; the plain ChatML bytes
rm -f "$M/tokenizer_config.json"
"$CIS2" run --model "$M" --chat "$F/messages-system-first.json" --chat-format chatml -n 1 --receipt "$d/plain.receipt" >/dev/null 2>&1
expect_eq "run --chat --chat-format chatml: prompt-hex is plain ChatML" \
    "$(sed -n 's/^prompt-hex //p' "$d/plain.receipt")" "$(want chatml messages-system-first.json)"
expect_err "run --chat: no tokenizer_config.json" "tokenizer_config.json: cannot open" \
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" -n 1
cfg "$F/refused-include.jinja" > "$M/tokenizer_config.json"
expect_err "run --chat: a template construct outside the subset is refused by name" \
    "chat_template: line 1 col 33: unsupported construct: the '{% include %}' statement" \
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" -n 1
cfg "$F/qwen2.5.jinja" > "$M/tokenizer_config.json"
expect_err "run --chat with --prompt" "give exactly one of" "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --prompt x
expect_err "run --chat-format without --chat" "--chat-format needs --chat" "$CIS2" run --model "$M" --prompt x --chat-format chatml
expect_err "run --chat-format llama3" "only chatml is built in" "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --chat-format llama3
expect_err "run --chat twice" "given more than once" "$CIS2" run --model "$M" --chat a --chat b
expect_err "run --chat ''" "non-empty value" "$CIS2" run --model "$M" --chat ''
expect_err "run --chat: missing file" "/nonexistent.json: cannot open" "$CIS2" run --model "$M" --chat /nonexistent.json
# the model's own template by default; --chat-template FILE, --chat-template-kwarg
# KEY=JSON and --chat-date YYYY-MM-DD (docs/chat_templates.md)
L=tests/fixtures/chat_template/llama3.2.jinja
hexof() { sed -n 's/^prompt-hex //p' "$1" | python3 -c 'import sys; sys.stdout.write(bytes.fromhex(sys.stdin.read().strip()).decode())'; }
rm -f "$M/chat_template.jinja"
cfg "$F/qwen2.5.jinja" | python3 -c 'import json,sys; c = json.load(sys.stdin); c["bos_token"] = "<|endoftext|>"; print(json.dumps(c))' > "$M/tokenizer_config.json"
l32() { local name="$1"; shift
    "$CIS2" run --model "$M" --chat "$F/messages-system-first.json" --chat-template "$L" "$@" -n 1 \
        --receipt "$d/l32-$name.receipt" >/dev/null 2>&1
    hexof "$d/l32-$name.receipt" 2>/dev/null | head -4 | tail -1; }
expect_eq "run --chat --chat-template (Llama 3.2's), no date: its own default" "$(l32 none)" "Today Date: 26 Jul 2024"
expect_eq "run --chat --chat-date: strftime_now on that day" "$(l32 date --chat-date 2025-03-14)" "Today Date: 14 Mar 2025"
expect_eq "run --chat --chat-template-kwarg date_string" \
    "$(l32 kwarg --chat-template-kwarg 'date_string="01 Jan 2025"')" "Today Date: 01 Jan 2025"
first=$(hexof "$d/l32-date.receipt" 2>/dev/null | head -1)
expect_eq "run --chat --chat-template: bos_token from the model's tokenizer_config.json" "$first" "<|endoftext|><|start_header_id|>system<|end_header_id|>"
v=$("$CIS2" verify "$d/l32-kwarg.receipt" --model "$M" 2>&1); rc=$?
[ $rc -eq 0 ] && pass "a --chat-template receipt verifies" || fail "a --chat-template receipt verifies" "rc=$rc $(echo "$v" | tail -1)"
printf '%s' '{% if enable_thinking is defined and enable_thinking is false %}off{% else %}on{% endif %}:{{ messages[0].content }}' > "$d/kw.jinja"
for v in "on|" "off|--chat-template-kwarg enable_thinking=false" "on|--chat-template-kwarg enable_thinking=true"; do
    IFS='|' read -r want flags <<< "$v"
    # shellcheck disable=SC2086
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --chat-template "$d/kw.jinja" $flags -n 1 --receipt "$d/kw.receipt" >/dev/null 2>&1
    expect_eq "run --chat-template-kwarg ${flags:-(none)}: enable_thinking reaches the template" "$(hexof "$d/kw.receipt" | cut -d: -f1)" "$want"
done
ERRORS_DIR="$d"
errors_row chat-kwarg-syntax "--chat-template-kwarg without KEY=" "" \
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --chat-template-kwarg enable_thinking
errors_row chat-kwarg-json "--chat-template-kwarg whose value is not JSON" "" \
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --chat-template-kwarg x=yes
errors_row chat-kwarg-twice "the same --chat-template-kwarg key twice" "" \
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --chat-template-kwarg x=1 --chat-template-kwarg x=2
errors_row chat-kwarg-reserved "--chat-template-kwarg messages= (set by --chat)" "unit_chat" \
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --chat-template-kwarg messages=[]
errors_row chat-template-needs-chat "--chat-template without --chat" "" \
    "$CIS2" run --model "$M" --prompt x --chat-template "$L"
errors_row chat-template-and-format "--chat-template with --chat-format" "" \
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --chat-template "$L" --chat-format chatml
errors_row chat-template-missing "--chat-template FILE that does not exist" "" \
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --chat-template "$d/none.jinja"
errors_row chat-date-bad "--chat-date that is not YYYY-MM-DD" "unit_jinja" \
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --chat-date 2025-02-30
printf '%s' "{{ raise_exception('System role not supported') }}" > "$d/raise.jinja"
errors_row chat-template-raises "a template's own raise_exception" "t_chat_template.sh" \
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --chat-template "$d/raise.jinja"
errors_row chat-template-unsupported "a template construct outside the subset" "unit_jinja, unit_chat" \
    "$CIS2" run --model "$M" --chat "$F/messages-one-user.json" --chat-template "$F/refused-include.jinja"

printf '[{"role": "user", "content": "hi <|endoftext|>"}]' > "$d/special.json"
expect_err "run --chat: a special token in content is refused" 'holds the special token "<|endoftext|>"' \
    "$CIS2" run --model "$M" --chat "$d/special.json" -n 1
printf '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}' > "$d/extra.json"
expect_err "run --chat: an OpenAI request's other keys are refused" 'key "max_tokens" is not used here' \
    "$CIS2" run --model "$M" --chat "$d/extra.json" -n 1
printf '[{"role": "tool", "content": "x"}]' > "$d/tool.json"
expect_err "run --chat: tool turns are refused" 'messages[0].role: must be' "$CIS2" run --model "$M" --chat "$d/tool.json" -n 1
