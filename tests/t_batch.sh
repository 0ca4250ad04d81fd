#!/usr/bin/env bash
# cis2 batch / merge / verify-batch (docs/scale.md): every batched item equals
# a solo `cis2 run` (ids, digests, receipt bytes); the output is byte-identical
# for B = 1..16, any sharding, both backends, a resume after kill -9 (torn last
# line included) and x86-64 + aarch64 shards; bad lines become error objects;
# merge refuses duplicates, gaps and torn shards; verify-batch catches doctored
# receipts and fields; hostile files get one line; the progress line appears
# on a terminal only. Rows of docs/errors.md named batch-*/merge-*/vbatch-*.
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/batch"; rm -rf "$T"; mkdir -p "$T"
PY=python3
# The fixture model, with eos_token_id set to an id it often picks, so that
# "stop_at_eos" lines really stop early (mixed finishing steps).
M="$T/m"
python3 tools/make_model.py "$M" >/dev/null || { fail batch.setup "make_model failed"; exit 1; }
$PY - "$M/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["eos_token_id"] = 211
open(sys.argv[1], "w").write(json.dumps(c, indent=2))
PY
# 40 prompts (tools/make_prompts.py): text and id lists, max_tokens 1..17 or
# the -n default, some stop_at_eos
IN="$T/p40.jsonl"
python3 tools/make_prompts.py "$IN" 40
B=(batch --model "$M" --in "$IN" -n 12)

# ---- the reference run, quiet when stderr is not a terminal
"$CIS2" "${B[@]}" --out "$T/ref.jsonl" 2>"$T/ref.err"; rc=$?
[ $rc -eq 0 ] && [ "$(wc -l < "$T/ref.jsonl")" -eq 40 ] && pass "batch.runs (40 lines)" || fail batch.runs "rc=$rc $(head -3 "$T/ref.err")"
[ ! -s "$T/ref.err" ] && pass batch.quiet-without-terminal || fail batch.quiet-without-terminal "stderr: $(head -c 200 "$T/ref.err")"
ls "$T" | grep -q '\.tmp\.' && fail batch.no-temp-files "$(ls "$T")" || pass batch.no-temp-files

# ---- every item equals a solo `cis2 run` of the same prompt: ids, the §12
# digests, CIS2_REF, text and the receipt's bytes (the run's --receipt file)
out=$($PY - "$CIS2" "$M" "$IN" "$T/ref.jsonl" "$T" <<'PY'
import json, subprocess, sys
cis2, model, inp, res, tmp = sys.argv[1:]
ins = [json.loads(l) for l in open(inp, encoding="utf-8")]
outs = [json.loads(l) for l in open(res, encoding="utf-8")]
bad, stopped = [], 0
keys = ["line", "lines", "id", "prompt_token_ids", "generated_token_ids", "text", "table_digest",
        "inv_freq_table_digest", "argmax_digest", "cis2_ref", "receipt"]
for k, (i, o) in enumerate(zip(ins, outs)):
    if list(o) != keys: bad.append("line %d keys %s" % (k + 1, list(o))); continue
    if o["line"] != k + 1 or o["lines"] != 40 or o["id"] != i["id"]: bad.append("line %d head" % (k + 1)); continue
    n = i.get("max_tokens", 12)
    cmd = [cis2, "run", "--model", model, "-n", str(n), "--receipt", tmp + "/solo.txt"]
    cmd += ["--prompt-ids", ",".join(map(str, i["prompt_ids"]))] if "prompt_ids" in i else ["--prompt", i["prompt"]]
    if i.get("stop_at_eos"): cmd.append("--stop-at-eos")
    r = subprocess.run(cmd, capture_output=True)
    kv = {}
    for l in r.stdout.decode("utf-8", "replace").splitlines():
        if l.startswith("CIS2_REF digest="): kv["cis2_ref"] = l.split()[1][7:]
        elif "=" in l: a, b = l.split("=", 1); kv[a] = b
    want_text = json.loads(kv["text"]) if "text" in kv else None
    got = {"prompt_token_ids": ",".join(map(str, o["prompt_token_ids"])),
           "generated_token_ids": ",".join(map(str, o["generated_token_ids"]))}
    for f in ["prompt_token_ids", "generated_token_ids"]:
        if kv.get(f) != got[f]: bad.append("line %d %s" % (k + 1, f))
    for f in ["table_digest", "inv_freq_table_digest", "argmax_digest", "cis2_ref"]:
        if kv.get(f if f != "inv_freq_table_digest" else "inv_freq_table_digest") != o[f]: bad.append("line %d %s" % (k + 1, f))
    if want_text != o["text"]: bad.append("line %d text %r vs %r" % (k + 1, o["text"], want_text))
    if open(tmp + "/solo.txt", encoding="utf-8").read() != o["receipt"]: bad.append("line %d receipt" % (k + 1))
    if i.get("stop_at_eos") and len(o["generated_token_ids"]) < n: stopped += 1
print("bad=%d stopped=%d %s" % (len(bad), stopped, "; ".join(bad[:4])))
PY
)
case "$out" in "bad=0 stopped="[1-9]*) pass "batch.equals-solo-run (40 items: ids, digests, text, receipt bytes; ${out#bad=0 })";;
    *) fail batch.equals-solo-run "$out";; esac

# ---- byte-identical whatever the batch size, backend, threads
bad=""
for b in $(seq 1 16); do
    "$CIS2" "${B[@]}" --out "$T/b$b.jsonl" --batch "$b" 2>/dev/null
    cmp -s "$T/b$b.jsonl" "$T/ref.jsonl" || bad="$bad $b"
done
[ -z "$bad" ] && pass "batch.identical-for-B=1..16" || fail batch.identical-for-B=1..16 "differs for B =$bad"
"$CIS2" "${B[@]}" --out "$T/fast.jsonl" --batch 5 --backend fast --threads 2 2>/dev/null
cmp -s "$T/fast.jsonl" "$T/ref.jsonl" && pass batch.identical-fast-backend-2-threads || fail batch.identical-fast-backend-2-threads "$(cmp "$T/fast.jsonl" "$T/ref.jsonl")"
# every ISA this machine runs, 1 and 2 threads, B = 16 and 7 (batched decode rows)
isas=$(host_isas)
bad=""
for isa in $isas; do for th in 1 2; do for b in 16 7; do
    "$CIS2" "${B[@]}" --out "$T/f.$isa.$th.$b.jsonl" --batch $b --backend fast --isa $isa --threads $th 2>/dev/null
    cmp -s "$T/f.$isa.$th.$b.jsonl" "$T/ref.jsonl" || bad="$bad $isa/$th/B=$b"
done; done; done
[ -z "$bad" ] && pass "batch.identical-fast-every-isa-threads-1-2 ($isas; B = 16, 7)" \
    || fail batch.identical-fast-every-isa-threads-1-2 "differs for$bad"

# ---- shards: --shard i/N then merge, for N = 1, 2, 3, 7 and 41 (> lines: empty shards)
bad=""
for N in 1 2 3 7 41; do
    files=()
    for i in $(seq 0 $((N - 1))); do
        "$CIS2" "${B[@]}" --out "$T/s$N.$i.jsonl" --shard "$i/$N" --batch 3 2>/dev/null
        files+=("$T/s$N.$i.jsonl")
    done
    # shards given in reverse order: merge sorts by "line"
    rev=(); for ((k = ${#files[@]} - 1; k >= 0; k--)); do rev+=("${files[$k]}"); done
    "$CIS2" merge "$T/m$N.jsonl" "${rev[@]}" && cmp -s "$T/m$N.jsonl" "$T/ref.jsonl" || bad="$bad $N"
done
[ -z "$bad" ] && pass "batch.shards-merge-identical (N = 1 2 3 7 41)" || fail batch.shards-merge-identical "differs for N =$bad"
n1=$(wc -l < "$T/s3.1.jsonl"); lines=$(sed 's/^{"line":\([0-9]*\),.*/\1/' "$T/s3.1.jsonl" | tr '\n' ' ')
expect_eq batch.shard-takes-index-mod-N "$n1:$lines" "13:2 5 8 11 14 17 20 23 26 29 32 35 38 "

# ---- kill -9 and resume: deterministic kills (after the k-th line; in the
# middle of a line's write), then a real kill from outside
for k in 1 17 39; do
    rm -f "$T/k.jsonl"
    { CIS2_BATCH_KILL_AFTER=$k "$CIS2" "${B[@]}" --out "$T/k.jsonl" --batch 4; } 2>/dev/null; rc=$?
    n=$(wc -l < "$T/k.jsonl")
    "$CIS2" "${B[@]}" --out "$T/k.jsonl" --batch 7 2>/dev/null
    [ $rc -eq 137 ] && [ "$n" -eq $k ] && cmp -s "$T/k.jsonl" "$T/ref.jsonl" && pass "batch.resume-after-kill-9.after-line-$k" \
        || fail "batch.resume-after-kill-9.after-line-$k" "rc=$rc lines=$n $(cmp "$T/k.jsonl" "$T/ref.jsonl" 2>&1)"
done
rm -f "$T/k.jsonl"
{ CIS2_BATCH_TEAR_AFTER=9 "$CIS2" "${B[@]}" --out "$T/k.jsonl"; } 2>/dev/null; rc=$?
torn=$(tail -c 1 "$T/k.jsonl" | od -An -c | tr -d ' ')
err=$("$CIS2" "${B[@]}" --out "$T/k.jsonl" 2>&1 >/dev/null)
[ $rc -eq 137 ] && [ "$torn" != '\n' ] && cmp -s "$T/k.jsonl" "$T/ref.jsonl" && [[ "$err" == *"dropped an incomplete last line"* ]] \
    && pass batch.resume-drops-torn-last-line || fail batch.resume-drops-torn-last-line "rc=$rc tail=$torn err=$err $(cmp "$T/k.jsonl" "$T/ref.jsonl" 2>&1)"
# a power cut can leave an unsynced append as NUL bytes (the new size, no
# data): that tail is cut off too
head -5 "$T/ref.jsonl" > "$T/nul.jsonl"; head -c 300 /dev/zero >> "$T/nul.jsonl"
err=$("$CIS2" "${B[@]}" --out "$T/nul.jsonl" 2>&1 >/dev/null); rc=$?
[ $rc -eq 0 ] && cmp -s "$T/nul.jsonl" "$T/ref.jsonl" && [[ "$err" == *"dropped an incomplete last line (300 bytes"* ]] \
    && pass batch.resume-drops-nul-tail || fail batch.resume-drops-nul-tail "rc=$rc $err"
# a shard killed and resumed still merges to the same bytes
{ CIS2_BATCH_KILL_AFTER=5 "$CIS2" "${B[@]}" --out "$T/ks1.jsonl" --shard 1/3; } 2>/dev/null
"$CIS2" "${B[@]}" --out "$T/ks1.jsonl" --shard 1/3 2>/dev/null
"$CIS2" merge "$T/km.jsonl" "$T/s3.0.jsonl" "$T/ks1.jsonl" "$T/s3.2.jsonl" && cmp -s "$T/km.jsonl" "$T/ref.jsonl" \
    && pass batch.resumed-shard-merges-identical || fail batch.resumed-shard-merges-identical ""
# from outside, at whatever point it has reached: longer items so it is still running
$PY -c "
import json
for k in range(24): print(json.dumps({'id': 'x%d' % k, 'prompt_ids': [k + 1, 2 * k + 3], 'max_tokens': 200}))" > "$T/long.jsonl"
"$CIS2" batch --model "$M" --in "$T/long.jsonl" --out "$T/long-ref.jsonl" --batch 2 2>/dev/null
"$CIS2" batch --model "$M" --in "$T/long.jsonl" --out "$T/long.jsonl.out" --batch 2 2>/dev/null & pid=$!
for _ in $(seq 400); do [ -s "$T/long.jsonl.out" ] && [ "$(wc -l < "$T/long.jsonl.out")" -ge 3 ] && break; sleep 0.02; done
{ kill -9 $pid; wait $pid; } 2>/dev/null; n=$(wc -l < "$T/long.jsonl.out")
"$CIS2" batch --model "$M" --in "$T/long.jsonl" --out "$T/long.jsonl.out" --batch 5 2>/dev/null
cmp -s "$T/long.jsonl.out" "$T/long-ref.jsonl" && pass "batch.resume-after-external-kill-9 (killed with $n of 24 lines written)" \
    || fail batch.resume-after-external-kill-9 "$(cmp "$T/long.jsonl.out" "$T/long-ref.jsonl" 2>&1)"
# a finished file: a rerun adds nothing and says the same
cp "$T/ref.jsonl" "$T/again.jsonl"
"$CIS2" "${B[@]}" --out "$T/again.jsonl" 2>/dev/null; rc=$?
[ $rc -eq 0 ] && cmp -s "$T/again.jsonl" "$T/ref.jsonl" && pass batch.rerun-of-finished-file-adds-nothing || fail batch.rerun-of-finished-file-adds-nothing "rc=$rc"

# ---- bad lines: an error object each (message, line number), the rest goes on, exit 1
BADIN="$T/bad.jsonl"
$PY - "$BADIN" <<'PY'
import sys
L = [b'{"id": "ok1", "prompt": "Once upon"}',
     b'{"id": "t", "prompt": "x", "frequency_penalty": 0.7}',
     b'',
     b'{"id": "ok1", "prompt": "again"}',
     b'not json',
     b'{"id": "v", "prompt_ids": [1, 320]}',
     b'{"id": "u", "prompt": "caf\xc3"}',
     b'[' * 300 + b']' * 300,
     b'{"id": "both", "prompt": "a", "prompt_ids": [1]}',
     b'{"prompt": "no id"}',
     b'{"id": 7, "prompt": "numeric id"}',
     b'{"id": "mt", "prompt": "a", "max_tokens": 0}',
     b'{"id": "long", "prompt_ids": [1], "max_tokens": 9000}',
     b'{"id": "empty", "prompt": ""}',
     b'{"id": "neg", "prompt_ids": [-1]}',
     b'{"id": "flt", "prompt_ids": [1.5]}',
     b'{"id": "eos", "prompt": "a", "stop_at_eos": 1}',
     b'{"id": "dupkey", "id": "dupkey2", "prompt": "a"}',
     b'{"id": "huge", "prompt": "' + b'a' * (17 << 20) + b'"}',
     b'{"id": "ok2", "prompt_ids": [5, 17, 42], "max_tokens": 3}']
open(sys.argv[1], "wb").write(b"\n".join(L) + b"\n")
PY
"$CIS2" batch --model "$M" --in "$BADIN" --out "$T/bad.out" 2>"$T/bad.err"; rc=$?
got=$($PY - "$T/bad.out" <<'PY'
import json, sys
for l in open(sys.argv[1], encoding="utf-8"):
    o = json.loads(l)
    print("%d|%s|%s" % (o["line"], o["id"], o.get("error", "OK")))
PY
)
want='1|ok1|OK
2|t|unknown field "frequency_penalty" (expected id, prompt, prompt_ids or messages, max_tokens, stop_at_eos, temperature, top_k, top_p, min_p, seed)
3|None|empty line (expected a JSON object)
4|ok1|duplicate id (first at line 1)
5|None|invalid JSON at col 1: unexpected token
6|v|prompt_ids[1] = 320 is outside the vocabulary (vocab_size = 320)
7|None|invalid JSON at col 27: invalid UTF-8 in string
8|None|invalid JSON at col 258: nesting too deep
9|both|give exactly one of "prompt", "prompt_ids" or "messages"
10|None|field "id" is missing
11|None|field "id" must be a string
12|mt|field "max_tokens" must be an integer in [1, 1000000]
13|long|prompt (1 tokens) + max_tokens 9000 exceeds max_position_embeddings = 8192
14|empty|field "prompt" encodes to no tokens
15|neg|prompt_ids[0] = -1 is outside the vocabulary (vocab_size = 320)
16|flt|prompt_ids[0] is not an integer
17|eos|field "stop_at_eos" must be true or false
18|None|field "id" appears more than once
19|None|the line is 17825820 bytes, more than the 16777216 a line may have
20|ok2|OK'
if [ $rc -eq 1 ] && [ "$got" == "$want" ]; then pass "batch.bad-lines-become-error-objects (18 kinds, exit 1)"
else fail batch.bad-lines-become-error-objects "rc=$rc $(diff <(echo "$want") <(echo "$got") | head -6 | tr '\n' ' ')"; fi
expect_eq batch.bad-lines-one-stderr-line "$(sed "s#$T/##" "$T/bad.err")" "cis2 batch: 18 line(s) failed: their error objects are in bad.out"
# integers follow cis2 serve's rule (an integral value however spelled): the
# same request with 5.0, 1.7e1, 4200e-2 and max_tokens 3.0 gives the same bytes
printf '{"id": "a", "prompt_ids": [5, 17, 42], "max_tokens": 3}\n' >"$T/int.jsonl"
printf '{"id": "a", "prompt_ids": [5.0, 1.7e1, 4200e-2], "max_tokens": 3.0}\n' >"$T/intf.jsonl"
"$CIS2" batch --model "$M" --in "$T/int.jsonl" --out "$T/int.out" 2>/dev/null; rc1=$?
"$CIS2" batch --model "$M" --in "$T/intf.jsonl" --out "$T/intf.out" 2>/dev/null; rc2=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && cmp -s "$T/int.out" "$T/intf.out"; then pass batch.integral-floats-are-integers
else fail batch.integral-floats-are-integers "rc=$rc1/$rc2 $(head -c 200 "$T/intf.out")"; fi
# an id beyond int64 is outside the vocabulary, not "not an integer"
printf '{"id": "big", "prompt_ids": [1, 9223372036854775808]}\n' >"$T/big.jsonl"
"$CIS2" batch --model "$M" --in "$T/big.jsonl" --out "$T/big.out" 2>/dev/null
expect_eq batch.id-beyond-int64-outside-vocabulary "$(cat "$T/big.out")" \
    '{"line":1,"lines":1,"id":"big","error":"prompt_ids[1] is outside the vocabulary (vocab_size = 320)"}'
# a UTF-8 BOM (a Windows editor's save) is named on line 1's error line, and
# line 2 runs (before: "unexpected character" at col 1, an invisible byte)
printf '\357\273\277{"id": "b1", "prompt_ids": [1]}\n{"id": "b2", "prompt_ids": [1]}\n' >"$T/bom.jsonl"
"$CIS2" batch --model "$M" --in "$T/bom.jsonl" --out "$T/bom.out" -n 1 2>/dev/null; rc=$?
expect_eq batch.bom-line-named "$rc $(head -1 "$T/bom.out") $(sed -n 2p "$T/bom.out" | cut -c1-29)" \
    '1 {"line":1,"lines":2,"id":null,"error":"invalid JSON at col 1: a UTF-8 byte order mark (BOM) before the JSON (save it without one)"} {"line":2,"lines":2,"id":"b2"'
# a resumed file with error lines says so again (exit 1); all good lines: exit 0
"$CIS2" batch --model "$M" --in "$BADIN" --out "$T/bad.out" 2>/dev/null; expect_eq batch.rerun-keeps-exit-1 "$?" 1
"$CIS2" batch --model "$M" --in "$BADIN" --out "$T/bad.out" --shard 0/1 2>/dev/null; expect_eq batch.shard-0/1-is-whole-file "$?" 1
# --retry-errors: after the input is fixed, the error lines already in --out
# run again and are replaced in place, so the file is the bytes of a fresh run
# of the fixed input (the lines after them are not recomputed). A plain rerun
# of the fixed input is refused: line 3 had no readable id, now it has one;
# in shard 1/2 (without line 3), line 2's error line is one this input no
# longer gives (before: exit 1, the stale error line kept).
printf '%s\n' '{"id": "r1", "prompt_ids": [5, 17], "max_tokens": 2}' \
    '{"id": "r2", "prompt": "a", "logit_bias": 1}' 'not json' \
    '{"id": "r4", "prompt": "b", "max_tokens": 0}' '{"id": "r5", "prompt_ids": [7], "max_tokens": 2}' \
    >"$T/rt-bad.jsonl"
sed 's/, "logit_bias": 1}/}/; s/^not json$/{"id": "r3", "prompt_ids": [9], "max_tokens": 2}/' \
    "$T/rt-bad.jsonl" >"$T/rt-fixed.jsonl"
for sh in "" "--shard 1/2"; do
    rm -f "$T/rt.out" "$T/rt.ref"
    cp "$T/rt-fixed.jsonl" "$T/rt.jsonl"
    "$CIS2" batch --model "$M" --in "$T/rt.jsonl" --out "$T/rt.ref" $sh 2>/dev/null
    cp "$T/rt-bad.jsonl" "$T/rt.jsonl"
    "$CIS2" batch --model "$M" --in "$T/rt.jsonl" --out "$T/rt.out" $sh 2>/dev/null; rc0=$?
    cp "$T/rt-fixed.jsonl" "$T/rt.jsonl"
    cp "$T/rt.out" "$T/rt.before"
    "$CIS2" batch --model "$M" --in "$T/rt.jsonl" --out "$T/rt.out" $sh 2>/dev/null; rc1=$?
    cmp -s "$T/rt.out" "$T/rt.before"; same=$?
    "$CIS2" batch --model "$M" --in "$T/rt.jsonl" --out "$T/rt.out" $sh --retry-errors 2>/dev/null; rc2=$?
    "$CIS2" batch --model "$M" --in "$T/rt.jsonl" --out "$T/rt.out" $sh --retry-errors 2>/dev/null; rc3=$?
    name="batch.retry-errors-in-place${sh:+ ($sh)}"
    if [ $rc0 -eq 1 ] && [ $rc1 -eq 2 ] && [ $same -eq 0 ] && [ $rc2 -eq 1 ] && [ $rc3 -eq 1 ] &&
        cmp -s "$T/rt.out" "$T/rt.ref" && ! cmp -s "$T/rt.before" "$T/rt.ref"; then pass "$name"
    else fail "$name" "rc=$rc0/$rc1/$rc2/$rc3 same=$same $(diff "$T/rt.out" "$T/rt.ref" | head -c 300)"; fi
done
# a prompt too long for max_position_embeddings is refused before its ids are
# decoded to the receipt's prompt bytes (which costs memory for a line refused
# anyway): with a tokenizer.json that cannot decode, the line still says "too
# long" (before: the decoding error, so the decoding came first)
NT="$T/no-tok"; rm -rf "$NT"; cp -r "$M" "$NT"; echo '{}' > "$NT/tokenizer.json"
printf '{"id":"long","prompt_ids":[1,2,3],"max_tokens":9000}\n' > "$T/nt.jsonl"
"$CIS2" batch --model "$NT" --in "$T/nt.jsonl" --out "$T/nt.out" 2>/dev/null; rc=$?
expect_eq batch.length-checked-before-decoding "$rc $(cat "$T/nt.out")" \
    '1 {"line":1,"lines":1,"id":"long","error":"prompt (3 tokens) + max_tokens 9000 exceeds max_position_embeddings = 8192"}'

# ---- chat lines: "messages" rendered with the model's ChatML template (a
# Qwen2-shaped fixture with Qwen2.5's template, as tests/t_chat.sh) or
# --chat-format chatml; each result's receipt is `cis2 run --chat`'s, byte for
# byte (one message NFC changes: prompt-hex is what the ids decode to)
CM="$T/chat"
python3 tools/make_model.py "$CM" --arch qwen2 --layers 1 --hidden 32 --heads 2 --kv-heads 1 \
    --inter 64 --vocab 704 --seed 7 --tokenizer tests/fixtures/tokenizer/qwen.json >/dev/null
CF=tests/fixtures/chat
$PY - "$CF" "$CM" "$T/chat.jsonl" <<'PY'
import json, sys
F, M, out = sys.argv[1:]
json.dump({"chat_template": open(F + "/qwen2.5.jinja").read()}, open(M + "/tokenizer_config.json", "w"))
msgs = lambda n: json.load(open("%s/messages-%s.json" % (F, n)))["messages"]
L = [{"id": "sys", "messages": msgs("system-first"), "max_tokens": 3},
     {"id": "uni", "messages": msgs("unicode"), "max_tokens": 2},
     {"id": "txt", "prompt": "hello", "max_tokens": 2},
     {"id": "role", "messages": [{"role": "tool", "content": "x"}]},
     {"id": "special", "messages": [{"role": "user", "content": "a <|endoftext|>"}]},
     {"id": "ctl", "messages": [{"role": "user", "content": "<|im_start|>"}]},
     {"id": "str", "messages": "hi"},
     {"id": "none", "messages": []},
     {"id": "two", "messages": msgs("one-user"), "prompt": "x"}]
open(out, "w").write("".join(json.dumps(l) + "\n" for l in L))
PY
"$CIS2" batch --model "$CM" --in "$T/chat.jsonl" --out "$T/chat.out" -n 4 2>/dev/null; rc=$?
for k in sys:system-first uni:unicode; do
    "$CIS2" run --model "$CM" --chat "$CF/messages-${k#*:}.json" -n "$([ "${k%%:*}" == sys ] && echo 3 || echo 2)" --receipt "$T/chat-solo.txt" >/dev/null 2>&1
    got=$($PY -c 'import json,sys; [sys.stdout.write(o["receipt"]) for o in map(json.loads, open(sys.argv[1])) if o["id"] == sys.argv[2]]' "$T/chat.out" "${k%%:*}")
    [ -n "$got" ] && [ "$got" == "$(cat "$T/chat-solo.txt")" ] && pass "batch.chat.${k%%:*}.receipt-equals-run-chat" \
        || fail "batch.chat.${k%%:*}.receipt-equals-run-chat" "$(grep "\"${k%%:*}\"" "$T/chat.out" | head -c 300)"
done
got=$($PY -c 'import json,sys; [print("%s|%s" % (o["id"], o.get("error", "OK"))) for o in map(json.loads, open(sys.argv[1]))]' "$T/chat.out")
want='sys|OK
uni|OK
txt|OK
role|field "messages": messages[0].role: must be "system", "user" or "assistant"
special|field "messages": chat: messages[0].content holds the special token "<|endoftext|>" (the template would not escape it; refusing)
ctl|field "messages": chat: messages[0].content holds the special token "<|im_start|>" (the template would not escape it; refusing)
str|field "messages" must be an array of messages
none|field "messages": 0 messages (1 to 100000)
two|give exactly one of "prompt", "prompt_ids" or "messages"'
[ $rc -eq 1 ] && [ "$got" == "$want" ] && pass "batch.chat.lines-and-errors (6 kinds)" \
    || fail batch.chat.lines-and-errors "rc=$rc $(diff <(echo "$want") <(echo "$got") | head -6 | tr '\n' ' ')"
"$CIS2" verify-batch "$T/chat.out" --model "$CM" > "$T/chat.vb" 2>&1
grep -q '3 verified, 0 mismatched' "$T/chat.vb" && pass batch.chat.verify-batch || fail batch.chat.verify-batch "$(tail -1 "$T/chat.vb")"
# --in holds each chat line to its rendered prompt and each error line to
# batch's error (the template, -n as batch had them)
out=$("$CIS2" verify-batch "$T/chat.out" --model "$CM" --in "$T/chat.jsonl" -n 4); rc=$?
expect_eq verify-batch.in-chat "$rc $out" "0 verify-batch: 9 line(s): 3 verified, 0 mismatched, 0 unreadable, 6 error line(s) checked against the input"
# no template: messages lines fail with the reason; --chat-format chatml renders plain ChatML
rm "$CM/tokenizer_config.json"
head -1 "$T/chat.jsonl" > "$T/chat1.jsonl"
"$CIS2" batch --model "$CM" --in "$T/chat1.jsonl" --out "$T/chat-none.out" 2>/dev/null
case "$(cat "$T/chat-none.out")" in *'"error":"field \"messages\": '*'tokenizer_config.json'*'--chat-format chatml'*) pass batch.chat.no-template-error;;
    *) fail batch.chat.no-template-error "$(cat "$T/chat-none.out")";; esac
"$CIS2" batch --model "$CM" --in "$T/chat1.jsonl" --out "$T/chat-ml.out" --chat-format chatml 2>/dev/null
"$CIS2" run --model "$CM" --chat "$CF/messages-system-first.json" --chat-format chatml -n 3 --receipt "$T/chat-solo.txt" >/dev/null 2>&1
expect_eq batch.chat.chat-format-chatml "$($PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())["receipt"], end="")' "$T/chat-ml.out")" "$(cat "$T/chat-solo.txt")"

# ---- rejected files, flags and outputs: one stderr line each, exactly the
# rows of docs/errors.md; FIFOs are refused before any blocking open
ERRORS_DIR="$T"
row() { errors_row "$@"; }
mkfifo "$T/fifo"; mkdir -p "$T/adir"; ln -sf ref.jsonl "$T/link.jsonl"
truncate -s 1100M "$T/big.jsonl"
TO="timeout 20"
row batch-required "batch without --in or --out" "t_batch.sh" "$CIS2" batch --model "$M"
row batch-shard "--shard outside 0 <= i < N" "t_batch.sh" "$CIS2" "${B[@]}" --out "$T/x.jsonl" --shard 3/3
row batch-batch-zero "--batch 0" "t_batch.sh" "$CIS2" "${B[@]}" --out "$T/x.jsonl" --batch 0
row batch-in-missing "--in that does not exist" "t_batch.sh" "$CIS2" batch --model "$M" --in "$T/none.jsonl" --out "$T/x.jsonl"
row batch-in-fifo "--in is a FIFO" "t_batch.sh" $TO "$CIS2" batch --model "$M" --in "$T/fifo" --out "$T/x.jsonl"
# a UTF-16 file (PowerShell's `>`) is refused whole (before: an error line
# for each of its lines and one more for the NUL after the last, exit 1)
printf '{"id":"a","prompt_ids":[1]}\r\n' | iconv -t UTF-16LE | { printf '\377\376'; cat; } >"$T/u16.jsonl"
row batch-in-utf16 "--in in UTF-16 (a byte order mark)" "t_batch.sh" "$CIS2" batch --model "$M" --in "$T/u16.jsonl" --out "$T/x.jsonl"
[ -e "$T/x.jsonl" ] && fail batch.in-utf16-no-out "$T/x.jsonl made" || pass batch.in-utf16-no-out
row batch-in-too-big "--in larger than 1 GiB (refused by its size, unread)" "t_batch.sh" "$CIS2" batch --model "$M" --in "$T/big.jsonl" --out "$T/x.jsonl"
# an input with more lines than memory holds the line index for is refused,
# never cut short: 20 M blank lines under a 1.25 GiB address-space limit (the
# index's growth fails; before, the run went on as an input of 16777216 lines)
if bash -c 'ulimit -v 1250000; "$0" selftest >/dev/null 2>&1' "$CIS2" 2>/dev/null; then
    $PY -c 'import sys; open(sys.argv[1], "w").write("\n" * 20000000)' "$T/nl.jsonl"
    out=$( (ulimit -v 1250000; timeout 20 "$CIS2" batch --model "$M" --in "$T/nl.jsonl" --out "$T/nl.out") 2>&1); rc=$?
    [ $rc -eq 2 ] && [ ! -e "$T/nl.out" ] && [ "$(sed "s#$T/##" <<< "$out")" == "cis2 batch: nl.jsonl: out of memory" ] \
        && pass batch.in-too-many-lines-for-memory-refused \
        || fail batch.in-too-many-lines-for-memory-refused "rc=$rc $out $(head -c 60 "$T/nl.out" 2>/dev/null)"
    rm -f "$T/nl.jsonl" "$T/nl.out"
else skip batch.in-too-many-lines-for-memory-refused "this build cannot run under a 1.25 GiB address-space limit (sanitizer shadow memory?)"; fi
# memory running out on one line is not that line's error: no error line (a
# rerun would skip it as done), the run stops with exit 2 and a rerun retries
# it. 5 M prompt ids under a 200 MB address-space limit (before: an error
# line "invalid JSON at col 8388625: out of memory", id null, exit 1)
if bash -c 'ulimit -v 200000; "$0" selftest >/dev/null 2>&1' "$CIS2" 2>/dev/null; then
    $PY -c 'import sys; open(sys.argv[1], "w").write("{\"id\":\"big\",\"prompt_ids\":[" + ",".join(["1"] * 5000000) + "]}\n")' "$T/oom.jsonl"
    out=$( (ulimit -v 200000; timeout 60 "$CIS2" batch --model "$M" --in "$T/oom.jsonl" --out "$T/oom.out") 2>&1); rc=$?
    [ $rc -eq 2 ] && [[ "$(sed "s#$T/##" <<< "$out")" == "cis2 batch: oom.jsonl: "*"out of memory" ]] && ! grep -qs error "$T/oom.out" \
        && pass batch.out-of-memory-is-no-error-line \
        || fail batch.out-of-memory-is-no-error-line "rc=$rc $out $(head -c 120 "$T/oom.out" 2>/dev/null)"
    rm -f "$T/oom.jsonl" "$T/oom.out"
else skip batch.out-of-memory-is-no-error-line "this build cannot run under a 200 MB address-space limit (sanitizer shadow memory?)"; fi
row batch-in-longer-than-size "--in longer than its size says (/proc: size 0; a file still being written)" "t_batch.sh" "$CIS2" batch --model "$M" --in /proc/self/status --out "$T/x.jsonl"
row batch-out-device "--out a character device" "t_batch.sh" "$CIS2" "${B[@]}" --out /dev/null
row batch-out-fifo "--out a FIFO" "t_batch.sh" $TO "$CIS2" "${B[@]}" --out "$T/fifo"
row batch-out-directory "--out a directory" "t_batch.sh" "$CIS2" "${B[@]}" --out "$T/adir"
row batch-out-symlink "--out a symbolic link" "t_batch.sh" "$CIS2" "${B[@]}" --out "$T/link.jsonl"
row batch-out-is-in "--out the --in file" "t_batch.sh" "$CIS2" batch --model "$M" --in "$IN" --out "$IN"
# --out - and merge OUT - are refused (before: a file named "-" made in the
# working directory, exit 0); run in $T so that a regression leaves it there
CIS2_ABS="$(cd "$(dirname "$CIS2")" && pwd)/$(basename "$CIS2")" TA="$(cd "$T" && pwd)"
row batch-out-dash "--out - (the results file is appended to and resumed: no standard output)" "t_batch.sh" \
    env -C "$T" "$CIS2_ABS" batch --model "$TA/m" --in "$TA/p40.jsonl" -n 12 --out -
printf 'hello\n' > "$T/foreign.jsonl"
row batch-out-foreign "--out holding something else" "t_batch.sh" "$CIS2" "${B[@]}" --out "$T/foreign.jsonl"
# a file of someone else's that merely lacks its final newline is not a torn
# result line: refused, not cut off
printf '{"results": []}' > "$T/foreign-nonl.json"
row batch-out-foreign-no-newline "--out holding something else, with no newline at its end" "t_batch.sh batch.foreign-out-without-newline-untouched" "$CIS2" "${B[@]}" --out "$T/foreign-nonl.json"
[ "$(cat "$T/foreign-nonl.json")" == '{"results": []}' ] && pass batch.foreign-out-without-newline-untouched \
    || fail batch.foreign-out-without-newline-untouched "now: $(head -c 80 "$T/foreign-nonl.json")"
cp "$T/ref.jsonl" "$T/o-input.jsonl"
row batch-out-other-input "--out holding results of an input with a different line count" "t_batch.sh" "$CIS2" batch --model "$M" --in "$BADIN" --out "$T/o-input.jsonl"
cp "$T/s3.1.jsonl" "$T/o-shard.jsonl"
row batch-out-other-shard "--out holding another shard's results" "t_batch.sh" "$CIS2" "${B[@]}" --out "$T/o-shard.jsonl" --shard 0/3
# another split of the input: every line of shard 0/4 is one of 0/2's (and of
# the whole input's), so only their order tells; appending would leave the file
# out of input order (before: exit 0, lines 3, 7, ... after 1, 5, 9)
rm -f "$T/o-split.jsonl"
{ CIS2_BATCH_KILL_AFTER=3 "$CIS2" "${B[@]}" --out "$T/o-split.jsonl" --shard 0/4; } 2>/dev/null
cp "$T/o-split.jsonl" "$T/o-split.keep"
row batch-out-other-split "--out written with --shard 0/4, resumed as --shard 0/2" "t_batch.sh batch.other-split-untouched" "$CIS2" "${B[@]}" --out "$T/o-split.jsonl" --shard 0/2
out=$("$CIS2" "${B[@]}" --out "$T/o-split.jsonl" 2>&1); rc=$?
[ $rc -eq 2 ] && [[ "$out" == *": line 2: input line 5, where input line 2 was expected "* ]] && cmp -s "$T/o-split.jsonl" "$T/o-split.keep" \
    && pass batch.other-split-untouched || fail batch.other-split-untouched "rc=$rc $out $(cmp "$T/o-split.jsonl" "$T/o-split.keep" 2>&1)"
# a run with error lines, killed and resumed, still gives the uninterrupted bytes
rm -f "$T/k-bad.jsonl"
{ CIS2_BATCH_KILL_AFTER=6 "$CIS2" batch --model "$M" --in "$BADIN" --out "$T/k-bad.jsonl" --batch 3; } 2>/dev/null; rc=$?
"$CIS2" batch --model "$M" --in "$BADIN" --out "$T/k-bad.jsonl" --batch 5 2>/dev/null; rc2=$?
[ $rc -eq 137 ] && [ $rc2 -eq 1 ] && cmp -s "$T/k-bad.jsonl" "$T/bad.out" && pass batch.resume-after-kill-9.with-error-lines \
    || fail batch.resume-after-kill-9.with-error-lines "rc=$rc rc2=$rc2 $(cmp "$T/k-bad.jsonl" "$T/bad.out" 2>&1)"
sed '1s/"p00"/"q00"/' "$IN" > "$T/changed.jsonl"; cp "$T/ref.jsonl" "$T/o-changed.jsonl"
row batch-out-input-changed "--out made from an input whose ids have changed since" "t_batch.sh" "$CIS2" batch --model "$M" --in "$T/changed.jsonl" --out "$T/o-changed.jsonl"
# nor is a line appended to a CRLF file (before: exit 0, LF lines after CRLF ones)
head -3 "$T/ref.jsonl" | sed 's/$/\r/' > "$T/o-crlf.jsonl"
row batch-out-crlf "--out whose lines end in CRLF" "t_batch.sh" "$CIS2" "${B[@]}" --out "$T/o-crlf.jsonl"
{ head -1 "$T/ref.jsonl"; head -1 "$T/ref.jsonl"; } > "$T/o-twice.jsonl"
row batch-out-twice "--out holding one input line twice" "t_batch.sh" "$CIS2" "${B[@]}" --out "$T/o-twice.jsonl"
# a resume checks the lines already there against this run's model, prompts,
# -n and --stop-at-eos (before: the new lines were appended after lines of
# another configuration, exit 0, and verify-batch passed a mixed -n file)
python3 tools/make_model.py "$T/m-seed7" --seed 7 >/dev/null
printf '%s\n' '{"id": "c1", "prompt_ids": [5, 17]}' '{"id": "c2", "prompt_ids": [198]}' \
    '{"id": "c3", "prompt_ids": [7], "max_tokens": 9000}' '{"id": "c4", "prompt_ids": [8]}' >"$T/cfg.jsonl"
"$CIS2" batch --model "$M" --in "$T/cfg.jsonl" --out "$T/cfg.ref" -n 3 2>/dev/null
head -3 "$T/cfg.ref" >"$T/cfg.part"
sed '1s/\[5, 17\]/[5, 18]/' "$T/cfg.jsonl" >"$T/cfg-prompt.jsonl"
sed '3s/9000/2/' "$T/cfg.jsonl" >"$T/cfg-fixed.jsonl"
cfg_row() { # ID WHAT ARGS...: the row, and the file left as it was
    local id="$1" what="$2"; shift 2
    cp "$T/cfg.part" "$T/cfg.out"
    row "$id" "$what" "t_batch.sh batch.resume-checks-configuration" "$CIS2" batch --out "$T/cfg.out" "$@"
    cmp -s "$T/cfg.out" "$T/cfg.part" || fail "batch.resume-checks-configuration.$id" "--out was changed"
}
cfg_row batch-out-other-n "--out made with another -n, resumed" --model "$M" --in "$T/cfg.jsonl" -n 4
cfg_row batch-out-other-stop "--out made without --stop-at-eos, resumed with it (a line that now stops earlier)" \
    --model "$M" --in "$T/cfg.jsonl" -n 3 --stop-at-eos
cfg_row batch-out-other-model "--out made with another model, resumed" --model "$T/m-seed7" --in "$T/cfg.jsonl" -n 3
cfg_row batch-out-prompt-changed "--out made from an input whose prompt (not id) has changed since" \
    --model "$M" --in "$T/cfg-prompt.jsonl" -n 3
cfg_row batch-out-stale-error-line "--out holding an error line that the fixed input no longer gives (--retry-errors reruns it)" \
    --model "$M" --in "$T/cfg-fixed.jsonl" -n 3
cfg_row batch-out-result-now-error "--out holding a result for a line that now fails (-n beyond max_position_embeddings)" \
    --model "$M" --in "$T/cfg.jsonl" -n 9000
cp "$T/cfg.part" "$T/cfg.out"
"$CIS2" batch --model "$M" --in "$T/cfg.jsonl" --out "$T/cfg.out" -n 3 2>/dev/null; rc=$?
[ $rc -eq 1 ] && cmp -s "$T/cfg.out" "$T/cfg.ref" && pass batch.resume-checks-configuration.same-resumes \
    || fail batch.resume-checks-configuration.same-resumes "rc=$rc $(cmp "$T/cfg.out" "$T/cfg.ref" 2>&1)"
cp "$T/s3.1.jsonl" "$T/locked.jsonl"
if command -v flock >/dev/null 2>&1; then
    flock -x "$T/locked.jsonl" -c "sleep 30" & lockpid=$!
    for _ in $(seq 100); do flock -n "$T/locked.jsonl" true 2>/dev/null || break; sleep 0.05; done
    row batch-out-locked "--out being written by another cis2 batch" "t_batch.sh" "$CIS2" "${B[@]}" --out "$T/locked.jsonl" --shard 1/3
    kill $lockpid 2>/dev/null; wait $lockpid 2>/dev/null
else skip errors.batch-out-locked "flock(1) not installed"; fi
row batch-lines-failed "input lines that cannot run (error objects written, the rest goes on)" "t_batch.sh batch.bad-lines-become-error-objects" "$CIS2" batch --model "$M" --in "$BADIN" --out "$T/failed.jsonl"
[ "$(cmp "$T/failed.jsonl" "$T/bad.out" 2>&1)" == "" ] && pass batch.errors-are-deterministic || fail batch.errors-are-deterministic ""
# The notes name --out escaped: an ESC and a newline in its directory stay
# one line with \x1b and \n (the failed-lines note, and the resume notes).
ED=$(printf '%s/esc\033[31m\nX' "$T"); mkdir -p "$ED"
out=$("$CIS2" batch --model "$M" --in "$BADIN" --out "$ED/f.jsonl" 2>&1 >/dev/null); rc=$?
if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && ! printf '%s' "$out" | grep -q $'\e' &&
    printf '%s' "$out" | grep -qF 'esc\x1b[31m\nX/f.jsonl'; then pass batch.notes-escape-the-out-path
else fail batch.notes-escape-the-out-path "rc=$rc: $(printf '%s' "$out" | cat -v)"; fi
printf '{"line":1,' >> "$ED/f.jsonl" # a torn last line: the resume drops it, naming the file
out=$("$CIS2" batch --model "$M" --in "$BADIN" --out "$ED/f.jsonl" 2>&1 >/dev/null)
if ! printf '%s' "$out" | grep -q $'\e' && printf '%s\n' "$out" | grep -qF 'esc\x1b[31m\nX/f.jsonl: dropped an incomplete last line'; then
    pass batch.resume-note-escapes-the-out-path
else fail batch.resume-note-escapes-the-out-path "$(printf '%s' "$out" | cat -v)"; fi
cp "$T/s3.1.jsonl" "$T/torn.jsonl"; printf '{"line":41,' >> "$T/torn.jsonl"
"$CIS2" batch --model "$M" --in "$BADIN" --out "$T/other.jsonl" --shard 0/2 2>/dev/null
printf '{}\n' > "$T/notresult.jsonl"
R="$T/merged.jsonl"; rm -f "$R"
row merge-usage "merge without a shard" "t_batch.sh" "$CIS2" merge "$R"
row merge-duplicate "the same input line in two shards" "t_batch.sh" "$CIS2" merge "$R" "$T/s3.0.jsonl" "$T/s3.1.jsonl" "$T/s3.1.jsonl" "$T/s3.2.jsonl"
row merge-gap "input lines no shard holds (a shard missing)" "t_batch.sh" "$CIS2" merge "$R" "$T/s3.0.jsonl" "$T/s3.2.jsonl"
row merge-torn "a shard whose last line is incomplete (killed, not resumed)" "t_batch.sh" "$CIS2" merge "$R" "$T/s3.0.jsonl" "$T/torn.jsonl" "$T/s3.2.jsonl"
row merge-other-input "shards of different inputs" "t_batch.sh" "$CIS2" merge "$R" "$T/s3.0.jsonl" "$T/other.jsonl"
row merge-not-result "a line that is not a result" "t_batch.sh" "$CIS2" merge "$R" "$T/notresult.jsonl"
# CRLF lines (a shard rewritten by a Windows tool) are refused, not copied
# into OUT (before: exit 0, OUT with 13 CRLF lines)
sed 's/$/\r/' "$T/s3.1.jsonl" > "$T/crlf.jsonl"
row merge-crlf "a shard whose lines end in CRLF" "t_batch.sh" "$CIS2" merge "$R" "$T/s3.0.jsonl" "$T/crlf.jsonl" "$T/s3.2.jsonl"
: > "$T/empty1.jsonl"; : > "$T/empty2.jsonl"
# no line says how many input lines there are (before: an empty OUT, exit 0)
row merge-all-empty "every shard empty (no line says how many input lines there are)" "t_batch.sh" "$CIS2" merge "$R" "$T/empty1.jsonl" "$T/empty2.jsonl"
row merge-shard-fifo "a shard that is a FIFO" "t_batch.sh" $TO "$CIS2" merge "$R" "$T/fifo"
row merge-out-directory "OUT a directory" "t_batch.sh" "$CIS2" merge "$T/adir" "$T/s3.0.jsonl"
cp "$T/s3.1.jsonl" "$T/s3.1.keep"; ln -f "$T/s3.1.jsonl" "$T/s3.1.hard"
row merge-out-is-a-shard "OUT one of the shards (a hard link to it too)" "t_batch.sh" "$CIS2" merge "$T/s3.1.hard" "$T/s3.0.jsonl" "$T/s3.1.jsonl" "$T/s3.2.jsonl"
row merge-out-dash "OUT - (written whole and renamed into place: no standard output)" "t_batch.sh" \
    env -C "$T" "$CIS2_ABS" merge - "$TA/s3.0.jsonl" "$TA/s3.1.jsonl" "$TA/s3.2.jsonl"
[ -e "$T/-" ] && fail batch.out-dash-makes-no-file "$(ls -l "$T/-")" || pass batch.out-dash-makes-no-file
cmp -s "$T/s3.1.jsonl" "$T/s3.1.keep" && pass batch.merge-leaves-its-shards-alone || fail batch.merge-leaves-its-shards-alone "s3.1.jsonl changed"
rm -f "$T/s3.1.hard" "$T/s3.1.keep"
[ ! -e "$R" ] && ! ls "$T" | grep -q '\.tmp\.' && pass merge.refusals-write-nothing || fail merge.refusals-write-nothing "$(ls "$T" | grep 'merged\|tmp')"
row vbatch-usage "verify-batch without --model" "t_batch.sh" "$CIS2" verify-batch "$T/ref.jsonl"
row vbatch-fifo "verify-batch of a FIFO" "t_batch.sh" $TO "$CIS2" verify-batch "$T/fifo" --model "$M"
row vbatch-missing "verify-batch of a file that does not exist" "t_batch.sh" "$CIS2" verify-batch "$T/none.jsonl" --model "$M"
row vbatch-shard "verify-batch with --shard 3/3" "t_batch.sh" "$CIS2" verify-batch "$T/ref.jsonl" --model "$M" --shard 3/3
rm -f "$T/big.jsonl"

# ---- verify-batch: all verified; one line per doctored item
out=$("$CIS2" verify-batch "$T/ref.jsonl" --model "$M" --batch 6); rc=$?
[ $rc -eq 0 ] && [ "$out" == "verify-batch: 40 line(s): 40 verified, 0 mismatched, 0 unreadable, 0 error line(s) without a receipt" ] \
    && pass verify-batch.all-verified || fail verify-batch.all-verified "rc=$rc $out"
o1=$("$CIS2" verify-batch "$T/ref.jsonl" --model "$M" --batch 1); o16=$("$CIS2" verify-batch "$T/ref.jsonl" --model "$M" --batch 16 --backend fast)
[ "$o1" == "$out" ] && [ "$o16" == "$out" ] && pass verify-batch.same-for-B=1,16,fast || fail verify-batch.same-for-B=1,16,fast "$o1 / $o16"
$PY - "$T/ref.jsonl" "$T/doctored.jsonl" <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
def flip(h): return h[:-1] + ("0" if h[-1] != "0" else "1")
r = L[4]["receipt"].split("\n")                       # line 5: the receipt's witness digest
r = [("witness-digest " + flip(x.split()[1])) if x.startswith("witness-digest ") else x for x in r]
L[4]["receipt"] = "\n".join(r)
L[9]["generated_token_ids"][0] ^= 1                    # line 10: the JSON ids, receipt intact
L[14]["text"] = "doctored"                             # line 15: the text
r = L[19]["receipt"].split("\n")                       # line 20: receipt ids and digests together
def bump(v): i = v.split(","); i[0] = str((int(i[0]) + 1) % 320); return ",".join(i)
r = [("generated-token-ids " + bump(x.split()[1])) if x.startswith("generated-token-ids ") else x for x in r]
L[19]["receipt"] = "\n".join(r)
L[24]["receipt"] = "CIS-2-RECEIPT v1\nnonsense\n"      # line 25: unreadable receipt
L[29]["line"] = 99                                     # line 30: a header out of range
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for o in L: f.write(json.dumps(o, ensure_ascii=False, separators=(",", ":")) + "\n")
PY
out=$("$CIS2" verify-batch "$T/doctored.jsonl" --model "$M"); rc=$?
ok=1
echo "$out" | grep -q '^MISMATCH line 5 (input line 5, id "p04"): witness-digest (receipt ' || ok=0
echo "$out" | grep -qx "MISMATCH line 10 (input line 10, id \"p09\"): the receipt verifies, but not the line's generated_token_ids" || ok=0
echo "$out" | grep -qx "MISMATCH line 15 (input line 15, id \"p14\"): the receipt verifies, but not the line's text" || ok=0
echo "$out" | grep -q '^MISMATCH line 20 (input line 20, id "p19"): generated-token-ids (receipt ' || ok=0
echo "$out" | grep -q '^UNREADABLE line 25 (input line 25, id "p24"): receipt: line 2: ' || ok=0
echo "$out" | grep -qx 'UNREADABLE line 30: "line" 99 is beyond "lines" 40' || ok=0  # no half-read input line or id
echo "$out" | grep -qx 'MISSING input line(s) 30 (1 of the 40): no result line' || ok=0  # so no line holds input line 30
[ $rc -eq 1 ] && [ $ok -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 8 ] && \
    [ "$(echo "$out" | tail -1)" == "verify-batch: 40 line(s): 34 verified, 4 mismatched, 2 unreadable, 0 error line(s) without a receipt; input lines missing or given twice: 1" ] \
    && pass verify-batch.catches-doctored-receipts-and-fields || fail verify-batch.catches-doctored-receipts-and-fields "rc=$rc $out"
out=$("$CIS2" verify-batch "$T/bad.out" --model "$M"); rc=$?
[ $rc -eq 0 ] && [ "$(echo "$out" | grep -c '^SKIP')" -eq 18 ] && [[ "$(echo "$out" | tail -1)" == *"2 verified, 0 mismatched, 0 unreadable, 18 error line(s)"* ]] \
    && pass verify-batch.error-lines-skipped-and-counted || fail verify-batch.error-lines-skipped-and-counted "rc=$rc $(echo "$out" | tail -1)"
# what differs when no value does: a blank between fields is not "set or
# order of fields"; swapped fields are their order, an added one the set; a
# CRLF line ending (another tool's rewrite) makes the line unreadable, as it
# does for resume and merge
$PY - "$T/ref.jsonl" "$T/layout.jsonl" <<'PY'
import json, sys
L = open(sys.argv[1], encoding="utf-8").read().splitlines()
L[0] = L[0].replace(',"lines"', ', "lines"', 1)
L[3] += "\r"
o = json.loads(L[1]); L[1] = json.dumps({"lines": o.pop("lines"), **o}, ensure_ascii=False, separators=(",", ":"))
o = json.loads(L[2]); o["note"] = 1; L[2] = json.dumps(o, ensure_ascii=False, separators=(",", ":"))
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(L) + "\n")
PY
out=$("$CIS2" verify-batch "$T/layout.jsonl" --model "$M"); rc=$?
want=$(cat <<'EOF'
MISMATCH line 1 (input line 1, id "p00"): the receipt verifies, but not the line's bytes between the fields (whitespace)
MISMATCH line 2 (input line 2, id "p01"): the receipt verifies, but not the line's order of fields
MISMATCH line 3 (input line 3, id "p02"): the receipt verifies, but not the line's set of fields
UNREADABLE line 4: a \r\n line ending: cis2 batch writes \n alone
MISSING input line(s) 4 (1 of the 40): no result line
verify-batch: 40 line(s): 36 verified, 3 mismatched, 1 unreadable, 0 error line(s) without a receipt; input lines missing or given twice: 1
EOF
)
[ $rc -eq 1 ] && [ "$out" == "$want" ] && pass verify-batch.names-layout-differences || fail verify-batch.names-layout-differences "rc=$rc $out"
# a result line with an "error" field added keeps its receipt: it is not
# skipped as an error line (that hid any doctoring of it), the real error
# lines still are
$PY - "$T/bad.out" "$T/err-added.jsonl" <<'PY'
import json, sys
L = open(sys.argv[1], encoding="utf-8").read().splitlines(keepends=True)
o = json.loads(L[0]); o["error"] = "x"; o["generated_token_ids"][0] ^= 1
L[0] = json.dumps(o, ensure_ascii=False, separators=(",", ":")) + "\n"
open(sys.argv[2], "w", encoding="utf-8").write("".join(L))
PY
out=$("$CIS2" verify-batch "$T/err-added.jsonl" --model "$M"); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -qx 'UNREADABLE line 1 (input line 1, id "ok1"): an "error" field, but not an error line as cis2 batch writes it (other fields)' \
    && [[ "$(echo "$out" | tail -1)" == *"1 verified, 0 mismatched, 1 unreadable, 18 error line(s)"* ]] \
    && pass verify-batch.result-with-error-field-not-skipped || fail verify-batch.result-with-error-field-not-skipped "rc=$rc $(echo "$out" | grep -v ^SKIP)"
# an error message that is not valid UTF-8 once cut (a long non-ASCII unknown
# field) is still an error line
$PY -c 'import json; print(json.dumps({"id": "a", "prompt": "hi", "\u00e9" * 60: 1}, ensure_ascii=False))' > "$T/uf.jsonl"
"$CIS2" batch --model "$M" --in "$T/uf.jsonl" --out "$T/uf.out" 2>/dev/null
out=$("$CIS2" verify-batch "$T/uf.out" --model "$M"); rc=$?
[ $rc -eq 0 ] && [ "$(echo "$out" | tail -1)" == "verify-batch: 1 line(s): 0 verified, 0 mismatched, 0 unreadable, 1 error line(s) without a receipt" ] \
    && pass verify-batch.error-line-with-cut-message-skipped || fail verify-batch.error-line-with-cut-message-skipped "rc=$rc $out"
# the unknown field's name is cut between two characters, never inside one
# (which printed as U+FFFD)
$PY -c 'import json, sys; e = json.loads(open(sys.argv[1], encoding="utf-8").read())["error"]; sys.exit(e != "unknown field \"" + "\u00e9" * 39 + " (expected id, prompt, prompt_ids or messages, max_tokens, stop_at_eos, temperature, top_k, top_p, min_p, seed)")' "$T/uf.out" \
    && pass batch.unknown-field-name-cut-between-characters || fail batch.unknown-field-name-cut-between-characters "$(cat "$T/uf.out")"
python3 tools/make_model.py "$T/other-model" --seed 7 >/dev/null
out=$("$CIS2" verify-batch "$T/ref.jsonl" --model "$T/other-model"); rc=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | grep -c '^MISMATCH line [0-9]* .*: weights-sha256')" -eq 40 ] && pass verify-batch.other-model-every-line-mismatches \
    || fail verify-batch.other-model-every-line-mismatches "rc=$rc $(echo "$out" | tail -2)"
# receipts this model cannot re-run (more positions than it has) are each that
# line's verdict, and the rest is still checked: a model with
# max_position_embeddings 8 (every line: config-sha256), and one doctored
# gen-toks 9000 next to intact lines
python3 tools/make_model.py "$T/pos8-model" --max-pos 8 >/dev/null
out=$("$CIS2" verify-batch "$T/ref.jsonl" --model "$T/pos8-model" 2>&1); rc=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | grep -c '^MISMATCH line [0-9]* .*: config-sha256')" -eq 40 ] && pass verify-batch.smaller-max-pos-model-every-line-mismatches \
    || fail verify-batch.smaller-max-pos-model-every-line-mismatches "rc=$rc $(echo "$out" | tail -2)"
$PY - "$T/ref.jsonl" "$T/gen9000.jsonl" <<'PY'
import json, re, sys
L = open(sys.argv[1], encoding="utf-8").read().splitlines(keepends=True)
o = json.loads(L[0]); r = o["receipt"]
r = re.sub(r"gen-toks \d+", "gen-toks 9000", r)
r = re.sub(r"generated-token-ids [0-9,]+", "generated-token-ids " + ",".join(["28"] * 9000), r)
o["receipt"] = r
L[0] = json.dumps(o, ensure_ascii=False, separators=(",", ":")) + "\n"
open(sys.argv[2], "w", encoding="utf-8").write("".join(L))
PY
out=$("$CIS2" verify-batch "$T/gen9000.jsonl" --model "$M" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -qx 'UNREADABLE line 1 (input line 1, id "p00"): the receipt cannot be re-run with this model: prompt (3 tokens) + gen-toks 9000 exceeds max_position_embeddings = 8192' \
    && [ "$(echo "$out" | tail -1)" == "verify-batch: 40 line(s): 39 verified, 0 mismatched, 1 unreadable, 0 error line(s) without a receipt" ] \
    && pass verify-batch.receipt-beyond-max-pos-is-one-line || fail verify-batch.receipt-beyond-max-pos-is-one-line "rc=$rc $out"
cp "$T/s3.1.jsonl" "$T/vtorn.jsonl"; printf '{"line":2' >> "$T/vtorn.jsonl"
out=$("$CIS2" verify-batch "$T/vtorn.jsonl" --model "$M"); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -qx 'UNREADABLE line 14: incomplete last line (an interrupted write)' && pass verify-batch.torn-last-line-unreadable \
    || fail verify-batch.torn-last-line-unreadable "rc=$rc $out"
# input lines left out or given twice: each receipt may verify, the file does
# not (an auditor's copy with lines deleted passed); a shard file verifies with
# its --shard, and a line of another shard there is unreadable
sed '5d;9d' "$T/ref.jsonl" > "$T/gap.jsonl"
out=$("$CIS2" verify-batch "$T/gap.jsonl" --model "$M"); rc=$?
[ $rc -eq 1 ] && [ "$out" == "MISSING input line(s) 5, 9 (2 of the 40): no result line
verify-batch: 38 line(s): 38 verified, 0 mismatched, 0 unreadable, 0 error line(s) without a receipt; input lines missing or given twice: 2" ] \
    && pass verify-batch.missing-lines-found || fail verify-batch.missing-lines-found "rc=$rc $out"
# an empty results file cannot be shown whole (before: "0 line(s)", exit 0:
# a file emptied by accident or on purpose passed), as merge-all-empty
: >"$T/vempty.jsonl"
out=$("$CIS2" verify-batch "$T/vempty.jsonl" --model "$M"); rc=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | head -1)" == "MISSING input line(s): the file holds no line, so nothing says how many input lines there are; nothing verified" ] \
    && pass verify-batch.empty-file-not-whole || fail verify-batch.empty-file-not-whole "rc=$rc $out"
(cat "$T/ref.jsonl"; sed -n 3p "$T/ref.jsonl") > "$T/dup.jsonl"
out=$("$CIS2" verify-batch "$T/dup.jsonl" --model "$M"); rc=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | head -1)" == "DUPLICATE input line 3: 2 result lines" ] \
    && [[ "$(echo "$out" | tail -1)" == *"41 verified, 0 mismatched"*"; input lines missing or given twice: 1" ]] \
    && pass verify-batch.duplicate-line-found || fail verify-batch.duplicate-line-found "rc=$rc $out"
out=$("$CIS2" verify-batch "$T/s3.1.jsonl" --model "$M" --shard 1/3); rc=$?
out2=$("$CIS2" verify-batch "$T/s3.1.jsonl" --model "$M"); rc2=$?
out3=$("$CIS2" verify-batch "$T/s3.1.jsonl" --model "$M" --shard 0/3); rc3=$?
[ $rc -eq 0 ] && [ "$out" == "verify-batch: 13 line(s): 13 verified, 0 mismatched, 0 unreadable, 0 error line(s) without a receipt" ] \
    && [ $rc2 -eq 1 ] && [[ "$out2" == "MISSING input line(s) 1, 3, 4, 6, 7, 9, 10, 12, 13, 15 and 17 more (27 of the 40): no result line"* ]] \
    && [ $rc3 -eq 1 ] && [ "$(echo "$out3" | grep -c '^UNREADABLE line [0-9]* (input line [0-9]*, id "p[0-9]*"): input line [0-9]* is not in shard 0/3$')" -eq 13 ] \
    && pass verify-batch.shard-file-with-its-shard || fail verify-batch.shard-file-with-its-shard "rc=$rc/$rc2/$rc3 $out | $out2 | $(echo "$out3" | tail -2)"
$PY - "$T/ref.jsonl" "$T/lines.jsonl" <<'PY'
import json, sys
L = open(sys.argv[1], encoding="utf-8").read().splitlines()
o = json.loads(L[6]); o["lines"] = 41; L[6] = json.dumps(o, ensure_ascii=False, separators=(",", ":"))
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(L) + "\n")
PY
out=$("$CIS2" verify-batch "$T/lines.jsonl" --model "$M"); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -qx 'UNREADABLE line 7 (input line 7, id "p06"): "lines" 41, but the file'"'"'s first result line says 40' \
    && pass verify-batch.lines-disagreeing-unreadable || fail verify-batch.lines-disagreeing-unreadable "rc=$rc $out"

# ---- verify-batch --in: every line held to its input line. A receipt covers
# neither "id" nor what was asked for, so without --in a file with two ids
# swapped, or a result replaced by a made-up error line, verifies (exit 0:
# the documented limit, shown here); with --in each is a MISMATCH naming the
# line, its id and the field (before: no --in, exit 2).
vbi() { "$CIS2" verify-batch "$@" --model "$M"; }
out=$(vbi "$T/ref.jsonl" --in "$IN" -n 12); rc=$?
expect_eq verify-batch.in-correct-file "$rc $out" \
    "0 verify-batch: 40 line(s): 40 verified, 0 mismatched, 0 unreadable, 0 error line(s) checked against the input"
out=$(vbi "$T/bad.out" --in "$BADIN"); rc=$?
expect_eq verify-batch.in-error-lines-rechecked "$rc $out" \
    "0 verify-batch: 20 line(s): 2 verified, 0 mismatched, 0 unreadable, 18 error line(s) checked against the input"
$PY - "$T/ref.jsonl" "$T/swapped.jsonl" "$T/madeup.jsonl" <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
def dump(path, L):
    with open(path, "w", encoding="utf-8") as f:
        for o in L: f.write(json.dumps(o, ensure_ascii=False, separators=(",", ":")) + "\n")
S = [dict(o) for o in L]; S[0]["id"], S[1]["id"] = L[1]["id"], L[0]["id"]; dump(sys.argv[2], S)
E = [dict(o) for o in L]; E[2] = {"line": 3, "lines": 40, "id": "p02", "error": "field \"prompt\" encodes to no tokens"}; dump(sys.argv[3], E)
PY
out0=$(vbi "$T/swapped.jsonl"); rc0=$?
out=$(vbi "$T/swapped.jsonl" --in "$IN" -n 12); rc=$?
[ $rc0 -eq 0 ] && [ $rc -eq 1 ] && [ "$out" == 'MISMATCH line 1 (input line 1, id "p01"): id: the line says "p01", but input line 1'"'"'s id is "p00"
MISMATCH line 2 (input line 2, id "p00"): id: the line says "p00", but input line 2'"'"'s id is "p01"
verify-batch: 40 line(s): 38 verified, 2 mismatched, 0 unreadable, 0 error line(s) checked against the input' ] \
    && pass verify-batch.in-swapped-ids || fail verify-batch.in-swapped-ids "rc=$rc0/$rc $(echo "$out0" | tail -1) | $out"
out0=$(vbi "$T/madeup.jsonl"); rc0=$?
out=$(vbi "$T/madeup.jsonl" --in "$IN" -n 12); rc=$?
[ $rc0 -eq 0 ] && [ $rc -eq 1 ] && [ "$out" == 'MISMATCH line 3 (input line 3, id "p02"): error: the line says "field \"prompt\" encodes to no tokens", but input line 3 runs (cis2 batch writes a result for it, not an error)
verify-batch: 40 line(s): 39 verified, 1 mismatched, 0 unreadable, 0 error line(s) checked against the input' ] \
    && pass verify-batch.in-made-up-error-line || fail verify-batch.in-made-up-error-line "rc=$rc0/$rc $(echo "$out0" | tail -1) | $out"
# a real error line with another message, and a result where batch writes an
# error (the line of an input that fails now: max_tokens beyond max_pos)
$PY - "$T/bad.out" "$BADIN" "$T/bad-err.out" "$T/bad-in2.jsonl" <<'PY'
import json, sys
L = open(sys.argv[1], encoding="utf-8").read().splitlines(keepends=True)
o = json.loads(L[1]); o["error"] = "out of memory"
L[1] = json.dumps(o, ensure_ascii=False, separators=(",", ":")) + "\n"
open(sys.argv[3], "w", encoding="utf-8").write("".join(L))
I = open(sys.argv[2], "rb").read().split(b"\n")
I[0] = b'{"id": "ok1", "prompt": "Once upon", "max_tokens": 9000}'
open(sys.argv[4], "wb").write(b"\n".join(I))
PY
out=$(vbi "$T/bad-err.out" --in "$BADIN"); rc=$?
out2=$(vbi "$T/bad.out" --in "$T/bad-in2.jsonl"); rc2=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | head -1)" == 'MISMATCH line 2 (input line 2, id "t"): error: the line says "out of memory", but cis2 batch fails input line 2 with "unknown field \"frequency_penalty\" (expected id, prompt, prompt_ids or messages, max_tokens, stop_at_eos, temperature, to"...' ] \
    && [ $rc2 -eq 1 ] && [ "$(echo "$out2" | head -1)" == 'MISMATCH line 1 (input line 1, id "ok1"): a result, but cis2 batch fails input line 1 (it writes an error line: "prompt (8 tokens) + max_tokens 9000 exceeds max_position_embeddings = 8192")' ] \
    && pass verify-batch.in-error-line-rechecked || fail verify-batch.in-error-line-rechecked "rc=$rc/$rc2 $out | $out2"
# PROMPTS changed after the run: a prompt (text and ids), a max_tokens, the -n default
$PY - "$IN" "$T/p40-changed.jsonl" <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
L[4]["prompt"] += " more"                              # line 5: a text prompt
L[7]["prompt_ids"][0] = (L[7]["prompt_ids"][0] + 1) % 320   # line 8: ids
L[10]["max_tokens"] += 1                               # line 11
open(sys.argv[2], "w", encoding="utf-8").write("".join(json.dumps(o) + "\n" for o in L))
PY
out=$(vbi "$T/ref.jsonl" --in "$T/p40-changed.jsonl" -n 12); rc=$?
ok=1
echo "$out" | grep -qx "MISMATCH line 5 (input line 5, id \"p04\"): prompt_token_ids: not what input line 5's \"prompt\" gives ([0-9]* ids, where it gives [0-9]*; the first difference at index [0-9]*)" || ok=0
echo "$out" | grep -qx "MISMATCH line 8 (input line 8, id \"p07\"): prompt_token_ids: not what input line 8's \"prompt_ids\" gives (8 ids, where it gives 8; the first difference at index 0)" || ok=0
echo "$out" | grep -qx "MISMATCH line 11 (input line 11, id \"p10\"): generated_token_ids: [0-9]*, where input line 11 asks for max_tokens [0-9]* with stop_at_eos off (from the line, else -n and --stop-at-eos: give verify-batch the ones cis2 batch ran with)" || ok=0
[ $rc -eq 1 ] && [ $ok -eq 1 ] && [ "$(echo "$out" | tail -1)" == "verify-batch: 40 line(s): 37 verified, 3 mismatched, 0 unreadable, 0 error line(s) checked against the input" ] \
    && pass verify-batch.in-prompt-changed || fail verify-batch.in-prompt-changed "rc=$rc $out"
out=$(vbi "$T/ref.jsonl" --in "$IN"); rc=$?   # batch ran with -n 12; the default is 16
[ $rc -eq 1 ] && [ "$(echo "$out" | grep -c '^MISMATCH line [0-9]* .*: generated_token_ids: .* max_tokens 16 with')" -ge 10 ] \
    && pass verify-batch.in-other-n || fail verify-batch.in-other-n "rc=$rc $(echo "$out" | tail -2)"
# missing, extra and repeated lines: PROMPTS with a 41st line (every result's
# "lines" is wrong, line 41 has none), results with a line given twice
{ cat "$IN"; echo '{"id": "p40", "prompt": "one more"}'; } > "$T/p41.jsonl"
out=$(vbi "$T/ref.jsonl" --in "$T/p41.jsonl" -n 12); rc=$?
{ cat "$T/ref.jsonl"; sed -n 7p "$T/ref.jsonl"; } > "$T/twice.jsonl"
out2=$(vbi "$T/twice.jsonl" --in "$IN" -n 12); rc2=$?
: > "$T/vempty.jsonl"
out3=$(vbi "$T/vempty.jsonl" --in "$IN" -n 12); rc3=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | head -1 | sed "s#$T/##")" == 'UNREADABLE line 1 (input line 1, id "p00"): "lines" 40, but --in p41.jsonl has 41 line(s)' ] \
    && echo "$out" | grep -qx 'MISSING input line(s) 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 31 more (41 of the 41): no result line' \
    && [ $rc2 -eq 1 ] && echo "$out2" | grep -qx 'DUPLICATE input line 7: 2 result lines' \
    && [ $rc3 -eq 1 ] && [ "$out3" == "MISSING input line(s) 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 30 more (40 of the 40): no result line
verify-batch: 0 line(s): 0 verified, 0 mismatched, 0 unreadable, 0 error line(s) checked against the input; input lines missing or given twice: 40" ] \
    && pass verify-batch.in-missing-extra-repeated || fail verify-batch.in-missing-extra-repeated "rc=$rc/$rc2/$rc3 $(echo "$out" | head -2) | $(echo "$out2" | tail -2) | $out3"
row vbatch-in-flags "-n, --stop-at-eos or --chat-format without --in (they describe the input)" "t_batch.sh" "$CIS2" verify-batch "$T/ref.jsonl" --model "$M" -n 12
row vbatch-in-missing "verify-batch --in a file that does not exist" "t_batch.sh" "$CIS2" verify-batch "$T/ref.jsonl" --model "$M" --in "$T/none.jsonl"
printf '\377\376{\0}\0\n\0' > "$T/utf16.jsonl"
row vbatch-in-utf16 "verify-batch --in a UTF-16 file" "t_batch.sh" "$CIS2" verify-batch "$T/ref.jsonl" --model "$M" --in "$T/utf16.jsonl"

# ---- NaN logits: batch (and verify-batch) say so per result, in cis2 run's
# words (docs/conformance.md), naming the input line and id; past ten, one
# count. Fixture: make_nan_logit_model (tests/lib.sh), logit 7 NaN at every step
# (before: batch said nothing).
make_nan_logit_model "$T/nanlogit"
NAN_NOTE="the logits of step 0 hold a NaN (first at index 7): NaN bit patterns differ by ISA, so this witness is not portable (docs/conformance.md)"
printf '{"id":"a","prompt_ids":[5,17]}\n{"id":"b","prompt":"x"}\n' > "$T/nan2.jsonl"
rm -f "$T/nan2.out"
"$CIS2" batch --model "$T/nanlogit" --in "$T/nan2.jsonl" --out "$T/nan2.out" -n 3 2>"$T/nan2.err"; rc=$?
expect_eq batch.nan-logit-note "$rc $(cat "$T/nan2.err")" "0 cis2 batch: note: input line 1 (id \"a\"): $NAN_NOTE
cis2 batch: note: input line 2 (id \"b\"): $NAN_NOTE"
"$CIS2" verify-batch "$T/nan2.out" --model "$T/nanlogit" >/dev/null 2>"$T/nan2v.err"; rc=$?
expect_eq verify-batch.nan-logit-note "$rc $(cat "$T/nan2v.err")" "0 cis2 verify-batch: note: input line 1 (id \"a\"): $NAN_NOTE
cis2 verify-batch: note: input line 2 (id \"b\"): $NAN_NOTE"
for k in $(seq 12); do echo "{\"id\":\"n$k\",\"prompt_ids\":[$k]}"; done > "$T/nan12.jsonl"
rm -f "$T/nan12.out"
"$CIS2" batch --model "$T/nanlogit" --in "$T/nan12.jsonl" --out "$T/nan12.out" -n 2 --batch 5 2>"$T/nan12.err"; rc=$?
[ $rc -eq 0 ] && [ "$(wc -l < "$T/nan12.err")" -eq 11 ] && [ "$(grep -c '^cis2 batch: note: input line [0-9]* (id "n[0-9]*"): the logits of step 0 hold a NaN' "$T/nan12.err")" -eq 10 ] \
    && [ "$(tail -1 "$T/nan12.err")" == "cis2 batch: note: 2 more result(s) whose logits hold a NaN (12 in all): their witnesses are not portable either (docs/conformance.md)" ] \
    && pass batch.nan-logit-notes-counted-past-ten || fail batch.nan-logit-notes-counted-past-ten "rc=$rc $(cat "$T/nan12.err")"

# ---- the progress line: on a terminal only (a pty through script(1))
if command -v script >/dev/null 2>&1; then
    rm -f "$T/tty.jsonl"
    tty=$(script -qec "\"$CIS2\" batch --model \"$M\" --in \"$IN\" --out \"$T/tty.jsonl\" -n 12" /dev/null 2>&1 | tr '\r' '\n')
    echo "$tty" | grep -qE '^cis2 batch: 40/40 items, [0-9.]+ tok/s, ETA 0:00' && echo "$tty" | grep -qE '^cis2 batch: 0/40 items' \
        && cmp -s "$T/tty.jsonl" "$T/ref.jsonl" && pass batch.progress-line-on-terminal || fail batch.progress-line-on-terminal "$(echo "$tty" | head -5)"
else skip batch.progress-line-on-terminal "script(1) not installed (util-linux)"; fi

# ---- x86-64 and aarch64 shards merge to the same bytes (the aarch64 build of
# `make test-aarch64`, under qemu-aarch64)
ARMBIN=./cis2-aarch64; SYSROOT="${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}"
if [ -x "$ARMBIN" ] && [ -x ./cis2 ] && command -v qemu-aarch64 >/dev/null && [ -d "$SYSROOT/lib" ]; then
    ./cis2 "${B[@]}" --out "$T/x86.jsonl" --shard 0/2 2>/dev/null
    qemu-aarch64 -L "$SYSROOT" "$ARMBIN" "${B[@]}" --out "$T/arm.jsonl" --shard 1/2 --backend fast 2>/dev/null
    "$CIS2" merge "$T/xa.jsonl" "$T/x86.jsonl" "$T/arm.jsonl" && cmp -s "$T/xa.jsonl" "$T/ref.jsonl" \
        && pass "batch.x86-64-and-aarch64-shards-merge-identical" || fail batch.x86-64-and-aarch64-shards-merge-identical "$(cmp "$T/xa.jsonl" "$T/ref.jsonl" 2>&1)"
else skip batch.x86-64-and-aarch64-shards-merge-identical "needs ./cis2-aarch64 (make test-aarch64), ./cis2 and qemu-aarch64 with $SYSROOT"; fi

# ---- docs/scale.md's Kubernetes Indexed Job, run locally: every pod's script
# with its JOB_COMPLETION_INDEX, then the merge Job's, /data pointing here
YPY=""; for p in python3 /usr/bin/python3; do "$p" -c 'import yaml' 2>/dev/null && { YPY=$p; break; }; done
if [ -n "$YPY" ]; then
    K8="$T/k8s"; mkdir -p "$K8/out"; cp -r "$M" "$K8/model"; cp "$IN" "$K8/prompts.jsonl"
    n=$($YPY - docs/scale.md "$K8" <<'PY'
import re, sys, yaml
doc = open(sys.argv[1], encoding="utf-8").read()
block = re.search(r"```yaml\n(.*?)```", doc, re.S).group(1)
jobs = list(yaml.safe_load_all(block))
spec = jobs[0]["spec"]
pod = spec["template"]["spec"]["containers"][0]
n = int(re.search(r"--shard \$JOB_COMPLETION_INDEX/(\d+)", pod["args"][0]).group(1))
assert spec["completionMode"] == "Indexed" and spec["completions"] == n, "completions != N"
open(sys.argv[2] + "/pod.sh", "w").write(pod["args"][0].replace("/data/", sys.argv[2] + "/"))
merge = jobs[1]["spec"]["template"]["spec"]["containers"][0]["args"][0]
open(sys.argv[2] + "/merge.sh", "w").write(merge.replace("/data/", sys.argv[2] + "/"))
print(n)
PY
)
    ok=1
    for ((k = 0; k < ${n:-0}; k++)); do
        CIS2BIN="$CIS2" JOB_COMPLETION_INDEX=$k sh -c 'cis2() { "$CIS2BIN" "$@"; }; . "$1"' sh "$K8/pod.sh" 2>/dev/null || ok=0
    done
    CIS2BIN="$CIS2" sh -c 'cis2() { "$CIS2BIN" "$@"; }; . "$1"' sh "$K8/merge.sh" >/dev/null 2>&1 || ok=0
    "$CIS2" batch --model "$M" --in "$IN" --out "$T/ref16.jsonl" 2>/dev/null
    [ "${n:-0}" -gt 1 ] && [ $ok -eq 1 ] && cmp -s "$K8/out/results.jsonl" "$T/ref16.jsonl" \
        && [[ "$(tail -n 1 "$K8/out/verify.txt")" == *": 40 verified, 0 mismatched"* ]] \
        && pass "batch.k8s-manifest-runs-locally ($n indexed pods + merge Job = single-process bytes)" \
        || fail batch.k8s-manifest-runs-locally "n=$n ok=$ok $(tail -n 1 "$K8/out/verify.txt" 2>&1)"
else skip batch.k8s-manifest-runs-locally "no python3 with PyYAML (Debian: python3-yaml)"; fi

# ---- tools/slurm/cis2-array.sbatch run as the plain script it is (a one-task
# array): --threads in CIS2_ARGS wins over the allocation's -c (both were
# passed, and cis2 refused the second), and the shard equals the reference
SA=(env SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=1 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=0
    CIS2="$CIS2" CIS2_MODEL="$M" CIS2_IN="$IN" CIS2_OUTDIR="$T/sa")
mkdir -p "$T/sa"
"${SA[@]}" SLURM_CPUS_PER_TASK=1 CIS2_ARGS="-n 12 --threads 2" bash tools/slurm/cis2-array.sbatch \
    2>"$T/sa.err"; rc=$?
cmp -s "$T/sa/shard-0.jsonl" "$T/ref.jsonl" && [ $rc -eq 0 ] && pass batch.sbatch-own-threads-win \
    || fail batch.sbatch-own-threads-win "rc=$rc $(head -2 "$T/sa.err")"
# the GNU form --threads=2 in CIS2_ARGS wins too (before: -c's --threads was
# added as well, cis2 refused the option given twice, the task failed, exit 2)
rm -f "$T/sa/shard-0.jsonl"
"${SA[@]}" SLURM_CPUS_PER_TASK=1 CIS2_ARGS="-n 12 --threads=2" bash tools/slurm/cis2-array.sbatch \
    2>"$T/sa.err"; rc=$?
cmp -s "$T/sa/shard-0.jsonl" "$T/ref.jsonl" && [ $rc -eq 0 ] && pass batch.sbatch-own-threads-eq-form-wins \
    || fail batch.sbatch-own-threads-eq-form-wins "rc=$rc $(head -2 "$T/sa.err")"
# submit.sh N with a leading zero: "00" was an array 0--1, "08" a bash
# arithmetic error (octal), "010" 8 tasks; refused before any sbatch (a stub
# that records being called stands in for it)
mkdir -p "$T/fakebin"; printf '#!/bin/sh\necho called >>"%s"\necho 1\n' "$T/sbatch.calls" >"$T/fakebin/sbatch"
chmod +x "$T/fakebin/sbatch"; rm -f "$T/sbatch.calls"; got=
for nn in 00 08 010; do
    got+="$(PATH="$T/fakebin:$PATH" CIS2="$CIS2" bash tools/slurm/submit.sh "$M" "$IN" "$T/sub" "$nn" 2>&1 >/dev/null | sed 's#^.*submit.sh: ##' | tr -d '\n'; echo " rc=${PIPESTATUS[0]}");"
done
# a missing model directory or prompts file is refused before any sbatch
# (before: N tasks queued, each failing on it, and the merge job cancelled)
got+="$(PATH="$T/fakebin:$PATH" CIS2="$CIS2" bash tools/slurm/submit.sh "$T/nomodel" "$IN" "$T/sub" 2 2>&1 >/dev/null | sed 's#^.*submit.sh: [^ ]*##' | tr -d '\n'; echo " rc=${PIPESTATUS[0]}");"
got+="$(PATH="$T/fakebin:$PATH" CIS2="$CIS2" bash tools/slurm/submit.sh "$M" "$T/noin.jsonl" "$T/sub" 2 2>&1 >/dev/null | sed 's#^.*submit.sh: [^ ]*##' | tr -d '\n'; echo " rc=${PIPESTATUS[0]}");"
expect_eq batch.submit-refuses-before-sbatch "$got calls=$(cat "$T/sbatch.calls" 2>/dev/null | wc -l)" \
    "N must be a positive integer rc=2;N must be a positive integer rc=2;N must be a positive integer rc=2; no such model directory rc=2; no such prompts file rc=2; calls=0"
# --retry-errors rewrites --out in place: it keeps the file's permissions (a
# results file made private with chmod 600 stays so; before: replaced by a
# new file with mode 644, readable by everyone)
printf '{"id":"a","prompt_ids":[1]}\n{"id":"b","prompt_ids":[1],"max_tokens":0}\n' >"$T/perm.jsonl"
rm -f "$T/perm.out"; "$CIS2" batch --model "$M" --in "$T/perm.jsonl" --out "$T/perm.out" -n 2 2>/dev/null
chmod 600 "$T/perm.out"
printf '{"id":"a","prompt_ids":[1]}\n{"id":"b","prompt_ids":[1],"max_tokens":2}\n' >"$T/perm.jsonl"
"$CIS2" batch --model "$M" --in "$T/perm.jsonl" --out "$T/perm.out" -n 2 --retry-errors 2>/dev/null; rc=$?
expect_eq batch.retry-errors-keeps-mode "$rc $(stat -c %a "$T/perm.out") $(grep -c '"error"' "$T/perm.out")" "0 600 0"
# cis2-merge.sbatch gives verify-batch the allocation's CPUs (--threads from
# -c, as the array tasks get; before: none, so every CPU of the node), unless
# CIS2_VERIFY_ARGS names its own, in either form. A wrapper records the args.
mkdir -p "$T/sm"; cp "$T/ref.jsonl" "$T/sm/shard-0.jsonl"
printf '#!/bin/sh\n[ "$1" = verify-batch ] && echo "$*" >>"%s"\nexec "%s" "$@"\n' "$T/sm.args" "$(realpath "$CIS2")" >"$T/cis2wrap"
chmod +x "$T/cis2wrap"; rm -f "$T/sm.args"; rcs=
for va in "" "--threads 2" "--threads=2"; do
    env CIS2="$T/cis2wrap" CIS2_MODEL="$M" CIS2_OUTDIR="$T/sm" CIS2_SHARDS=1 SLURM_CPUS_PER_TASK=1 \
        CIS2_VERIFY_ARGS="$va" bash tools/slurm/cis2-merge.sbatch >/dev/null 2>"$T/sm.err"; rcs+="$?"
done
expect_eq batch.merge-sbatch-verify-threads "$rcs $(sed 's#^.*--model [^ ]* ##' "$T/sm.args" | tr '\n' ';')" \
    "000 --threads 1;--threads 2;--threads=2;"
# with CIS2_IN (as submit.sh exports it) the merge job holds every result to its input
# line: verify-batch --in, with the -n/--stop-at-eos/--chat-format of CIS2_ARGS and none of
# the options verify-batch does not take (before: no --in, ids not bound to prompts)
cp "$T/ref.jsonl" "$T/sm/shard-0.jsonl"; rm -f "$T/sm.args"
env CIS2="$T/cis2wrap" CIS2_MODEL="$M" CIS2_IN="$IN" CIS2_OUTDIR="$T/sm" CIS2_SHARDS=1 \
    CIS2_ARGS=" -n 12 --retry-errors" bash tools/slurm/cis2-merge.sbatch >"$T/sm.out" 2>"$T/sm.err"; rc=$?
expect_eq batch.merge-sbatch-verify-in "$rc $(sed 's#^.*--model [^ ]* ##; s#'"$IN"'#IN#' "$T/sm.args") $(tail -c 40 "$T/sm/verify.txt")" \
    "0 --in IN -n 12 error line(s) checked against the input"
# rerunning one failed task as docs/scale.md says (`sbatch --array=k`, with
# CIS2_SHARDS=N as submit.sh exports it) runs shard k/N (before: refused,
# "the array must be 0-0", as a one-task array of task k); without
# CIS2_SHARDS such an array is still refused
"$CIS2" "${B[@]}" --shard 1/2 --out "$T/ref-1of2.jsonl" 2>/dev/null
mkdir -p "$T/sk"; rm -f "$T/sk/"*
SK=(env SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=1 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=1
    CIS2="$CIS2" CIS2_MODEL="$M" CIS2_IN="$IN" CIS2_OUTDIR="$T/sk" CIS2_ARGS="-n 12")
"${SK[@]}" CIS2_SHARDS=2 bash tools/slurm/cis2-array.sbatch 2>"$T/sk.err"; rc=$?
"${SK[@]}" bash tools/slurm/cis2-array.sbatch 2>/dev/null; rc2=$?
"${SK[@]}" CIS2_SHARDS=1 bash tools/slurm/cis2-array.sbatch 2>/dev/null; rc3=$?
cmp -s "$T/sk/shard-1.jsonl" "$T/ref-1of2.jsonl" && [ "$rc $rc2 $rc3" = "0 2 2" ] && pass batch.sbatch-rerun-one-task \
    || fail batch.sbatch-rerun-one-task "rc=$rc $rc2 $rc3 $(head -2 "$T/sk.err")"
# verify-batch names a long id by its first 64 bytes, never cutting a
# character in two (before: a 2-byte é across byte 64 printed as "\ufffd")
id63="$(printf 'a%.0s' $(seq 63))"
printf '{"line":1,"lines":1,"id":"%s\303\251b","error":"x","k":1}\n' "$id63" >"$T/longid.out"
expect_eq batch.vbatch-long-id-cut-at-a-character "$("$CIS2" verify-batch "$T/longid.out" --model "$M" | head -1)" \
    "UNREADABLE line 1 (input line 1, id \"$id63\"...): an \"error\" field, but not an error line as cis2 batch writes it (other fields)"
# an error line names the model's file, not where the model is: killed after
# a "messages" line without a template, the run resumes with the same model
# spelt "$M/" (before: "DIR/tokenizer_config.json" in the line, so the resume
# was refused, "its error differs", and shards from nodes mounting the model
# elsewhere held different bytes)
printf '{"id":"a","prompt_ids":[1]}\n{"id":"b","messages":[{"role":"user","content":"hi"}]}\n{"id":"c","prompt_ids":[2]}\n' >"$T/mdir.jsonl"
rm -f "$T/mdir.out"
{ CIS2_BATCH_KILL_AFTER=2 "$CIS2" batch --model "$M" --in "$T/mdir.jsonl" --out "$T/mdir.out" -n 2; } 2>/dev/null
"$CIS2" batch --model "$M/" --in "$T/mdir.jsonl" --out "$T/mdir.out" -n 2 2>"$T/mdir.err"; rc=$?
expect_eq batch.error-line-without-model-dir "$rc $(wc -l <"$T/mdir.out") $(sed -n 2p "$T/mdir.out")" \
    '1 3 {"line":2,"lines":3,"id":"b","error":"field \"messages\": tokenizer_config.json: cannot open: No such file or directory (or give --chat-format chatml)"}'
# --out removed while the run writes it: the run stops with exit 2 and says
# so (before: it went on writing to the removed file and exited 0, its
# results in no file). Removed after its first line (24 lines of 400 ids);
# a run that finished first says nothing here.
$PY -c "
import json
for k in range(24): print(json.dumps({'id': 'x%d' % k, 'prompt_ids': [k + 1, 2 * k + 3], 'max_tokens': 400}))" > "$T/rm.jsonl"
rm -f "$T/rm.out"
"$CIS2" batch --model "$M" --in "$T/rm.jsonl" --out "$T/rm.out" --batch 2 2>"$T/rm.err" & pid=$!
for _ in $(seq 400); do [ -s "$T/rm.out" ] && break; sleep 0.02; done
n=$(wc -l < "$T/rm.out"); rm -f "$T/rm.out"; wait $pid; rc=$?
if [ "$n" -ge 24 ]; then skip batch.out-removed-while-running "the run finished before the file was removed"
else expect_eq batch.out-removed-while-running "$rc $(sed "s#$T/##" "$T/rm.err")" \
    "2 cis2 batch: rm.out: removed or replaced while this run was writing it (the lines written are in no file); rerun to resume"; fi

# ---- sampling (docs/sampling.md, docs/scale.md "Sampling"): a line's
# temperature, top_k, top_p, min_p and seed; its receipt is `cis2 run`'s with
# the same flags; a line without a seed gets the one derived from its id, so
# batch sizes, shards and a resume give the same bytes; verify-batch re-runs
# the sampler, and with --in holds the receipt's sampler to the input's
SIN="$T/smp.jsonl"
printf '%s\n' '{"id": "g", "prompt_ids": [5, 17, 42], "max_tokens": 6}' \
    '{"id": "s1", "prompt_ids": [5, 17, 42], "max_tokens": 6, "temperature": 0.8, "top_p": 0.95, "seed": 42}' \
    '{"id": "s2", "prompt": "Once upon a time", "max_tokens": 6, "temperature": 1.3, "top_k": 5, "min_p": 0.05}' \
    '{"id": "s3", "prompt_ids": [9, 8], "max_tokens": 5, "temperature": 2, "seed": 18446744073709551615}' \
    '{"id": "b1", "prompt": "x", "top_k": 5}' '{"id": "b2", "prompt": "x", "temperature": -1}' \
    '{"id": "b3", "prompt": "x", "temperature": 1, "seed": 1.5}' \
    '{"id": "b4", "prompt": "x", "temperature": 1, "top_p": 2}' \
    '{"id": "b5", "prompt": "x", "temperature": 1e-40}' '{"id": "b6", "prompt": "x", "temperature": "1"}' \
    '{"id": "b7", "prompt": "x", "temperature": 0, "seed": 3}' >"$SIN"
rm -f "$T/smp.out"
"$CIS2" batch --model "$M" --in "$SIN" --out "$T/smp.out" 2>/dev/null; rc=$?
out=$($PY - "$CIS2" "$M" "$SIN" "$T/smp.out" "$T" <<'PY'
import hashlib, json, subprocess, sys
cis2, model, inp, res, tmp = sys.argv[1:]
ins = [json.loads(l) for l in open(inp, encoding="utf-8")]
outs = [json.loads(l) for l in open(res, encoding="utf-8")]
bad = []
base = ["line", "lines", "id", "prompt_token_ids", "generated_token_ids", "text", "table_digest",
        "inv_freq_table_digest", "argmax_digest", "cis2_ref"]
for i, o in zip(ins[:4], outs[:4]):
    t = i.get("temperature", 0)
    keys = base + (["temperature", "top_k", "top_p", "min_p", "seed"] if t else []) + ["receipt"]
    if list(o) != keys:
        bad.append("%s keys %s" % (i["id"], list(o))); continue
    cmd = [cis2, "run", "--model", model, "-n", str(i["max_tokens"]), "--receipt", tmp + "/smp-solo.txt"]
    cmd += ["--prompt-ids", ",".join(map(str, i["prompt_ids"]))] if "prompt_ids" in i else ["--prompt", i["prompt"]]
    if t:
        # docs/scale.md: no "seed" -> SHA-256("CIS-2-BATCH-SEED" || id), first 8 bytes LE
        seed = i.get("seed", int.from_bytes(hashlib.sha256(b"CIS-2-BATCH-SEED" + i["id"].encode()).digest()[:8], "little"))
        if o["seed"] != seed: bad.append("%s seed %s, wanted %s" % (i["id"], o["seed"], seed))
        cmd += ["--temperature", str(t), "--top-k", str(i.get("top_k", 0)), "--top-p", str(i.get("top_p", 1)),
                "--min-p", str(i.get("min_p", 0)), "--seed", str(seed)]
        want = {"temperature": t, "top_k": i.get("top_k", 0), "top_p": i.get("top_p", 1), "min_p": i.get("min_p", 0)}
        if {k: o[k] for k in want} != want: bad.append("%s sampler fields %s" % (i["id"], o))
    r = subprocess.run(cmd, capture_output=True)
    got = open(tmp + "/smp-solo.txt").read() if r.returncode == 0 else r.stderr
    if o["receipt"] != got: bad.append("%s receipt differs from cis2 run's" % i["id"])
    first = o["receipt"].split("\n")[0]
    if first != ("CIS-2-RECEIPT v1+sampling" if t else "CIS-2-RECEIPT v1"): bad.append("%s: %s" % (i["id"], first))
print("; ".join(bad) if bad else "ok")
PY
)
expect_eq batch.sampling.receipts-equal-run "$rc $out" "1 ok"
got=$($PY -c '
import json, sys
for l in open(sys.argv[1], encoding="utf-8"):
    o = json.loads(l)
    if "error" in o: print("%s|%s" % (o["id"], o["error"]))' "$T/smp.out")
expect_eq batch.sampling.bad-values-are-error-lines "$got" 'b1|field "top_k" needs "temperature" above 0 (temperature 0 is the greedy argmax, which has no top_k)
b2|field "temperature" must be 0 or a normal number above 0 (a binary32)
b3|field "seed" must be an integer from 0 to 18446744073709551615
b4|field "top_p" must be a number in [0, 1] (0 or a normal binary32)
b5|field "temperature" must be 0 or a normal number above 0 (a binary32)
b6|field "temperature" must be 0 or a normal number above 0 (a binary32)
b7|field "seed" needs "temperature" above 0 (temperature 0 is the greedy argmax, which has no seed)'
# the same bytes for any batch size, sharding and a resume after a kill
rm -f "$T/smp-b1.out" "$T/smp-s0.out" "$T/smp-s1.out" "$T/smp-m.out" "$T/smp-k.out"
"$CIS2" batch --model "$M" --in "$SIN" --out "$T/smp-b1.out" --batch 1 2>/dev/null
"$CIS2" batch --model "$M" --in "$SIN" --out "$T/smp-s0.out" --shard 0/2 2>/dev/null
"$CIS2" batch --model "$M" --in "$SIN" --out "$T/smp-s1.out" --shard 1/2 2>/dev/null
"$CIS2" merge "$T/smp-m.out" "$T/smp-s0.out" "$T/smp-s1.out" >/dev/null 2>&1
{ CIS2_BATCH_KILL_AFTER=2 "$CIS2" batch --model "$M" --in "$SIN" --out "$T/smp-k.out" --batch 2; } 2>/dev/null
k=$(wc -l <"$T/smp-k.out")
"$CIS2" batch --model "$M" --in "$SIN" --out "$T/smp-k.out" --batch 2 2>/dev/null
cmp -s "$T/smp-b1.out" "$T/smp.out" && cmp -s "$T/smp-m.out" "$T/smp.out" && [ "$k" -lt 11 ] && cmp -s "$T/smp-k.out" "$T/smp.out" \
    && pass "batch.sampling.batch-shard-resume-identical (killed at $k lines)" \
    || fail batch.sampling.batch-shard-resume-identical "k=$k $(cmp "$T/smp-b1.out" "$T/smp.out" 2>&1) $(cmp "$T/smp-m.out" "$T/smp.out" 2>&1) $(cmp "$T/smp-k.out" "$T/smp.out" 2>&1)"
# verify-batch re-runs sampled receipts, with and without --in
out=$("$CIS2" verify-batch "$T/smp.out" --model "$M" | tail -1)
expect_eq verify-batch.sampling.verifies "$out" "verify-batch: 11 line(s): 4 verified, 0 mismatched, 0 unreadable, 7 error line(s) without a receipt"
out=$("$CIS2" verify-batch "$T/smp.out" --model "$M" --in "$SIN" | tail -1)
expect_eq verify-batch.sampling.verifies-with-in "$out" "verify-batch: 11 line(s): 4 verified, 0 mismatched, 0 unreadable, 7 error line(s) checked against the input"
# a doctored seed (receipt and field alike) is caught by the re-run; an input
# whose seed changed since is caught by --in before any re-run
sed '2s/\\nseed 42\\n/\\nseed 43\\n/; 2s/"seed":42,/"seed":43,/' "$T/smp.out" >"$T/smp-doc.out"
out=$("$CIS2" verify-batch "$T/smp-doc.out" --model "$M"); rc=$?
[ $rc -eq 1 ] && ! cmp -s "$T/smp-doc.out" "$T/smp.out" \
    && [[ "$(echo "$out" | head -1)" == 'MISMATCH line 2 (input line 2, id "s1"):'*"sampler (receipt temperature=0.8 top-k=0 top-p=0.95 min-p=0, recomputed a run under it picks other ids from step"*"; seed (receipt 43, recomputed"* ]] \
    && pass verify-batch.sampling.doctored-seed-mismatch || fail verify-batch.sampling.doctored-seed-mismatch "rc=$rc $out"
sed '2s/"seed": 42}/"seed": 43}/' "$SIN" >"$T/smp-in43.jsonl"
out=$("$CIS2" verify-batch "$T/smp.out" --model "$M" --in "$T/smp-in43.jsonl"); rc=$?
expect_eq verify-batch.sampling.in-other-seed "$rc $(echo "$out" | head -1)" \
    '1 MISMATCH line 2 (input line 2, id "s1"): sampler: the receipt'"'"'s is temperature=0.8 top-k=0 top-p=0.95 min-p=0 seed 42, where input line 2 gives temperature=0.8 top-k=0 top-p=0.95 min-p=0 seed 43'
# a resume over results of another seed or sampler is refused, never mixed
cp "$T/smp.out" "$T/smp-r.out"
row batch-out-other-sampler "--out made with another temperature, top_k, top_p, min_p or seed on a line, resumed" \
    "t_batch.sh" "$CIS2" batch --model "$M" --in "$T/smp-in43.jsonl" --out "$T/smp-r.out"
sed '3s/"temperature": 1.3, /"temperature": 1.3, "seed": 5, /' "$SIN" >"$T/smp-in5.jsonl"
"$CIS2" batch --model "$M" --in "$T/smp-in5.jsonl" --out "$T/smp-r.out" 2>"$T/smp-r.err"; rc=$?
expect_eq batch.sampling.resume-derived-seed-now-given "$rc $(sed "s#$T/##" "$T/smp-r.err")" \
    "2 cis2 batch: smp-r.out: line 3: its receipt's sampler or seed is not what input line 3 gives now: its temperature, top_k, top_p, min_p or seed changed (use another --out)"
