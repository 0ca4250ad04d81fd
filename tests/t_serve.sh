#!/usr/bin/env bash
# `cis2 serve` over real HTTP on 127.0.0.1 (ports picked by the kernel, servers
# started and stopped here): curl against every endpoint, receipts byte-identical
# to `cis2 run --receipt` of the same prompt alone (plain, streamed, token-id
# prompts, stop strings, EOS) and verified by `cis2 verify`, /v1/verify, the
# malformed-request and limit answers (400/401/404/405/413/431/503, idle
# timeout, oversized chunked bodies), disconnecting clients freeing their slots,
# shutdown on SIGTERM, the official OpenAI client (tests/serve, npm `openai`),
# and a short load test (tools/serve_load.mjs; SERVE_LOAD=full for the long one).
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/serve"; rm -rf "$T"; mkdir -p "$T"
MK="python3 tools/make_model.py"
FX="--arch llama --heads 9 --kv-heads 3 --hidden 72 --inter 100 --layers 3 --theta 100000"

serve_setup serve

$MK "$T/fx" $FX >/dev/null || { fail serve.fixture "make_model.py failed"; exit 0; }
# The same weights whose config says the token "a b c d" runs into (102) is EOS.
cp -r "$T/fx" "$T/fx-eos"
sed -i 's/"eos_token_id": 0/"eos_token_id": 102/' "$T/fx-eos/config.json"
# A bigger one, for requests that take seconds (disconnects, 503s, shutdown).
$MK "$T/slow" --hidden 512 --inter 1536 --layers 8 --heads 8 --kv-heads 2 --vocab 600 \
    --max-pos 4096 >/dev/null

health() { C "http://127.0.0.1:$1/health"; }
# wait_idle PORT: until no sequence runs or waits (10 s at most); prints the last /health.
wait_idle() {
    local h
    for _ in $(seq 1 100); do
        h=$(health "$1"); case "$h" in *'"slots_busy":0,"queued":0'*) break;; esac; sleep 0.1
    done
    echo "$h"
}
solo() { # solo OUT ARGS...: the receipt of the same prompt run alone
    local out="$1"; shift
    "$CIS2" run "$@" --receipt "$out" > /dev/null 2>&1
}

# ---------------------------------------------------------------- the main server
start main --model "$T/fx" --max-batch 4 --queue 16 --threads 2 --max-body 65536 --timeout 3 || exit 0
U="http://127.0.0.1:$PORT"; MAIN_PORT=$PORT; MAIN_PID=$SPID
P="hello world"

h=$(health "$PORT")
case "$h" in '{"status":"ok","slots_total":4,'*) pass serve.health;; *) fail serve.health "$h";; esac
C "$U/v1/models" > "$T/models.json"
solo "$T/solo6.txt" --model "$T/fx" --prompt "$P" -n 6 --stop-at-eos
expect_eq serve.models.weights-sha256 "$(jget "$T/models.json" 'd["data"][0]["cis2"]["weights_sha256"]')" \
    "$(sed -n 's/^weights-sha256 //p' "$T/solo6.txt")"
expect_eq serve.models.id "$(jget "$T/models.json" 'd["data"][0]["id"]')" fx

# A completion: the receipt is byte-identical to `cis2 run` alone, and verifies.
C "$U/v1/completions" -d "{\"model\":\"fx\",\"prompt\":\"$P\",\"max_tokens\":6}" > "$T/c1.json"
jget "$T/c1.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/c1.receipt"
if cmp -s "$T/c1.receipt" "$T/solo6.txt"; then pass serve.completion.receipt-equals-solo-run
else fail serve.completion.receipt-equals-solo-run "$(diff "$T/c1.receipt" "$T/solo6.txt" | head -5)"; fi
"$CIS2" verify "$T/c1.receipt" --model "$T/fx" > "$T/v1.out" 2>&1 && pass serve.completion.cis2-verify \
    || fail serve.completion.cis2-verify "$(tail -3 "$T/v1.out")"
solo_text=$("$CIS2" run --model "$T/fx" --prompt "$P" -n 6 | sed -n 's/^text=//p')
expect_eq serve.completion.text "$(jget "$T/c1.json" 'json.dumps(d["choices"][0]["text"])')" "$solo_text"
expect_eq serve.completion.finish-length "$(jget "$T/c1.json" 'd["choices"][0]["finish_reason"]')" length
expect_eq serve.completion.usage "$(jget "$T/c1.json" '[d["usage"][k] for k in ("prompt_tokens","completion_tokens","total_tokens")]')" "[8, 6, 14]"
expect_eq serve.completion.cis2-ref "$(jget "$T/c1.json" 'd["cis2"]["cis2_ref"]')" \
    "$("$CIS2" run --model "$T/fx" --prompt "$P" -n 6 | grep '^CIS2_REF')"

# Token-id prompt: prompt-hex is the ids' text, as `cis2 run --prompt-ids` writes it.
C "$U/v1/completions" -d '{"model":"fx","prompt":[5,17,42,7,99],"max_tokens":6}' > "$T/c2.json"
jget "$T/c2.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/c2.receipt"
solo "$T/solo-ids.txt" --model "$T/fx" --prompt-ids 5,17,42,7,99 -n 6 --stop-at-eos
cmp -s "$T/c2.receipt" "$T/solo-ids.txt" && pass serve.ids-prompt.receipt-equals-solo-run \
    || fail serve.ids-prompt.receipt-equals-solo-run "$(diff "$T/c2.receipt" "$T/solo-ids.txt" | head -4)"

# Streamed: SSE chunks whose text adds up, a final chunk with the same receipt, then [DONE].
C -N -D "$T/s1.headers" "$U/v1/completions" \
    -d "{\"model\":\"fx\",\"prompt\":\"$P\",\"max_tokens\":6,\"stream\":true}" > "$T/s1.sse"
python3 - "$T/s1.sse" "$T/c1.json" "$T/solo6.txt" > "$T/s1.check" <<'EOF'
import json, sys
ev = [e for e in open(sys.argv[1]).read().split('\n\n') if not e.startswith(':')]  # pings
assert ev[-1] == '' and ev[-2] == 'data: [DONE]', 'does not end with [DONE]'
chunks = [json.loads(e[6:]) for e in ev[:-2]]
text = ''.join(c['choices'][0]['text'] for c in chunks)
plain = json.load(open(sys.argv[2]))
assert text == plain['choices'][0]['text'], 'streamed text %r != %r' % (text, plain['choices'][0]['text'])
assert len([c for c in chunks if c['choices'][0]['text']]) == 6, 'not one chunk per token'
last = chunks[-1]
assert last['choices'][0]['finish_reason'] == 'length' and last['usage']['completion_tokens'] == 6
assert last['cis2']['receipt'] == open(sys.argv[3]).read(), 'receipt differs'
print('ok')
EOF
expect_eq serve.stream.chunks-text-receipt "$(cat "$T/s1.check" 2>&1)" ok
grep -qi '^content-type: text/event-stream' "$T/s1.headers" && pass serve.stream.content-type \
    || fail serve.stream.content-type "$(cat "$T/s1.headers")"
# stream_options.include_usage: the usage in one extra chunk (choices []) before [DONE], and
# "usage": null in every other chunk, as OpenAI documents it (the last chunk carried the usage
# too, so a client adding up every chunk's usage, as LangChain does, counted it twice).
C -N "$U/v1/completions" -d "{\"model\":\"fx\",\"prompt\":\"$P\",\"max_tokens\":6,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" > "$T/s2.sse"
python3 - "$T/s2.sse" "$T/solo6.txt" > "$T/s2.check" 2>&1 <<'EOF'
import json, sys
ev = [e for e in open(sys.argv[1]).read().split('\n\n') if not e.startswith(':')]
assert ev[-1] == '' and ev[-2] == 'data: [DONE]', 'does not end with [DONE]'
chunks = [json.loads(e[6:]) for e in ev[:-2]]
*rest, last, usage = chunks
assert usage['choices'] == [] and usage['usage'] == {'prompt_tokens': 8, 'completion_tokens': 6, 'total_tokens': 14}, usage
assert all('usage' in c and c['usage'] is None for c in rest + [last]), [c.get('usage', '-') for c in chunks]
assert last['choices'][0]['finish_reason'] == 'length' and last['cis2']['receipt'] == open(sys.argv[2]).read()
print('ok')
EOF
expect_eq serve.stream.include-usage "$(cat "$T/s2.check")" ok

# A stop string ends the run at the token that completes it: the text stops before it,
# finish_reason is "stop", and the receipt covers exactly the ids generated (= `cis2 run -n K`).
C "$U/v1/completions" -d "{\"model\":\"fx\",\"prompt\":\"$P\",\"max_tokens\":12,\"stop\":[\"e' w\"]}" > "$T/stop.json"
k=$(jget "$T/stop.json" 'len(d["cis2"]["generated_token_ids"])')
expect_eq serve.stop.text "$(jget "$T/stop.json" 'd["choices"][0]["text"]')" " w"
expect_eq serve.stop.finish "$(jget "$T/stop.json" 'd["choices"][0]["finish_reason"]')" stop
expect_eq serve.stop.tokens "$k" 2
jget "$T/stop.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/stop.receipt"
solo "$T/solo-stop.txt" --model "$T/fx" --prompt "$P" -n "$k" --stop-at-eos
cmp -s "$T/stop.receipt" "$T/solo-stop.txt" && pass serve.stop.receipt-equals-solo-run-of-k-tokens \
    || fail serve.stop.receipt-equals-solo-run-of-k-tokens "$(diff "$T/stop.receipt" "$T/solo-stop.txt" | head -4)"
"$CIS2" verify "$T/stop.receipt" --model "$T/fx" > /dev/null 2>&1 && pass serve.stop.cis2-verify \
    || fail serve.stop.cis2-verify "does not verify"
# ... and streamed: the stop string is never sent, not even in part.
C -N "$U/v1/completions" -d "{\"model\":\"fx\",\"prompt\":\"$P\",\"max_tokens\":12,\"stop\":\"e' w\",\"stream\":true}" > "$T/stop.sse"
st=$(python3 -c 'import json,sys; e=[x for x in open(sys.argv[1]).read().split("\n\n") if not x.startswith(":")]; print("".join(json.loads(x[6:])["choices"][0]["text"] for x in e[:-2]))' "$T/stop.sse")
expect_eq serve.stop.stream-text "$st" " w"

# /v1/verify: the receipt checked field by field on the server (JSON body or the text itself).
python3 -c 'import json,sys; print(json.dumps({"receipt": open(sys.argv[1]).read()}))' "$T/c1.receipt" > "$T/vreq.json"
C "$U/v1/verify" -d @"$T/vreq.json" > "$T/v.json"
expect_eq serve.verify.good "$(jget "$T/v.json" '[d["verified"], d["mismatches"], len(d["fields"])]')" "[true, 0, 10]"
awk '/^witness-digest /{ c=substr($2,1,1); $2=(c=="0"?"1":"0") substr($2,2) } { print }' "$T/c1.receipt" > "$T/doctored.receipt"
C "$U/v1/verify" -H 'Content-Type: text/plain' --data-binary @"$T/doctored.receipt" > "$T/vbad.json"
expect_eq serve.verify.doctored "$(jget "$T/vbad.json" '[d["verified"], [f["field"] for f in d["fields"] if f["status"]=="mismatch"]]')" '[false, ["witness-digest"]]'
code=$(C -o "$T/vmal.json" -w '%{http_code}' "$U/v1/verify" --data-binary 'CIS-2-RECEIPT v1')
expect_eq serve.verify.malformed "$code $(jget "$T/vmal.json" 'd["error"]["param"]')" "400 receipt"
# a receipt needing more positions than the server's context: named as the receipt's gen-toks
# (it was called max_tokens, a parameter this request does not have)
python3 - "$T/c1.receipt" "$T/vlong.receipt" <<'PY'
import re, sys
r = open(sys.argv[1]).read()
r = re.sub(r"(?m)^gen-toks \d+$", "gen-toks 9000", r)
r = re.sub(r"(?m)^generated-token-ids .*$", "generated-token-ids " + ",".join(["5"] * 9000), r)
open(sys.argv[2], "w").write(r)
PY
code=$(C -o "$T/vlong.json" -w '%{http_code}' "$U/v1/verify" -H 'Content-Type: text/plain' --data-binary @"$T/vlong.receipt")
expect_eq serve.verify.beyond-context "$code $(jget "$T/vlong.json" '[d["error"]["param"], d["error"]["message"].split(";")[0]]')" \
    "400 [\"receipt\", \"receipt: the prompt ($(sed -n 's/^prompt-token-ids //p' "$T/c1.receipt" | tr ',' '\n' | wc -l) tokens) and gen-toks (9000) need $(( $(sed -n 's/^prompt-token-ids //p' "$T/c1.receipt" | tr ',' '\n' | wc -l) + 8999 )) positions\"]"

# Malformed requests: 400s with one-line messages naming the parameter; nothing crashes.
bad() { # bad NAME WANT_STATUS WANT_PARAM BODY
    local code
    code=$(C -o "$T/bad.json" -w '%{http_code}' "$U/v1/completions" --data-binary "$4")
    local got; got="$code $(jget "$T/bad.json" 'd["error"]["param"]' 2>&1)"
    expect_eq "serve.bad.$1" "$got" "$2 $3"
}
bad invalid-json 400 None '{"model":'
bad not-object 400 None '"hello"'
bad binary 400 None "$(printf '\x01\x02\xff')"
bad wrong-type 400 max_tokens '{"model":"fx","prompt":"a","max_tokens":"9"}'
bad temperature 400 temperature '{"model":"fx","prompt":"a","temperature":-1}'
bad top-p 400 top_p '{"model":"fx","prompt":"a","top_p":0.1}'
bad n 400 n '{"model":"fx","prompt":"a","n":17}'
bad echo 400 echo '{"model":"fx","prompt":"a","echo":true}'
bad unknown 400 functions '{"model":"fx","prompt":"a","functions":[]}'
bad model 404 model '{"model":"gpt-4","prompt":"a"}'
bad vocab 400 prompt '{"model":"fx","prompt":[1,2,100000]}'
bad context 400 max_tokens '{"model":"fx","prompt":"a","max_tokens":9000}'
bad deep 400 None "$(python3 -c 'print("["*60000)')"
msg=$(jget "$T/bad.json" 'd["error"]["message"]')
case "$msg" in *$'\n'*) fail serve.bad.one-line "$msg";; *) pass serve.bad.one-line;; esac
# A value that is not an integer is quoted alone, never with the body that follows it.
code=$(C -o "$T/bad.json" -w '%{http_code}' "$U/v1/completions" \
    -d '{"model":"fx","max_tokens":2.5,"prompt":"hi secret"}')
msg=$(jget "$T/bad.json" 'd["error"]["message"]')
expect_eq serve.bad.not-integer-quotes-the-value-only "$code $msg" \
    "400 max_tokens: expected an integer, got 2.5"
# Every integer parameter takes an integral value however it is written, as n always did.
C "$U/v1/completions" -d "{\"model\":\"fx\",\"prompt\":\"$P\",\"max_tokens\":2.0,\"n\":1.0}" > "$T/int2.json"
expect_eq serve.integral-max-tokens "$(jget "$T/int2.json" 'd["usage"]["completion_tokens"]')" 2
# Raw HTTP framing: two Content-Length headers (RFC 9112 §6.3, request smuggling) are one 400
# from us and the connection is closed; a negative one is libmicrohttpd's own 400.
cat > "$T/raw.py" <<'EOF'
import socket, sys
s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); s.settimeout(10)
s.sendall(sys.argv[2].encode().decode('unicode_escape').encode('latin1'))
out = b''
while True:
    d = s.recv(65536)
    if not d: break
    out += d
sys.stdout.write(out.decode('latin1'))
EOF
raw() { python3 "$T/raw.py" "$PORT" "$1" 2>&1; }
RQ='POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n'
r=$(raw "${RQ}Content-Length: 2\r\nContent-Length: 30\r\n\r\n{}")
n=$(printf '%s' "$r" | grep -c '^HTTP/1.1 ')
case "$n $r" in "1 HTTP/1.1 400 "*'more than one Content-Length header'*)
    pass serve.http.two-content-lengths-400;;
    *) fail serve.http.two-content-lengths-400 "$(printf '%s' "$r" | head -c 300)";; esac
r=$(raw "${RQ}Content-Length: 2\r\ncontent-length: 2\r\n\r\n{}")
case "$r" in "HTTP/1.1 400 "*'more than one Content-Length'*)
    pass serve.http.two-content-lengths-any-case;;
    *) fail serve.http.two-content-lengths-any-case "$(printf '%s' "$r" | head -c 300)";; esac
# Transfer-Encoding with Content-Length (RFC 9112 §6.1, smuggling): a 400 and the connection
# closed, the request after it unread; a coding other than chunked: a 501 at once, not silence
# until the idle timeout.
r=$(raw "${RQ}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
n=$(printf '%s' "$r" | grep -c '^HTTP/1.1 ')
case "$n $r" in "1 HTTP/1.1 400 "*'both Transfer-Encoding and Content-Length'*)
    pass serve.http.te-and-content-length-400;;
    *) fail serve.http.te-and-content-length-400 "$(printf '%s' "$r" | head -c 300)";; esac
r=$(raw "${RQ}Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
case "$r" in "HTTP/1.1 501 "*'only a single \"chunked\"'*) pass serve.http.te-unknown-501;;
    *) fail serve.http.te-unknown-501 "$(printf '%s' "$r" | head -c 300)";; esac
r=$(raw "${RQ}Content-Length: -5\r\n\r\n")
case "$r" in "HTTP/1.1 400 "*) pass serve.http.negative-content-length-400;;
    *) fail serve.http.negative-content-length-400 "$(printf '%s' "$r" | head -c 300)";; esac
# Whitespace before a field's colon (RFC 9112 §5.1: a server MUST answer 400) and obsolete
# line folding (§5.2: a server may answer 400): libmicrohttpd keeps "Transfer-Encoding " as
# another field and glues a folded line into the field's name, so a Transfer-Encoding that a
# proxy in front would honour was ignored and the request framed by its Content-Length (200).
# Now a 400, the connection closed and the request after it unread.
B6='{"model":"fx","prompt":"hi","max_tokens":1}'
NEXT='GET /health HTTP/1.1\r\nHost: x\r\n\r\n'
framing() { # framing NAME HEADER-LINES WANT: one 400 whose message has WANT, nothing after it
    local r n; r=$(raw "${RQ}Content-Length: ${#B6}\r\n$2\r\n$B6$NEXT")
    n=$(printf '%s' "$r" | grep -c '^HTTP/1.1 ')
    case "$n $r" in "1 HTTP/1.1 400 "*"$3"*) pass "serve.http.$1";;
        *) fail "serve.http.$1" "$(printf '%s' "$r" | head -c 300)";; esac
}
framing te-space-before-colon-400 'Transfer-Encoding : chunked\r\n' 'no space may come before the colon'
framing te-tab-before-colon-400 'Transfer-Encoding\t: chunked\r\n' 'no space may come before the colon'
framing te-obs-fold-400 'Transfer-Encoding:\r\n chunked\r\n' 'obsolete line folding'
framing te-folded-into-other-field-400 'X-A: y\r\n Transfer-Encoding: chunked\r\n' 'RFC 9112'
framing obs-fold-400 'X-A: y\r\n\tz\r\n' 'obsolete line folding'
# ... and the whitespace a field line may have (around the value, an empty value) is fine.
r=$(raw "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${#B6}\r\nX-A:   y  \r\nX-B:\r\nX-C:\t\tz\r\n\r\n$B6")
case "$r" in "HTTP/1.1 200 "*) pass serve.http.field-whitespace-ok;;
    *) fail serve.http.field-whitespace-ok "$(printf '%s' "$r" | head -c 300)";; esac
# A NUL in the request target, %00 or raw: libmicrohttpd decodes the path in place and hands
# it on as a C string, so "/health%00x" was routed as /health (200). Now a 400.
for tgt in 'GET /health%00x' 'GET /v1/models%00' 'POST /v1/completions%00x' 'POST /v1/verify%00.png' \
    'GET /health?x=%00' 'GET /health\x00x'; do
    r=$(raw "$tgt HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${#B6}\r\n\r\n$B6")
    case "$r" in "HTTP/1.1 400 "*'the request target holds a NUL byte'*) pass "serve.http.nul-in-target-400 ($tgt)";;
        *) fail "serve.http.nul-in-target-400" "$tgt: $(printf '%s' "$r" | head -c 200)";; esac
done
code=$(C -o /dev/null -w '%{http_code}' "$U/v1/completions")
expect_eq serve.bad.get-is-405 "$code" 405
# A 405 lists the methods the path takes (RFC 9110 §15.5.6), and HEAD is GET without a body.
allow=$(C -o /dev/null -D - "$U/v1/completions" | tr -d '\r' | sed -n 's/^[Aa]llow: //p')
expect_eq serve.http.405-allow-post "$allow" POST
allow=$(C -o /dev/null -D - -d '{}' "$U/health" | tr -d '\r' | sed -n 's/^[Aa]llow: //p')
expect_eq serve.http.405-allow-get "$allow" "GET, HEAD"
# A CORS preflight is a method like any other: 405, and no Access-Control-* header (docs/serve.md)
r=$(C -o /dev/null -D - -X OPTIONS -H 'Origin: http://example.com' -H 'Access-Control-Request-Method: POST' \
    "$U/v1/completions" | tr -d '\r' | grep -iE '^(HTTP/|allow:|access-control)' | tr '\n' ' ')
expect_eq serve.http.options-preflight-405 "$r" "HTTP/1.1 405 Method Not Allowed Allow: POST "
r=$(C -I "$U/health" | tr -d '\r' | grep -iE '^(HTTP/|content-type:)' | tr '\n' ' ')
expect_eq serve.http.head-health "$r" "HTTP/1.1 200 OK Content-Type: application/json "
expect_eq serve.http.head-models "$(C -I -o /dev/null -w '%{http_code}' "$U/v1/models")" 200
code=$(C -o /dev/null -w '%{http_code}' "$U/v1/nope")
expect_eq serve.bad.unknown-path-404 "$code" 404
# Limits: body (Content-Length, and chunked), header size, idle connections.
head -c 70000 /dev/zero | tr '\0' 'a' > "$T/big.txt"
code=$(C -o "$T/big.json" -w '%{http_code}' "$U/v1/completions" --data-binary @"$T/big.txt")
expect_eq serve.limit.body-413 "$code $(jget "$T/big.json" '[d["error"][k] for k in ("type", "code")]')" \
    '413 ["invalid_request_error", "request_too_large"]'
C -o /dev/null -H 'Transfer-Encoding: chunked' "$U/v1/completions" --data-binary @"$T/big.txt" 2>/dev/null
rc=$?
[ $rc -ne 0 ] && pass "serve.limit.chunked-body-dropped (curl rc $rc)" || fail serve.limit.chunked-body-dropped "accepted"
code=$(C -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 40000 /dev/zero | tr '\0' 'b')" "$U/health")
case "$code" in 413|431) pass "serve.limit.headers-$code";; *) fail serve.limit.headers "got $code";; esac
t0=$(date +%s%N)
python3 - "$PORT" <<'EOF' && pass serve.limit.idle-timeout || fail serve.limit.idle-timeout "still open"
import socket, sys
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
s.settimeout(20)
sys.exit(0 if s.recv(1) == b'' else 1)  # the server closes an idle connection (--timeout 3)
EOF
kill -0 "$SPID" && pass serve.alive-after-bad-input || fail serve.alive-after-bad-input "the server died"

# EOS ends a run (default; ignore_eos: true does not): its receipt is `cis2 run --stop-at-eos`.
start eos --model "$T/fx-eos" --threads 1 || exit 0
C "http://127.0.0.1:$PORT/v1/completions" -d '{"model":"fx-eos","prompt":"a b c d","max_tokens":10}' > "$T/eos.json"
expect_eq serve.eos.finish "$(jget "$T/eos.json" '[d["choices"][0]["finish_reason"], d["choices"][0]["text"], d["cis2"]["stopped_at_eos"], d["usage"]["completion_tokens"]]')" '["stop", "@@@", true, 4]'
jget "$T/eos.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/eos.receipt"
solo "$T/solo-eos.txt" --model "$T/fx-eos" --prompt "a b c d" -n 10 --stop-at-eos
cmp -s "$T/eos.receipt" "$T/solo-eos.txt" && pass serve.eos.receipt-equals-solo-run \
    || fail serve.eos.receipt-equals-solo-run "$(diff "$T/eos.receipt" "$T/solo-eos.txt" | head -4)"
C "http://127.0.0.1:$PORT/v1/completions" -d '{"model":"fx-eos","prompt":"a b c d","max_tokens":10,"ignore_eos":true}' > "$T/noeos.json"
jget "$T/noeos.json" 'd["cis2"]["receipt"]' | head -c -1 > "$T/noeos.receipt"
solo "$T/solo-noeos.txt" --model "$T/fx-eos" --prompt "a b c d" -n 10
cmp -s "$T/noeos.receipt" "$T/solo-noeos.txt" && pass serve.ignore-eos.receipt-equals-solo-run \
    || fail serve.ignore-eos.receipt-equals-solo-run "differs"
kill "$SPID"

# API keys: /v1/* needs "Authorization: Bearer KEY"; /health does not.
printf '# keys\nsecret-one\n\nsecret-two\n' > "$T/keys"
start auth --model "$T/fx" --threads 1 --api-key-file "$T/keys" || exit 0
A="http://127.0.0.1:$PORT"
expect_eq serve.auth.none "$(C -o /dev/null -w '%{http_code}' "$A/v1/models")" 401
expect_eq serve.auth.wrong "$(C -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer secret-on' "$A/v1/models")" 401
expect_eq serve.auth.right "$(C -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer secret-two' "$A/v1/models")" 200
expect_eq serve.auth.scheme-any-case "$(C -o /dev/null -w '%{http_code}' -H 'Authorization: bearer  secret-one' "$A/v1/models")" 200
expect_eq serve.auth.key-is-case-sensitive "$(C -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer Secret-one' "$A/v1/models")" 401
expect_eq serve.auth.health-open "$(C -o /dev/null -w '%{http_code}' "$A/health")" 200
kill "$SPID"
: > "$T/empty-keys"
expect_err serve.auth.empty-key-file "no key" "$CIS2" serve --model "$T/fx" --api-key-file "$T/empty-keys"
# A NUL byte ended the key (and the file) there: "mysecretkey" saved as UTF-16LE without a
# byte order mark was the key "m", and "Bearer m" got in. Refused at start, as a BOM is.
ERRORS_DIR="$T"
printf 'mysecretkey\n' | iconv -t UTF-16LE > "$T/keys-utf16"
printf 'abc\0suffix\n' > "$T/keys-nul"
errors_row serve-key-file-utf16 "serve --api-key-file in UTF-16 without a byte order mark" "t_serve.sh" \
    timeout 10 "$CIS2" serve --model "$T/fx" --port 0 --api-key-file "$T/keys-utf16"
errors_row serve-key-file-nul "serve --api-key-file with a NUL byte inside a key" "t_serve.sh" \
    timeout 10 "$CIS2" serve --model "$T/fx" --port 0 --api-key-file "$T/keys-nul"
expect_err serve.flag.port "--port must be" "$CIS2" serve --model "$T/fx" --port 70000
expect_err serve.flag.host "--host" "$CIS2" serve --model "$T/fx" --host 256.1.1.1 --port 0
# Startup refusals: one line naming the flag and what is wrong, before anything listens
# (timeout: a server that wrongly starts fails the check instead of hanging the test).
expect_err serve.flag.ctx-above-model \
    "--ctx 10000: above this model's max_position_embeddings (8192)" \
    timeout 10 "$CIS2" serve --model "$T/fx" --ctx 10000 --port 0
expect_err serve.flag.alias-slash "--alias 'x/y': it contains '/'" \
    timeout 10 "$CIS2" serve --model "$T/fx" --alias x/y --port 0
expect_err serve.flag.alias-escape "--alias 'a\x1b[31m': it has a control character" \
    timeout 10 "$CIS2" serve --model "$T/fx" --alias $'a\e[31m' --port 0
expect_err serve.flag.alias-not-utf8 "--alias 'a\xff': it has a control character" \
    timeout 10 "$CIS2" serve --model "$T/fx" --alias $'a\xff' --port 0
expect_err serve.flag.alias-too-long "it is longer than 255 bytes" \
    timeout 10 "$CIS2" serve --model "$T/fx" --alias "$(printf 'a%.0s' $(seq 300))" --port 0
mkfifo "$T/vfifo"
expect_err serve.flag.verifier-dir-missing "--verifier-dir $T/nonexistent: No such file" \
    timeout 10 "$CIS2" serve --model "$T/fx" --verifier-dir "$T/nonexistent" --port 0
expect_err serve.flag.verifier-dir-file "--verifier-dir $T/keys: not a directory" \
    timeout 10 "$CIS2" serve --model "$T/fx" --verifier-dir "$T/keys" --port 0
expect_err serve.flag.verifier-dir-fifo "not a directory" \
    timeout 10 "$CIS2" serve --model "$T/fx" --verifier-dir "$T/vfifo" --port 0
# A directory name with a C1 control (CSI), a bidi override and a byte that is not UTF-8: refused
# as the model's name; with --alias, the chat-template note quotes its path escaped.
ODD="$T/mod"$'\xc2\x9b2J\xe2\x80\xae\xff'
RAWB=$'\xc2\x9b\\|\xe2\x80\xae\\|\xff'
cp -r "$T/fx" "$ODD"
expect_err serve.model-name.odd-dir "cannot be the model's name" \
    timeout 10 "$CIS2" serve --model "$ODD" --port 0
timeout 10 "$CIS2" serve --model "$ODD" --port 0 > "$T/odd.out" 2>&1
if LC_ALL=C grep -q "$RAWB" "$T/odd.out"; then
    fail serve.model-name.odd-dir-escaped "raw bytes reached stderr"
else pass serve.model-name.odd-dir-escaped; fi
mkdir -p "$T/vdir"
start odd --model "$ODD" --alias odd --threads 1 --verifier-dir "$T/vdir" || exit 0
if LC_ALL=C grep -q "$RAWB" "$T/odd.log"; then
    fail serve.model-name.paths-escaped "raw bytes reached stderr: $(od -c "$T/odd.log" | head -5)"
elif grep -qF 'mod\u009b2J\u202e\xff' "$T/odd.log"; then pass serve.model-name.paths-escaped
else fail serve.model-name.paths-escaped "$(cat "$T/odd.log")"; fi
# /verifier/ with a file missing: a 404 that does not tell the client the server's paths.
code=$(C -o "$T/vmiss.json" -w '%{http_code}' "http://127.0.0.1:$PORT/verifier/")
case "$code $(cat "$T/vmiss.json")" in
    *"$T"*|*vdir*) fail serve.verifier.404-hides-path "$(cat "$T/vmiss.json")";;
    "404 "*) pass serve.verifier.404-hides-path;; *) fail serve.verifier.404-hides-path "$code";; esac
kill "$SPID"

# Slow headers: --timeout bounds only silence, so clients each sending a header line every
# few seconds held their connections for good, and 256 of them every connection (/health
# included: accepted and closed unanswered). A request's line, headers and body must now
# arrive within --request-timeout (here 2 s) of the connection's accept; connections from one
# address are bounded (--max-connections-per-ip, here 4); both refusals are counted in
# /health and noted once, not logged one line each. Then SIGHUP: the server drains as for
# SIGTERM (it was killed), and a request that arrives during the drain (held open by a body
# still arriving) is answered 503 shutting_down with Retry-After (it was refused).
start loris --model "$T/fx" --threads 1 --timeout 30 --request-timeout 2 --max-connections-per-ip 4 \
    || exit 0
python3 - "$PORT" "$SPID" > "$T/loris.json" 2> "$T/loris.err" <<'EOF'
import json, os, signal, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
out = {}
def conn():
    s = socket.create_connection(('127.0.0.1', port)); s.settimeout(0.1); return s
def ask(req):
    s = socket.create_connection(('127.0.0.1', port)); s.settimeout(5); s.sendall(req)
    b = b''
    while True:
        d = s.recv(65536)
        if not d: return b.decode('latin1')
        b += d
def health():
    r = ask(b'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    return r.split('\r\n')[0], json.loads(r.split('\r\n\r\n', 1)[1])
# three slow clients, a header line every 0.3 s: each closed by the deadline, /health answered
slow, closed, t0 = [conn() for _ in range(3)], [None] * 3, time.monotonic()
for s in slow: s.sendall(b'GET /health HTTP/1.1\r\nHost: x\r\n')
while time.monotonic() - t0 < 8 and None in closed:
    for i, s in enumerate(slow):
        if closed[i] is not None: continue
        try:
            s.sendall(b'X-Slow: 1\r\n')
            d = s.recv(1)
            closed[i] = round(time.monotonic() - t0, 1) if d == b'' else 'answered'
        except socket.timeout: pass
        except OSError: closed[i] = round(time.monotonic() - t0, 1)
    if 'health_during' not in out and time.monotonic() - t0 > 1:
        out['health_during'] = health()[0]
    time.sleep(0.2)
out['slow_closed_at_s'] = closed
time.sleep(0.5)  # the closed ones are cleaned up
# more than four connections from one address: the fifth, sixth and seventh are refused
held = [conn() for _ in range(4)]
time.sleep(0.2)
refused = 0
for _ in range(3):
    s = conn(); s.settimeout(1)
    try: refused += s.recv(1) == b''
    except socket.timeout: pass
    except OSError: refused += 1
for s in held: s.close()
time.sleep(0.5)
status, h = health()
out['counts'] = [refused, h.get('connections_refused'), h.get('requests_timed_out')]
# the drain: a request whose body is still arriving holds it; SIGHUP; then a new request
a = conn(); a.sendall(b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"model"')
time.sleep(0.3)
os.kill(pid, signal.SIGHUP)
time.sleep(0.3)
try:
    r = ask(b'GET /health HTTP/1.1\r\nHost: x\r\n\r\n')
    head, body = r.split('\r\n\r\n', 1)
    out['drain'] = [head.split('\r\n')[0], 'Retry-After: 1' in head, json.loads(body)['error']['code']]
except Exception as e:
    out['drain'] = repr(e)
print(json.dumps(out))
EOF
wait "$SPID"; rc=$?
L="$T/loris.json"
expect_eq serve.slow-headers.health-answered "$(jget "$L" 'd["health_during"]' 2>&1)" "HTTP/1.1 200 OK"
expect_eq serve.slow-headers.closed-by-deadline \
    "$(jget "$L" '[isinstance(t, float) and 1.8 <= t <= 3.5 for t in d["slow_closed_at_s"]]' 2>&1)" \
    "[true, true, true]"
expect_eq serve.per-ip-limit.refused-and-counted "$(jget "$L" 'd["counts"]' 2>&1)" "[3, 3, 3]"
n=$(grep -c 'refused a connection' "$T/loris.log"); m=$(grep -c 'closed a connection whose request' "$T/loris.log")
expect_eq serve.refusals.noted-once "$n $m $(grep -c 'libmicrohttpd' "$T/loris.log")" "1 1 0"
expect_eq serve.drain.new-request-503 "$(jget "$L" 'd["drain"]' 2>&1)" \
    '["HTTP/1.1 503 Service Unavailable", true, "shutting_down"]'
if grep -q 'SIGHUP: shutting down' "$T/loris.log"; then expect_eq serve.sighup.drains "$rc" 0
else fail serve.sighup.drains "rc $rc: $(tail -3 "$T/loris.log")"; fi
grep -q '3 connection(s) refused over the connection limits, 3 closed past --request-timeout' "$T/loris.log" \
    && pass serve.refusals.counted-at-shutdown || fail serve.refusals.counted-at-shutdown "$(tail -3 "$T/loris.log")"

# A verification is one more sequence in the batch: a client that goes away stops it (the
# completion after it is not held up behind its run, which never completes), and a shutdown
# ends it between two steps, with an answer, instead of waiting for its whole run.
start slowv --model "$T/slow" --max-batch 2 --queue 2 --threads 1 || exit 0
V="http://127.0.0.1:$PORT"; VPID=$SPID
# A long run without paying for one first (under ASan too): a 2-token receipt made to claim
# 4000 ids runs all 4000 steps, then mismatches.
C "$V/v1/completions" -d '{"model":"slow","prompt":"hello world","max_tokens":2}' > "$T/v2.json"
python3 - "$T/v2.json" > "$T/v4000.req" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))["cis2"]["receipt"].split("\n")
r = ["gen-toks 4000" if l.startswith("gen-toks ") else
     "generated-token-ids " + ",".join(["5"] * 4000) if l.startswith("generated-token-ids ") else l
     for l in r]
print(json.dumps({"receipt": "\n".join(r)}))
PYEOF
C --max-time 1 "$V/v1/verify" -d @"$T/v4000.req" > /dev/null 2>&1
C "$V/v1/completions" -d '{"model":"slow","prompt":"hi","max_tokens":1}' > /dev/null
h=$(wait_idle "$PORT")
case "$h" in *'"slots_busy":0,"queued":0,"queue_capacity":2,"completed":2,'*) pass serve.verify.disconnect-stops-it;;
    *) fail serve.verify.disconnect-stops-it "$h";; esac
C "$V/v1/verify" -d @"$T/v4000.req" > "$T/vterm.json" 2>&1 & VC=$!
for _ in $(seq 1 100); do case "$(health "$PORT")" in *'"slots_busy":1,'*) break;; esac; sleep 0.05; done
kill -TERM "$VPID"; wait "$VPID"; rc=$?; wait "$VC"
expect_eq serve.verify.shutdown-ends-it "$rc $(jget "$T/vterm.json" '[d["error"][k] for k in ("message", "type", "code")]' 2>&1)" \
    '0 ["the server is shutting down", "server_error", "shutting_down"]'

# Disconnects free slots; a full server answers 503 with Retry-After.
start slow --model "$T/slow" --max-batch 1 --queue 1 --threads 1 || exit 0
S="http://127.0.0.1:$PORT"
LONG='{"model":"slow","prompt":"hello world","max_tokens":3000,"ignore_eos":true'
C -N --max-time 1 "$S/v1/completions" -d "$LONG,\"stream\":true}" > /dev/null 2>&1
C --max-time 1 "$S/v1/completions" -d "$LONG}" > /dev/null 2>&1
h=$(wait_idle "$PORT")
case "$h" in *'"slots_busy":0,"queued":0,"queue_capacity":1,"completed":0,'*) pass serve.disconnect.frees-slot;;
    *) fail serve.disconnect.frees-slot "$h";; esac
C -N "$S/v1/completions" -d "$LONG,\"stream\":true}" > "$T/long1.sse" 2>/dev/null & L1=$!
C -N "$S/v1/completions" -d "$LONG,\"stream\":true}" > "$T/long2.sse" 2>/dev/null & L2=$!
for _ in $(seq 1 100); do case "$(health "$PORT")" in *'"slots_busy":1,"queued":1'*) break;; esac; sleep 0.05; done
code=$(C -o "$T/busy.json" -D "$T/busy.headers" -w '%{http_code}' "$S/v1/completions" -d "$LONG}")
expect_eq serve.busy.503 "$code $(jget "$T/busy.json" 'd["error"]["code"]')" "503 server_busy"
grep -qi '^retry-after: 1' "$T/busy.headers" && pass serve.busy.retry-after || fail serve.busy.retry-after "$(cat "$T/busy.headers")"
# SIGTERM with two streams in flight: both end (an error event), the server exits 0.
kill -TERM "$SPID"; wait "$SPID"; rc=$?
wait "$L1" "$L2" 2>/dev/null
expect_eq serve.shutdown.exit-status "$rc" 0
# Each stream's last event is the error, with the code a refused request gets for the same reason.
last_err() { python3 -c 'import json,sys; e=json.loads(open(sys.argv[1]).read().split("\n\n")[-2][6:])["error"]; print(e["message"], e["code"])' "$1" 2>&1; }
expect_eq serve.shutdown.streams-told "$(last_err "$T/long1.sse") / $(last_err "$T/long2.sse")" \
    "the server is shutting down shutting_down / the server is shutting down shutting_down"

# A stream silent for longer than --timeout (queued behind another, or at a shutdown while
# the decode thread finishes its step) is kept alive by `: ping` lines: without them
# libmicrohttpd closed it, after its headers, the moment it had something to send, so its
# first text, or the shutdown's error event, never came and it ended with no event at all.
start quiet --model "$T/slow" --max-batch 1 --queue 2 --threads 1 --timeout 2 || exit 0
Q="http://127.0.0.1:$PORT"
# curl itself, not C: a background function is a subshell, and killing it left curl (and A)
# running, so B waited for A's whole run instead (past curl's --max-time under ASan)
curl -sS --max-time 120 -N "$Q/v1/completions" -d "$LONG,\"stream\":true}" > /dev/null 2>&1 & QA=$!
for _ in $(seq 1 100); do case "$(health "$PORT")" in *'"slots_busy":1,'*) break;; esac; sleep 0.05; done
C -N "$Q/v1/completions" -d '{"model":"slow","prompt":"hello world","max_tokens":3,"stream":true}' \
    > "$T/quiet-b.sse" 2>&1 & QB=$!
for _ in $(seq 1 100); do case "$(health "$PORT")" in *'"queued":1,'*) break;; esac; sleep 0.05; done
sleep 3; kill "$QA"; wait "$QA" 2>/dev/null; wait "$QB" # A gone: B runs, after 3 s queued
expect_eq serve.quiet.queued-stream-completes "$(tail -c 14 "$T/quiet-b.sse")" "data: [DONE]"
C -N "$Q/v1/completions" -d "$LONG,\"stream\":true}" > "$T/quiet-c.sse" 2>&1 & QC=$!
for _ in $(seq 1 100); do case "$(health "$PORT")" in *'"slots_busy":1,'*) break;; esac; sleep 0.05; done
C -N "$Q/v1/completions" -d "$LONG,\"stream\":true}" > "$T/quiet-d.sse" 2>&1 & QD=$!
for _ in $(seq 1 100); do case "$(health "$PORT")" in *'"queued":1,'*) break;; esac; sleep 0.05; done
sleep 3; kill -TERM "$SPID"; wait "$SPID"; wait "$QC" "$QD"
expect_eq serve.quiet.shutdown-tells-queued-stream "$(last_err "$T/quiet-c.sse") / $(last_err "$T/quiet-d.sse")" \
    "the server is shutting down shutting_down / the server is shutting down shutting_down"
grep -q '^: ping$' "$T/quiet-d.sse" && pass serve.quiet.pinged \
    || fail serve.quiet.pinged "$(head -c 200 "$T/quiet-d.sse")"

# The official OpenAI client library (tests/serve: npm ci there, as .ci/run does).
if ! command -v node >/dev/null; then skip serve.openai "node is not installed"
elif [ ! -f tests/serve/node_modules/openai/package.json ]; then
    skip serve.openai "npm package openai not installed (cd tests/serve && npm ci)"
else
    node tests/serve/openai_client.mjs "$U" fx "$P" 6 "$T/solo6.txt" "e' w" 2>&1 \
        || fail serve.openai.run "exit status $?"
    h=$(wait_idle "$MAIN_PORT")
    case "$h" in *'"slots_busy":0,"queued":0'*) pass serve.openai.abandoned-stream-freed;;
        *) fail serve.openai.abandoned-stream-freed "$h";; esac
fi

# Load: 8 clients x 4 requests here (SERVE_LOAD=full: 32 x 8 on the bench model, docs/serve.md),
# mixed prompt lengths, a third streamed, an eighth disconnecting; every receipt = its solo run.
if ! command -v node >/dev/null; then skip serve.load "node is not installed"; exit 0; fi
python3 - "$T/fx" "$T/cases.json" "$CIS2" <<'EOF'
import json, subprocess, sys
model, out, cis2 = sys.argv[1:4]
prompts = ["hello world", "Once upon a time", "a b c d", "she was a dog. " * 6, "I'll go", [5, 17, 42, 7, 99],
           "The quick brown fox jumps over the lazy dog. " * 3, "e"]
cases = []
for i, p in enumerate(prompts):
    n = [4, 16, 8, 24][i % 4]
    arg = ['--prompt-ids', ','.join(map(str, p))] if isinstance(p, list) else ['--prompt', p]
    subprocess.run([cis2, 'run', '--model', model, *arg, '-n', str(n), '--stop-at-eos', '--receipt', out + '.r'],
                   check=True, capture_output=True)
    cases.append({'prompt': p, 'max_tokens': n, 'receipt': open(out + '.r').read()})
json.dump(cases, open(out, 'w'))
EOF
# The load tool's own flags: bad input is one line and exit 2, before any request.
mkfifo "$T/cases.fifo"; echo '[]' > "$T/cases-empty.json"
L=(node tools/serve_load.mjs --url "$U" --model fx)
expect_err serve.load-flags.no-url "--url wants" node tools/serve_load.mjs --cases "$T/cases.json"
expect_err serve.load-flags.clients "--clients wants a positive integer" "${L[@]}" --cases "$T/cases.json" --clients 0
expect_err serve.load-flags.pid "--pid wants a positive integer" "${L[@]}" --cases "$T/cases.json" --pid 12abc
expect_err serve.load-flags.cases-fifo "not a regular file" timeout 10 "${L[@]}" --cases "$T/cases.fifo"
expect_err serve.load-flags.cases-empty "non-empty JSON array" "${L[@]}" --cases "$T/cases-empty.json"
printf 'x\033[31m' > "$T/cases-esc.json"
expect_err serve.load-flags.cases-not-json "is not valid JSON" "${L[@]}" --cases "$T/cases-esc.json"
if "${L[@]}" --cases "$T/cases-esc.json" 2>&1 | grep -q $'\033'; then
    fail serve.load-flags.escaped "a file's control bytes reached the terminal"
else pass serve.load-flags.escaped; fi
node tools/serve_load.mjs --url "$U" --model fx --cases "$T/cases.json" --clients 8 --requests 4 --slots 4 \
    --pid "$MAIN_PID" > "$T/load.out" 2>&1
grep -E '^(PASS|FAIL)' "$T/load.out"
grep -q '^requests_per_s=' "$T/load.out" || fail serve.load.ran "$(tail -3 "$T/load.out")"
h=$(wait_idle "$MAIN_PORT")
case "$h" in *'"slots_busy":0,"queued":0'*) pass serve.load.idle-after;; *) fail serve.load.idle-after "$h";; esac
# The main server, after everything above, exits cleanly on SIGTERM (under ASan: no leaks).
kill -TERM "$MAIN_PID"; wait "$MAIN_PID"; rc=$?
expect_eq serve.main.clean-exit "$rc" 0
