#!/usr/bin/env bash
# `cis2 serve`'s POST /v1/chat/completions over real HTTP on 127.0.0.1 (servers
# started and stopped here): messages rendered with the model's ChatML template
# (tokenizer_config.json) or --chat-format chatml; every receipt byte-identical
# to `cis2 run --chat` on the same messages and verified by `cis2 verify`;
# chat.completion objects, chat.completion.chunk streams (role first, deltas
# adding up, the cis2 object last, [DONE]); the refusals (roles, special tokens
# in content, sampling, a model without a template); and the official OpenAI
# client's chat.completions.create (tests/serve/openai_chat.mjs).
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/serve_chat"; rm -rf "$T"; mkdir -p "$T"
F=tests/fixtures/chat

command -v python3 >/dev/null || { skip serve.chat "no python3 for tools/make_model.py"; exit 0; }
serve_setup serve.chat

# A Qwen2-shaped fixture with the Qwen-structured tokenizer (NFC normalizer, ChatML
# special tokens) and Qwen2.5's template, as in tests/t_chat.sh; seed 7 makes it answer in
# valid UTF-8 ("IIIII"), so the text checks compare real text.
M="$T/qm"
python3 tools/make_model.py "$M" --arch qwen2 --layers 1 --hidden 32 --heads 2 --kv-heads 1 \
    --inter 64 --vocab 704 --seed 7 --tokenizer tests/fixtures/tokenizer/qwen.json >/dev/null \
    || { fail serve.chat.fixture "make_model.py failed"; exit 0; }
python3 -c 'import json,sys; print(json.dumps({"chat_template": open(sys.argv[1]).read()}))' \
    "$F/qwen2.5.jinja" > "$M/tokenizer_config.json"
cp -r "$M" "$T/plain"; rm "$T/plain/tokenizer_config.json"   # the same weights, no template

# body FILE.json EXTRA-JSON-MEMBERS: a chat request for the messages in FILE
body() { python3 -c 'import json,sys; r={"model":"qm","messages":json.load(open(sys.argv[1]))["messages"]}; r.update(json.loads(sys.argv[2])); print(json.dumps(r))' "$@"; }
solo() { # solo OUT ARGS...: the receipt of `cis2 run --chat` on the same messages, alone
    local out="$1"; shift
    "$CIS2" run "$@" --receipt "$out" > "$T/solo.out" 2>&1
}

start main --model "$M" --threads 1 --ctx 256 || exit 0
U="http://127.0.0.1:$PORT"
grep -q 'chat/completions answers 400' "$T/main.log" && fail serve.chat.template-loaded "$(cat "$T/main.log")" \
    || pass serve.chat.template-loaded

# Non-streamed: a chat.completion whose receipt is `cis2 run --chat` byte for byte, and verifies.
for m in system-first unicode; do
    body "$F/messages-$m.json" '{"max_tokens":5}' > "$T/$m.req"
    C "$U/v1/chat/completions" -d @"$T/$m.req" > "$T/$m.json"
    jget "$T/$m.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/$m.receipt"
    solo "$T/solo-$m.receipt" --model "$M" --chat "$F/messages-$m.json" -n 5 --stop-at-eos
    if [ -s "$T/$m.receipt" ] && cmp -s "$T/$m.receipt" "$T/solo-$m.receipt"; then
        pass "serve.chat.$m.receipt-equals-run-chat"
    else fail "serve.chat.$m.receipt-equals-run-chat" "$(head -c 300 "$T/$m.json") $(diff "$T/$m.receipt" "$T/solo-$m.receipt" | head -4)"; fi
    "$CIS2" verify "$T/$m.receipt" --model "$M" > "$T/v.out" 2>&1 && pass "serve.chat.$m.cis2-verify" \
        || fail "serve.chat.$m.cis2-verify" "$(tail -2 "$T/v.out")"
done
# prompt-hex is what the ids decode to: the NFC form of the rendering (U+0065 U+0301 -> U+00E9)
want_hex=$(sed -n 's/^qwen2.5 messages-unicode.json 1 //p' "$F/expected.txt" | python3 -c 'import sys,unicodedata
print(unicodedata.normalize("NFC", bytes.fromhex(sys.stdin.read().strip()).decode()).encode().hex())')
expect_eq serve.chat.unicode.prompt-hex-is-nfc-rendering "$(sed -n 's/^prompt-hex //p' "$T/unicode.receipt")" "$want_hex"
expect_eq serve.chat.shape "$(jget "$T/system-first.json" '[d["object"], d["id"][:9], d["choices"][0]["message"]["role"], d["choices"][0]["finish_reason"], d["usage"]["completion_tokens"], d["usage"]["prompt_tokens"] == len(d["cis2"]["prompt_token_ids"])]')" \
    '["chat.completion", "chatcmpl-", "assistant", "length", 5, true]'
solo_text=$("$CIS2" run --model "$M" --chat "$F/messages-system-first.json" -n 5 --stop-at-eos | sed -n 's/^text=//p')
expect_eq serve.chat.content-is-run-text "$(jget "$T/system-first.json" 'json.dumps(d["choices"][0]["message"]["content"])')" "$solo_text"
# Content as OpenAI's array of text parts: the texts joined with "\n" (vLLM's rule), so the
# receipt is the one for that joined string (`cis2 run --chat` of it, alone)
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["messages"]
for x in m: x["content"]=[{"type":"text","text":t} for t in x["content"].split(" ")]
print(json.dumps({"model":"qm","messages":m,"max_tokens":5}))
for x in m: x["content"]="\n".join(p["text"] for p in x["content"])
json.dump({"messages":m}, open(sys.argv[2],"w"))' "$F/messages-system-first.json" "$T/parts-joined.json" > "$T/parts.req"
C "$U/v1/chat/completions" -d @"$T/parts.req" > "$T/parts.json"
jget "$T/parts.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/parts.receipt"
solo "$T/solo-parts.receipt" --model "$M" --chat "$T/parts-joined.json" -n 5 --stop-at-eos
grep -q ' ' "$F/messages-system-first.json" && [ -s "$T/parts.receipt" ] && cmp -s "$T/parts.receipt" "$T/solo-parts.receipt" \
    && pass serve.chat.content-parts-joined-with-newlines || fail serve.chat.content-parts-joined-with-newlines "$(head -c 300 "$T/parts.json")"
# max_completion_tokens is max_tokens' other name: the same response
body "$F/messages-system-first.json" '{"max_completion_tokens":5}' > "$T/mct.req"
C "$U/v1/chat/completions" -d @"$T/mct.req" > "$T/mct.json"
expect_eq serve.chat.max-completion-tokens "$(jget "$T/mct.json" 'd["cis2"]["receipt"]')" "$(jget "$T/system-first.json" 'd["cis2"]["receipt"]')"
# no max_tokens: the rest of the context (--ctx 256), unless EOS comes first
body "$F/messages-system-first.json" '{}' > "$T/nomax.req"
C "$U/v1/chat/completions" -d @"$T/nomax.req" > "$T/nomax.json"
expect_eq serve.chat.default-max-tokens-is-rest-of-context \
    "$(jget "$T/nomax.json" 'd["usage"]["prompt_tokens"] + d["usage"]["completion_tokens"] - 1 == 256 or d["cis2"]["stopped_at_eos"]')" true

# Streamed: the role first, content deltas that add up, the final chunk with the same receipt, [DONE].
body "$F/messages-system-first.json" '{"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}' > "$T/s.req"
C -N -D "$T/s.headers" "$U/v1/chat/completions" -d @"$T/s.req" > "$T/s.sse"
python3 - "$T/s.sse" "$T/system-first.json" "$T/solo-system-first.receipt" > "$T/s.check" 2>&1 <<'EOF'
import json, sys
ev = open(sys.argv[1]).read().split('\n\n')
assert ev[-1] == '' and ev[-2] == 'data: [DONE]', 'does not end with [DONE]'
chunks = [json.loads(e[6:]) for e in ev[:-2]]
assert all(c['object'] == 'chat.completion.chunk' for c in chunks), 'object'
assert len({c['id'] for c in chunks}) == 1 and chunks[0]['id'].startswith('chatcmpl-'), 'ids'
first = chunks[0]['choices'][0]
assert first['delta'] == {'role': 'assistant', 'content': ''} and first['finish_reason'] is None, first
assert all('role' not in c['choices'][0]['delta'] for c in chunks[1:] if c['choices']), 'role repeated'
text = ''.join(c['choices'][0]['delta'].get('content', '') for c in chunks if c['choices'])
plain = json.load(open(sys.argv[2]))
assert text == plain['choices'][0]['message']['content'], 'streamed %r != %r' % (text, plain['choices'][0]['message']['content'])
last, usage = chunks[-2], chunks[-1]
assert last['choices'][0]['finish_reason'] == 'length' and last['choices'][0]['delta'] == {}, last['choices']
assert last['cis2']['receipt'] == open(sys.argv[3]).read(), 'receipt differs'
assert usage['choices'] == [] and usage['usage']['completion_tokens'] == 5, usage
# OpenAI: with include_usage, every other chunk has "usage": null (a client adding up the
# usage of every chunk, as LangChain does, counted the tokens twice when the last had it too)
assert all('usage' in c and c['usage'] is None for c in chunks[:-1]), [c.get('usage', '-') for c in chunks]
print('ok')
EOF
expect_eq serve.chat.stream.role-deltas-receipt-done "$(cat "$T/s.check")" ok
# stream_options.include_obfuscation (OpenAI's padding field, never added here) is taken.
body "$F/messages-system-first.json" '{"max_tokens":1,"stream":true,"stream_options":{"include_obfuscation":false}}' > "$T/obf.req"
expect_eq serve.chat.stream.include-obfuscation "$(C -N "$U/v1/chat/completions" -d @"$T/obf.req" | tail -c 14)" "data: [DONE]"

# The text is the generated ids' bytes decoded as UTF-8 with one U+FFFD per maximal invalid
# subpart (Python's errors="replace"). This fixture answers "niño" with an id that starts
# with the end of one character and ends with the start of another ("\xa5本の首都\xe3\x81",
# a merge across characters): its text was all U+FFFD while ids waited to decode to valid
# UTF-8 together, which these never do.
C "$U/v1/completions" -d '{"model":"qm","prompt":"niño","max_tokens":8}' > "$T/straddle.json"
C -N "$U/v1/completions" -d '{"model":"qm","prompt":"niño","max_tokens":8,"stream":true}' > "$T/straddle.sse"
python3 - "$T/straddle.json" "$T/straddle.sse" "$M/tokenizer.json" > "$T/straddle.check" 2>&1 <<'EOF'
import json, sys
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256 + n); n += 1
dec = {chr(c): b for b, c in zip(bs, cs)}
tok = json.load(open(sys.argv[3]))
ib = {i: bytes(dec[ch] for ch in t) for t, i in tok['model']['vocab'].items()}
ib.update({a['id']: a['content'].encode() for a in tok.get('added_tokens', [])})
d = json.load(open(sys.argv[1]))
want = b''.join(ib.get(i, b'') for i in d['cis2']['generated_token_ids']).decode('utf-8', 'replace')
got = d['choices'][0]['text']
assert got == want, 'text %r != %r' % (got, want)
assert '本の首都' in got, got
ev = [e for e in open(sys.argv[2], 'rb').read().decode('utf-8').split('\n\n') if e and not e.startswith(':')]
assert ev[-1] == 'data: [DONE]'
streamed = ''.join(json.loads(e[6:])['choices'][0]['text'] for e in ev[:-1])
assert streamed == want, 'streamed %r != %r' % (streamed, want)
print('ok')
EOF
expect_eq serve.chat.text-is-utf8-replace-decoding "$(cat "$T/straddle.check")" ok
# A stop string that ends in the character the second of those ids completes ("首都" + "づ"):
# found at that id (k = 2), so the receipt is `cis2 run -n 2`; the stream never sends any of it.
C "$U/v1/completions" -d '{"model":"qm","prompt":"niño","max_tokens":8,"stop":["首都づ"]}' > "$T/straddle-stop.json"
expect_eq serve.chat.straddle-stop "$(jget "$T/straddle-stop.json" '[d["choices"][0]["text"], d["choices"][0]["finish_reason"], len(d["cis2"]["generated_token_ids"])]')" \
    '["\ufffd\u672c\u306e", "stop", 2]'
jget "$T/straddle-stop.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/straddle-stop.receipt"
"$CIS2" run --model "$M" --prompt "niño" -n 2 --stop-at-eos --receipt "$T/solo-straddle-stop.receipt" > /dev/null 2>&1
cmp -s "$T/straddle-stop.receipt" "$T/solo-straddle-stop.receipt" && pass serve.chat.straddle-stop.receipt-equals-run-n-2 \
    || fail serve.chat.straddle-stop.receipt-equals-run-n-2 "$(diff "$T/straddle-stop.receipt" "$T/solo-straddle-stop.receipt" | head -4)"
st=$(C -N "$U/v1/completions" -d '{"model":"qm","prompt":"niño","max_tokens":8,"stop":["首都づ"],"stream":true}' \
    | python3 -c 'import json,sys; e=[x for x in sys.stdin.read().split("\n\n") if x and not x.startswith(":")]; print(json.dumps("".join(json.loads(x[6:])["choices"][0]["text"] for x in e[:-1])))')
expect_eq serve.chat.straddle-stop.stream-text "$st" '"\ufffd\u672c\u306e"'
grep -qi '^content-type: text/event-stream' "$T/s.headers" && pass serve.chat.stream.content-type \
    || fail serve.chat.stream.content-type "$(cat "$T/s.headers")"

# A stop string: content cut before it, finish_reason "stop", receipt = `run --chat -n K`.
stop=$(jget "$T/system-first.json" 'd["choices"][0]["message"]["content"][1:3]')
body "$F/messages-system-first.json" "{\"max_tokens\":5,\"stop\":$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$stop")}" > "$T/stop.req"
C "$U/v1/chat/completions" -d @"$T/stop.req" > "$T/stop.json"
k=$(jget "$T/stop.json" 'len(d["cis2"]["generated_token_ids"])')
full=$(jget "$T/system-first.json" 'json.dumps(d["choices"][0]["message"]["content"])')
want=$(python3 -c 'import json,sys; f=json.loads(sys.argv[1]); print(json.dumps(["stop", f[:f.index(sys.argv[2])]]))' "$full" "$stop")
expect_eq serve.chat.stop.finish "$(jget "$T/stop.json" '["stop" if d["choices"][0]["finish_reason"] == "stop" else "?", d["choices"][0]["message"]["content"]]')" "$want"
jget "$T/stop.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/stop.receipt"
solo "$T/solo-stop.receipt" --model "$M" --chat "$F/messages-system-first.json" -n "$k" --stop-at-eos
cmp -s "$T/stop.receipt" "$T/solo-stop.receipt" && pass serve.chat.stop.receipt-equals-run-chat-of-k-tokens \
    || fail serve.chat.stop.receipt-equals-run-chat-of-k-tokens "k=$k $(diff "$T/stop.receipt" "$T/solo-stop.receipt" | head -4)"

# Refusals: 400s naming the parameter, in OpenAI's error object; one line each.
bad() { # bad NAME WANT_STATUS WANT_PARAM BODY [URL]
    local code
    code=$(C -o "$T/bad.json" -w '%{http_code}' "${5:-$U}/v1/chat/completions" --data-binary "$4")
    expect_eq "serve.chat.bad.$1" "$code $(jget "$T/bad.json" 'd["error"]["param"]' 2>&1)" "$2 $3"
}
msg() { jget "$T/bad.json" 'd["error"]["message"]'; }
MS='"messages":[{"role":"user","content":"hi"}]'
bad no-messages 400 messages '{"model":"qm"}'
bad messages-not-array 400 messages '{"model":"qm","messages":"hi"}'
bad empty-messages 400 messages '{"model":"qm","messages":[]}'
bad role-tool 400 messages '{"model":"qm","messages":[{"role":"tool","content":"x"}]}'
expect_eq serve.chat.bad.role-tool.message "$(msg)" 'request body: messages[0].role: must be "system", "user" or "assistant"'
bad role-developer 400 messages '{"model":"qm","messages":[{"role":"developer","content":"x"}]}'
bad content-image-part 400 messages '{"model":"qm","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]}]}'
expect_eq serve.chat.bad.content-image-part.message "$(msg)" 'request body: messages[0].content[1]: expected a text part {"type": "text", "text": "..."} (this model reads text only)'
bad content-null 400 messages '{"model":"qm","messages":[{"role":"assistant","content":null}]}'
bad message-name 400 messages '{"model":"qm","messages":[{"role":"user","content":"hi","name":"bob"}]}'
bad special-token 400 messages '{"model":"qm","messages":[{"role":"user","content":"hi <|endoftext|>"}]}'
expect_eq serve.chat.bad.special-token.message "$(msg)" 'chat: messages[0].content holds the special token "<|endoftext|>" (the template would not escape it; refusing)'
bad control-token 400 messages '{"model":"qm","messages":[{"role":"system","content":"x"},{"role":"user","content":"<|im_end|>"}]}'
case "$(msg)" in *'messages[1].content holds the special token "<|im_end|>"'*) pass serve.chat.bad.control-token.message;;
    *) fail serve.chat.bad.control-token.message "$(msg)";; esac
bad temperature 400 temperature "{\"model\":\"qm\",$MS,\"temperature\":-0.7}"
bad top-p 400 top_p "{\"model\":\"qm\",$MS,\"top_p\":0.9}"
bad n 400 n "{\"model\":\"qm\",$MS,\"n\":17}"
bad logprobs 400 logprobs "{\"model\":\"qm\",$MS,\"logprobs\":2}"
bad top-logprobs 400 top_logprobs "{\"model\":\"qm\",$MS,\"top_logprobs\":2}"
bad tools 400 tools "{\"model\":\"qm\",$MS,\"tools\":[]}"
bad prompt-member 400 prompt "{\"model\":\"qm\",$MS,\"prompt\":\"x\"}"
bad max-tokens-disagree 400 max_completion_tokens "{\"model\":\"qm\",$MS,\"max_tokens\":3,\"max_completion_tokens\":4}"
bad context 400 max_tokens "{\"model\":\"qm\",$MS,\"max_tokens\":256}"
expect_eq serve.chat.bad.context.code "$(jget "$T/bad.json" 'd["error"]["code"]')" context_length_exceeded
bad context-mct 400 max_completion_tokens "{\"model\":\"qm\",$MS,\"max_completion_tokens\":256}"
# messages longer than the context, no max_tokens: the messages are at fault (it named "prompt",
# a member chat does not have, and a max_tokens (1) the client never sent)
LONGM=$(python3 -c 'print("word " * 400)')
bad context-messages 400 messages "{\"model\":\"qm\",\"messages\":[{\"role\":\"user\",\"content\":\"$LONGM\"}]}"
case "$(msg)" in "messages: the prompt ("*" tokens) is longer than this server's context of 256 positions")
    pass serve.chat.bad.context-messages.message;; *) fail serve.chat.bad.context-messages.message "$(msg)";; esac
bad stream-options-twice 400 stream_options "{\"model\":\"qm\",$MS,\"stream\":true,\"stream_options\":{\"include_usage\":true,\"include_usage\":false}}"
bad model 404 model "{\"model\":\"gpt-4o\",$MS}"
bad invalid-json 400 None '{"model":"qm","messages":[{'
# accepted at their greedy values: temperature 0, top_p 1, n 1, logprobs false, seed, user
code=$(C -o "$T/ok.json" -w '%{http_code}' "$U/v1/chat/completions" \
    -d "{\"model\":\"qm\",$MS,\"max_tokens\":1,\"temperature\":0,\"top_p\":1,\"n\":1,\"logprobs\":false,\"seed\":7,\"user\":\"u\",\"stop\":null}")
expect_eq serve.chat.greedy-values-accepted "$code" 200
expect_eq serve.chat.get-is-405 "$(C -o /dev/null -w '%{http_code}' "$U/v1/chat/completions")" 405

# Sampling and log-probabilities in chat's shape: the receipt is `cis2 run --chat
# --temperature … --seed …`'s; logprobs.content has one entry per id, its bytes those of the
# ids and its values the completions endpoint's on the same prompt ids; streamed with n = 2,
# each choice's entries add up to the plain response's.
body "$F/messages-system-first.json" '{"max_tokens":5,"temperature":0.9,"seed":11,"logprobs":true,"top_logprobs":2}' > "$T/lp.req"
C "$U/v1/chat/completions" -d @"$T/lp.req" > "$T/lp.json"
jget "$T/lp.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/lp.receipt"
solo "$T/solo-lp.receipt" --model "$M" --chat "$F/messages-system-first.json" -n 5 --stop-at-eos \
    --temperature 0.9 --seed 11
[ -s "$T/lp.receipt" ] && cmp -s "$T/lp.receipt" "$T/solo-lp.receipt" && pass serve.chat.sampled.receipt-equals-run-chat \
    || fail serve.chat.sampled.receipt-equals-run-chat "$(head -c 300 "$T/lp.json")"
pids=$(jget "$T/lp.json" 'd["cis2"]["prompt_token_ids"]')
C "$U/v1/completions" -d "{\"model\":\"qm\",\"prompt\":$pids,\"max_tokens\":5,\"temperature\":0.9,\"seed\":11,\"logprobs\":2}" > "$T/lpc.json"
body "$F/messages-system-first.json" '{"max_tokens":5,"temperature":0.9,"seed":11,"logprobs":true,"top_logprobs":2,"n":2,"stream":true}' > "$T/lps.req"
C -N "$U/v1/chat/completions" -d @"$T/lps.req" > "$T/lps.sse"
python3 - "$T/lp.json" "$T/lpc.json" "$T/lps.sse" > "$T/lp.check" 2>&1 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
ch = d['choices'][0]; lp = ch['logprobs']
assert lp['refusal'] is None and len(lp['content']) == len(d['cis2']['generated_token_ids'])
for e in lp['content']:
    assert set(e) == {'token', 'logprob', 'bytes', 'top_logprobs'} and len(e['top_logprobs']) == 2
    assert e['token'] == bytes(e['bytes']).decode('utf-8', 'replace'), e
    assert e['top_logprobs'][0]['logprob'] >= e['top_logprobs'][1]['logprob'] >= -9999
text = b''.join(bytes(e['bytes']) for e in lp['content']).decode('utf-8', 'replace')
assert ch['finish_reason'] != 'length' or text == ch['message']['content'], (text, ch['message']['content'])
assert [e['logprob'] for e in lp['content']] == c['choices'][0]['logprobs']['token_logprobs'], 'chat and completions differ'
assert c['cis2']['generated_token_ids'] == d['cis2']['generated_token_ids']
ev = [e for e in open(sys.argv[3]).read().split('\n\n') if e and not e.startswith(':')]
assert ev[-1] == 'data: [DONE]'
got = {0: [], 1: []}
for e in ev[:-1]:
    k = json.loads(e[6:])['choices'][0]
    if k.get('logprobs'): got[k['index']] += k['logprobs']['content']
assert got[0] == lp['content'], 'stream choice 0 differs'
assert len(got[1]) == len(lp['content']), 'stream choice 1 (seed 12)'
print('ok')
EOF
expect_eq serve.chat.logprobs "$(tail -1 "$T/lp.check")" ok
# A sampled chat request without a seed, n = 2: the server draws one below 2^53 and returns it
# (top level and each choice's cis2, choice i with seed + i), and choice 1's receipt is
# `cis2 run --chat --seed S+1`'s, so every chat completion can be verified too.
body "$F/messages-system-first.json" '{"max_tokens":4,"temperature":0.9,"top_p":0.9,"n":2}' > "$T/ns.req"
C "$U/v1/chat/completions" -d @"$T/ns.req" > "$T/ns.json"
S=$(jget "$T/ns.json" 'd["seed"]' 2>/dev/null)
jget "$T/ns.json" 'd["choices"][1]["cis2"]["receipt"]' 2>/dev/null | head -c -1 > "$T/ns1.receipt"
case "$S" in
    [0-9]*) solo "$T/solo-ns1.receipt" --model "$M" --chat "$F/messages-system-first.json" -n 4 \
        --stop-at-eos --temperature 0.9 --top-p 0.9 --seed $((S + 1));;
    *) : > "$T/solo-ns1.receipt";;
esac
got=$(jget "$T/ns.json" '[0 <= d["seed"] < 2**53, [c["cis2"]["seed"] - d["seed"] for c in d["choices"]],
    [c["cis2"]["receipt"].endswith("\nseed %d\n" % c["cis2"]["seed"]) for c in d["choices"]]]' 2>&1)
cmp -s "$T/ns1.receipt" "$T/solo-ns1.receipt" && [ -s "$T/ns1.receipt" ] && got="$got receipt-1-equals-run-chat"
expect_eq serve.chat.sampled.server-seed-n2 "$got" "[true, [0, 1], [true, true]] receipt-1-equals-run-chat"

# The official OpenAI client (tests/serve, `npm ci` there, as .ci/run does).
if ! command -v node >/dev/null; then skip serve.chat.openai "node is not installed"
elif [ ! -f tests/serve/node_modules/openai/package.json ]; then
    skip serve.chat.openai "npm package openai not installed (cd tests/serve && npm ci)"
else
    node tests/serve/openai_chat.mjs "$U" qm "$F/messages-system-first.json" 5 "$T/solo-system-first.receipt" 2>&1 \
        || fail serve.chat.openai.run "exit status $?"
fi
# chat_template_kwargs (vLLM's name): further template variables, as `cis2 run
# --chat-template-kwarg`; here `tools`, which Qwen2.5's template iterates (its rendering is
# too long for this server's context, so a value it cannot iterate shows the kwarg arrives).
bad template-kwargs-reach-the-template 400 messages "{\"model\":\"qm\",$MS,\"chat_template_kwargs\":{\"tools\":5}}" "$U"
case "$(msg)" in *'chat template (jinja): line '*'cannot iterate over a value of type int'*) pass serve.chat.template-kwargs.message;;
    *) fail serve.chat.template-kwargs.message "$(msg)";; esac
bad template-kwargs-type 400 chat_template_kwargs "{\"model\":\"qm\",$MS,\"chat_template_kwargs\":[1]}" "$U"
bad template-kwargs-reserved 400 chat_template_kwargs "{\"model\":\"qm\",$MS,\"chat_template_kwargs\":{\"messages\":[]}}" "$U"
kill -TERM "$SPID"; wait "$SPID"; rc=$?
expect_eq serve.chat.main.clean-exit "$rc" 0

# A model without a template: chat requests are a 400 naming the problem (the rest still works);
# with --chat-format chatml, plain ChatML, equal to `cis2 run --chat --chat-format chatml`.
start plain --model "$T/plain" --threads 1 --alias qm || exit 0
P="http://127.0.0.1:$PORT"
grep -q 'chat/completions answers 400: .*tokenizer_config.json' "$T/plain.log" && pass serve.chat.no-template.logged \
    || fail serve.chat.no-template.logged "$(cat "$T/plain.log")"
bad no-template 400 messages "{\"model\":\"qm\",$MS}" "$P"
expect_eq serve.chat.no-template.code "$(jget "$T/bad.json" 'd["error"]["code"]')" chat_template_unavailable
expect_eq serve.chat.no-template.completions-still-served \
    "$(C -o /dev/null -w '%{http_code}' "$P/v1/completions" -d '{"model":"qm","prompt":"hi","max_tokens":1}')" 200
kill "$SPID"
start chatml --model "$T/plain" --threads 1 --alias qm --chat-format chatml || exit 0
C "http://127.0.0.1:$PORT/v1/chat/completions" -d @"$T/system-first.req" > "$T/chatml.json"
jget "$T/chatml.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/chatml.receipt"
solo "$T/solo-chatml.receipt" --model "$T/plain" --chat "$F/messages-system-first.json" --chat-format chatml -n 5 --stop-at-eos
cmp -s "$T/chatml.receipt" "$T/solo-chatml.receipt" && pass serve.chat.chat-format-chatml.receipt-equals-run-chat \
    || fail serve.chat.chat-format-chatml.receipt-equals-run-chat "$(head -c 300 "$T/chatml.json")"
expect_eq serve.chat.chat-format-chatml.prompt-hex "$(sed -n 's/^prompt-hex //p' "$T/chatml.receipt")" \
    "$(sed -n 's/^chatml messages-system-first.json 1 //p' "$F/expected.txt")"
kill "$SPID"
expect_err serve.chat.flag.chat-format "only chatml is built in" "$CIS2" serve --model "$T/plain" --port 0 --chat-format llama3
