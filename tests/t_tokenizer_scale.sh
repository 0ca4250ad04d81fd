#!/usr/bin/env bash
# Added tokens cost linear time to load and to match (spec §3.1.6): the
# tokenizer keeps them in a hash set and an Aho-Corasick automaton. Not a
# timed test: it compares the CPU time `cis2 tokenize --bench` reports for 10x
# more added tokens, which a linear loader pays about 10x for and a quadratic
# one (the loader before, 14 s of CPU for 100k tokens) about 100x; and the
# time to encode 1 MB of '<' (every token starts with '<') with 10k and 100k
# added tokens, which a per-position scan of all tokens pays 10x more for.
# Bounds are 3x away from both behaviours; ulimit caps a runaway at 60 s CPU.
source "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null 2>&1 || { skip "added-token scaling" "no python3"; exit 0; }
base=tests/fixtures/tokenizer/smollm2.json # a shape the loader before could read too
d="$TESTTMP/scale"
mkdir -p "$d"
python3 - "$base" "$d" <<'PY' || { fail "added-token scaling" "cannot write the test tokenizers"; exit 0; }
import json, sys
src = json.load(open(sys.argv[1], encoding='utf-8'))
src['model']['continuing_subword_prefix'] = src['model']['end_of_word_suffix'] = None
for k in (10000, 100000):
    t = dict(src)
    nid = len(src['model']['vocab'])
    t['added_tokens'] = [
        {'id': nid + i, 'content': '<extra_%d>' % i, 'single_word': False, 'lstrip': False,
         'rstrip': False, 'normalized': i % 2 == 1, 'special': False} for i in range(k)]
    json.dump(t, open('%s/added%d.json' % (sys.argv[2], k), 'w', encoding='utf-8'), ensure_ascii=False)
open(sys.argv[2] + '/lt.txt', 'w').write('<' * 1000000)
PY

# CPU seconds (user + sys) of one whole `cis2 tokenize` of "x": reading, parsing, tables
load_cpu() {
    local t
    t=$( { TIMEFORMAT='%3U %3S'; time (ulimit -t 60; "$CIS2" tokenize --tokenizer "$1" x >/dev/null 2>&1) ; } 2>&1 ) \
        || { echo "ERR"; return; }
    echo "$t" | awk '{ printf "%.0f", ($1 + $2) * 1000 }'
}
# CPU ms of encoding 1 MB of '<' (best of 3, from --bench)
encode_cpu() {
    local o
    o=$( (ulimit -t 60; "$CIS2" tokenize --tokenizer "$1" --bench "$d/lt.txt") 2>&1) || { echo "ERR(rc=$?)"; return; }
    echo "$o" | awk '/^encode_bytes/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                     printf "%.1f", v["encode_bytes"] / 1e3 / v["encode_cpu_MB_per_s"] }'
}
l1=$(load_cpu "$d/added10000.json"); l2=$(load_cpu "$d/added100000.json")
e1=$(encode_cpu "$d/added10000.json"); e2=$(encode_cpu "$d/added100000.json")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b + 0.5) / (a + 0.5) }'; }
case "$l1$l2" in
*ERR*) fail "added tokens: loading 10k / 100k" "$l1 / $l2 (an error, or killed at 60 s CPU)" ;;
*)
    rl=$(ratio "$l1" "$l2")
    awk -v r="$rl" 'BEGIN { exit !(r < 30) }' \
        && pass "added tokens: loading 100k costs ${rl}x loading 10k (${l1} -> ${l2} ms CPU; linear ~10x, quadratic ~100x)" \
        || fail "added tokens: loading 100k costs ${rl}x loading 10k" "${l1} -> ${l2} ms CPU (want < 30x)" ;;
esac
case "$e1$e2" in
*ERR*) fail "added tokens: encoding 1 MB of '<' with 10k / 100k added tokens" "$e1 / $e2 (an error, or killed at 60 s CPU)" ;;
*)
    re=$(ratio "$e1" "$e2")
    awk -v r="$re" 'BEGIN { exit !(r < 4) }' \
        && pass "added tokens: 1 MB of '<' encodes as fast with 100k as with 10k (${e1} -> ${e2} ms CPU, ${re}x)" \
        || fail "added tokens: 1 MB of '<' with 100k vs 10k added tokens" "${e1} -> ${e2} ms CPU (${re}x, want < 4x)" ;;
esac
