#!/usr/bin/env bash
# Sharded checkpoints (model/shards.h): `cis2 join-shards` on fixtures split
# the way Hugging Face splits them (tests/shard_split.py, written without
# cis2) gives, byte for byte, the file that script's independent reading of
# the join expects, the same bytes however the tensors were sharded, and a
# model whose run equals the unsharded fixture's. The loader's hint on a
# sharded directory and join-shards' refusals are rows of docs/errors.md
# (t_errors.sh).
cd "$(dirname "$0")/.."
source tests/lib.sh
T="$TESTTMP/shards-$(basename "${BUILD:-build}")"
rm -rf "$T"; mkdir -p "$T"
P="--prompt-ids 5,17,42 -n 6"
sha() { sha256sum "$1" | cut -d' ' -f1; }

for v in llama qwen2 qwen3 untied-f32; do
    make_fixture "$T/$v" "" $(vector_args "tests/fixtures/$v.vector") || { fail "shards.fixture-$v" "make_model.py failed"; continue; }
    python3 tests/shard_split.py expect "$T/$v" "$T/$v.expect"
    i=0
    for split in "3 round 1" "2 chunk 7" "1 chunk 3"; do
        i=$((i + 1)); S="$T/$v-s$i"; mkdir -p "$S"
        python3 tests/shard_split.py split "$T/$v" "$S" $split || { fail "shards.split-$v-$i" "shard_split.py failed"; continue; }
        out=$("$CIS2" join-shards --model "$S" --out "$S/model.safetensors" 2>&1); rc=$?
        n=$(echo "$split" | cut -d' ' -f1)
        if [ $rc -ne 0 ] || ! echo "$out" | grep -q "tensors from $n shards"; then
            fail "shards.join-$v-$i" "rc=$rc $out"; continue
        fi
        cmp -s "$S/model.safetensors" "$T/$v.expect" && pass "shards.join-$v-$i-equals-second-reading ($split)" \
            || fail "shards.join-$v-$i-equals-second-reading" "$S/model.safetensors differs from $T/$v.expect"
        expect_eq "shards.join-$v-$i-prints-its-digest" "$(echo "$out" | sed -n 's/^weights_sha256=//p')" "$(sha "$S/model.safetensors")"
    done
    # the joined model computes what the fixture computes, every traced
    # tensor bit for bit, and its receipt binds the joined file's digest
    # (the engine hashed what it loaded)
    a=$("$CIS2" run --model "$T/$v" $P 2>&1 | grep -E '^(generated_token_ids|argmax_digest)=')
    b=$("$CIS2" run --model "$T/$v-s1" $P --receipt "$T/$v.r" 2>&1 | grep -E '^(generated_token_ids|argmax_digest)=')
    [ "$(echo "$a" | grep -c .)" == 2 ] && [ "$a" == "$b" ] && pass "shards.run-$v-equals-unsharded" || fail "shards.run-$v-equals-unsharded" "'$a' vs '$b'"
    "$CIS2" trace --model "$T/$v" $P -o "$T/$v.a.trace" >/dev/null 2>&1
    "$CIS2" trace --model "$T/$v-s2" $P -o "$T/$v.b.trace" >/dev/null 2>&1
    d=$("$CIS2" diff "$T/$v.a.trace" "$T/$v.b.trace" --exact --brief 2>&1)
    echo "$d" | grep -q '^verdict=IDENTICAL$' && echo "$d" | grep -q 'weights_sha256 differs' \
        && pass "shards.trace-$v-identical" || fail "shards.trace-$v-identical" "$(echo "$d" | tail -3)"
    expect_eq "shards.receipt-$v-binds-joined-file" "$(sed -n 's/^weights-sha256 //p' "$T/$v.r")" "$(sha "$T/$v-s1/model.safetensors")"
    "$CIS2" verify "$T/$v.r" --model "$T/$v-s1" >/dev/null 2>&1 && pass "shards.verify-$v" || fail "shards.verify-$v" "verify failed"
done
# An existing joined file is replaced atomically by a new join, and a join
# into another directory leaves the shards as they were.
S="$T/llama-s2"
before=$(sha "$S/model-00001-of-00002.safetensors")
"$CIS2" join-shards --model "$S" --out "$S/model.safetensors" >/dev/null 2>&1 && "$CIS2" join-shards --model "$S" --out "$T/joined.st" >/dev/null 2>&1 \
    && cmp -s "$T/joined.st" "$T/llama.expect" && [ "$(sha "$S/model-00001-of-00002.safetensors")" == "$before" ] \
    && ! ls "$S" "$T" | grep -q '\.tmp\.' && pass "shards.rejoin-and-elsewhere" || fail "shards.rejoin-and-elsewhere" "join again or elsewhere failed"
