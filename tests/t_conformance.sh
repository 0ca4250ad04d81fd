#!/usr/bin/env bash
# Op-level conformance: `cis2 suite` against `cis2 op` on every vector,
# negative controls that must FAIL, and `cis2 op` input errors.
# The suite's own PASS/FAIL lines are captured, never echoed (run.sh counts ours).
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/conformance"
rm -rf "$T"; mkdir -p "$T/one" "$T/big" "$T/noexp" "$T/badexp" "$T/empty"
case "$CIS2" in /*) C="$CIS2";; *) C="$PWD/$CIS2";; esac
V=tests/vectors

# ---- the whole tier, ourselves as the candidate
out=$("$C" suite "$C" op 2>&1); rc=$?
n=$(ls "$V"/*.txt | wc -l)
if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | tail -n1)" == "all $n vector(s) passed" ]; then
    pass "suite self: all $n vectors"
else
    fail "suite self" "rc=$rc: $(printf '%s\n' "$out" | grep -v '^PASS' | head -n5)"
fi
[ "$n" -ge 40 ] && pass "at least 40 vectors ($n)" || fail "vector count" "only $n"
expect_eq "suite: --vectors given twice is the same folder twice" \
    "$("$C" suite --vectors "$V" --vectors "$V" "$C" op 2>&1 | tail -n1)" "all $((2 * n)) vector(s) passed"

# Every op appears in the tier.
for op in rmsnorm matvec exp_pinned softmax attention_block rope_table embed_lookup \
          ln_pinned sin_pinned cos_pinned silu rsqrt dot_seq rope_rotate; do
    grep -lq "^op=$op\$" "$V"/*.txt && pass "vectors cover $op" || fail "vectors cover $op" "none"
done

# Spec anchors in the pinned outputs.
expect_eq "5.1 cancellation is +0" "$(grep '^out_bits=' $V/dot_seq_cancellation.expected)" "out_bits=0x00000000"
expect_eq "6.1 rsqrt(64)" "$(grep -o '^out_bits=0x[0-9A-F]*' $V/rsqrt_spec.expected)" "out_bits=0x3E000000"
expect_eq "7.2 inv_freq_table_digest (SmolLM2)" "$(grep '^inv_freq_table_digest=' $V/rope_table_smollm2.expected)" \
    "inv_freq_table_digest=da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12"

# ---- negative controls: each must FAIL with the right reason, exit 1
cp $V/exp_public_points.* $V/softmax_tie.* "$T/one/"
cp $V/matvec_rand_48x576.* "$T/big/"            # 300 KB: more than a pipe buffer
mk() { printf '#!/bin/sh\n%s\n' "$2" > "$T/$1"; chmod +x "$T/$1"; }
mk wrong_digest 'cat >/dev/null; echo out_sha256=0000000000000000000000000000000000000000000000000000000000000000'
mk crash 'cat >/dev/null; kill -SEGV $$'
mk hang 'sleep 30'
mk exit3 "\"$C\" op \"\$1\"; exit 3"
mk bits_only "\"$C\" op \"\$1\" | grep '^out_bits='"
mk extra_line "\"$C\" op \"\$1\"; echo hello"
mk upper_sha "\"$C\" op \"\$1\" | awk -F= '\$1 == \"out_sha256\" { print \$1 \"=\" toupper(\$2); next } { print }'"
mk flip_sha "\"$C\" op \"\$1\" | sed '/^out_sha256=/{s/0\$/Z/;s/[1-9a-f]\$/0/;s/Z\$/1/;}'"
mk bad_input "sed 's/^x_bits=0xC2200000/x_bits=0xC2200001/; s/^scores_bits=0x3F800000/scores_bits=0x3F800001/' | \"$C\" op \"\$1\""
mk bits_lie "\"$C\" op \"\$1\" | sed '/^out_bits=/s/^out_bits=0x[0-9A-F]*/out_bits=0x12345678/'"
neg() { # NAME CANDIDATE WANT_SUBSTRING [SUITE OPTIONS...]
    local name="$1" cand="$2" want="$3"; shift 3
    local o r
    o=$("$C" suite "$@" --vectors "$T/one" "$cand" 2>&1); r=$?
    if [ $r -ne 1 ]; then fail "negative $name" "suite exited $r, want 1: $o"; return; fi
    if ! printf '%s\n' "$o" | grep -q '^PASS'; then :; else fail "negative $name" "a vector passed: $o"; return; fi
    if [ "$(printf '%s\n' "$o" | tail -n1)" != "2 of 2 vector(s) failed" ]; then fail "negative $name" "summary: $o"; return; fi
    case "$o" in *"$want"*) pass "negative $name";; *) fail "negative $name" "reason lacks '$want': $o";; esac
}
neg wrong_digest "$T/wrong_digest" "out_sha256 mismatch"
neg crash "$T/crash" "killed by signal 11"
t0=$(date +%s)
neg hang "$T/hang" "no result within 1s" --timeout 1
t1=$(date +%s)
[ $((t1 - t0)) -le 6 ] && pass "hang killed promptly ($((t1 - t0))s)" || fail "hang timing" "$((t1 - t0))s"
neg exit3 "$T/exit3" "exited with status 3"
neg bits_only "$T/bits_only" "no out_sha256= line"
neg extra_line "$T/extra_line" "unexpected stdout line 'hello'"
neg flip_sha "$T/flip_sha" "(its out_bits are right)"
neg bad_input "$T/bad_input" "out_bits differ first at index 0"
neg bits_lie "$T/bits_lie" "out_bits differ first at index 0: got 0x12345678"
neg missing_binary "$T/no_such_candidate" "exited with status 127"
# The digest is a value (CONFORMANCE_SUITE.md: the bits are normative, the
# digest a one-line convenience): its hex case, blanks around it and CRLF
# line ends are presentation. A wrong or malformed digest still fails.
mk crlf_sha "\"$C\" op \"\$1\" | sed 's/\$/\r/'"
mk blank_sha "\"$C\" op \"\$1\" | sed 's/^/  /; s/\$/ \t /; s/=/ = /'"
mk upper_crlf "\"$C\" op \"\$1\" | awk -F= '\$1 == \"out_sha256\" { printf \"%s=%s \\r\\n\", \$1, toupper(\$2); next } { print }'"
mk upper_flip "\"$C\" op \"\$1\" | sed '/^out_sha256=/{s/0\$/Z/;s/[1-9a-f]\$/0/;s/Z\$/1/;}' | awk -F= '\$1 == \"out_sha256\" { print \$1 \"=\" toupper(\$2); next } { print }'"
mk short_sha "\"$C\" op \"\$1\" | sed '/^out_sha256=/s/.\$//'"
poz() { # NAME CANDIDATE: every vector must pass
    local o r
    o=$("$C" suite --vectors "$T/one" "$2" 2>&1); r=$?
    expect_eq "suite accepts $1" "$r:$(printf '%s\n' "$o" | tail -n1)" "0:all 2 vector(s) passed"
}
poz "an upper-case digest" "$T/upper_sha"
poz "CRLF line ends" "$T/crlf_sha"
poz "blanks around keys and values" "$T/blank_sha"
poz "upper case + trailing blank + CRLF" "$T/upper_crlf"
neg upper_wrong_digest "$T/upper_flip" "out_sha256 mismatch"
neg short_digest "$T/short_sha" "malformed out_sha256= line (want 64 hex digits)"
o=$("$C" suite --vectors "$T/one" "$C" op exp_pinned 2>&1); r=$?   # runs `cis2 op exp_pinned OP`
case "$r:$o" in 1:*"FAIL exp_public_points: exited with status 2; stderr: cis2 op: unexpected argument 'exp_pinned'"*"2 of 2 vector(s) failed") pass "suite passes ARGs before OP";;
    *) fail "suite passes ARGs before OP" "$r: $o";; esac

# The FAIL line carries the candidate's out_bits.
o=$("$C" suite --vectors "$T/one" "$T/bad_input" 2>&1)
printf '%s\n' "$o" | grep -q '^  candidate out_bits (8 values)=0x' && pass "FAIL shows candidate out_bits" \
    || fail "FAIL shows candidate out_bits" "$o"

# A candidate that never reads stdin (300 KB) but prints the right digest: the
# checker survives the broken pipe, and by protocol the answer is judged alone.
sha=$(grep '^out_sha256=' "$T/big/matvec_rand_48x576.expected")
mk noread "exec 0<&-; echo $sha"
o=$("$C" suite --vectors "$T/big" "$T/noread" 2>&1); r=$?
expect_eq "candidate ignoring stdin: no SIGPIPE, judged on output" "$r:$(printf '%s\n' "$o" | tail -n1)" "0:all 1 vector(s) passed"

# Broken vector folders fail instead of passing silently.
cp $V/softmax_tie.txt "$T/noexp/"
o=$("$C" suite --vectors "$T/noexp" "$C" op 2>&1); r=$?
case "$r:$o" in 1:*"FAIL softmax_tie: no softmax_tie.expected"*) pass "suite: .txt without .expected fails";; *) fail "suite: missing .expected" "$r: $o";; esac
cp $V/softmax_tie.txt "$T/badexp/"; sed 's/^out_bits=0x3/out_bits=0x2/' $V/softmax_tie.expected > "$T/badexp/softmax_tie.expected"
o=$("$C" suite --vectors "$T/badexp" "$C" op 2>&1); r=$?
case "$r:$o" in 1:*"do not hash to its out_sha256"*) pass "suite: inconsistent .expected fails";; *) fail "suite: bad .expected" "$r: $o";; esac
expect_err "suite: empty folder" "no vectors" "$C" suite --vectors "$T/empty" "$C" op
expect_err "suite: missing folder" "cannot open vector folder" "$C" suite --vectors "$T/nope" "$C" op
expect_err "suite: no candidate" "usage" "$C" suite --vectors "$V"
expect_err "suite: bad timeout" "--timeout" "$C" suite --timeout 0 "$C" op

# ---- the candidate as the public harness calls it: `CANDIDATE OP < vector`
o=$(CIS2="$C" tools/cis2-op rsqrt < $V/rsqrt_spec.txt | head -n1)
expect_eq "tools/cis2-op OP < vector" "$o" "$(grep '^out_sha256=' $V/rsqrt_spec.expected)"
o=$(CIS2="$C" "$C" suite --vectors "$T/one" "$PWD/tools/cis2-op" 2>&1 | tail -n1)
expect_eq "suite over tools/cis2-op" "$o" "all 2 vector(s) passed"
if [ "$(head -c 4 "$C" | od -An -c | tr -d ' ')" == '177ELF' ]; then
    ln -sf "$C" "$T/cis2-op"
    o=$("$T/cis2-op" rsqrt < $V/rsqrt_spec.txt | head -n1)
    expect_eq "cis2 run as cis2-op (argv[0])" "$o" "$(grep '^out_sha256=' $V/rsqrt_spec.expected)"
    o=$("$C" suite --vectors "$T/one" "$T/cis2-op" 2>&1 | tail -n1)
    expect_eq "suite over the cis2-op link" "$o" "all 2 vector(s) passed"
else
    skip "cis2 run as cis2-op (argv[0])" "$C is a wrapper, not the binary (tools/cis2-op covers it)"
fi

# ---- what a candidate or a vector folder says is printed escaped, one line per vector
mkdir -p "$T/esc"; cp $V/softmax_tie.txt "$T/esc/x"$'\n'"PASS forged.txt"; cp $V/softmax_tie.expected "$T/esc/x"$'\n'"PASS forged.expected"
mk evil "echo 'bad'\"\$(printf '\\033[2J\\033]0;t\\007')\" >&2; printf 'out_sha256=\\033[31m\\rverdict=PASS\\n'; exit 0"
o=$("$C" suite --vectors "$T/esc" "$T/evil" 2>&1); r=$?
nl=$(printf '%s\n' "$o" | wc -l); ctl=$(printf '%s' "$o" | tr -d '\n' | LC_ALL=C grep -c "$(printf '[\001-\037\177]')")
[ $r -eq 1 ] && [ "$nl" -eq 2 ] && [ "$ctl" -eq 0 ] && printf '%s\n' "$o" | head -n1 | grep -qF "FAIL x\\nPASS forged: malformed out_sha256= line (want 64 hex digits): '\\x1b[31m\\rverdict=PASS'" \
    && pass "suite output escaped (names, candidate stdout)" || fail "suite output escaped" "rc=$r lines=$nl control=$ctl: $o"
mk evil2 "printf 'bad\\033[2J\\n' >&2; exit 4"
o=$("$C" suite --vectors "$T/one" "$T/evil2" 2>&1)
printf '%s\n' "$o" | grep -qF 'exited with status 4; stderr: bad\x1b[2J' && ! printf '%s' "$o" | LC_ALL=C grep -q "$(printf '\033')" \
    && pass "suite output escaped (candidate stderr)" || fail "suite output escaped (candidate stderr)" "$o"
# a vector or expected file that is a FIFO fails that vector; the checker never waits on it
mkdir -p "$T/fifo"; cp $V/softmax_tie.txt "$T/fifo/"; mkfifo "$T/fifo/softmax_tie.expected"
o=$(timeout 20 "$C" suite --vectors "$T/fifo" "$C" op 2>&1); r=$?
case "$r:$o" in 1:*"FAIL softmax_tie: "*"softmax_tie.expected: not a regular file (a FIFO)"*) pass "suite: FIFO .expected fails, no hang";;
    *) fail "suite: FIFO .expected" "$r: $o";; esac

# ---- cis2 op: strict input, one error line, nonzero exit
bad() { # NAME WANT OP INPUT
    printf '%b' "$4" > "$T/in.txt"
    expect_err "op rejects $1" "$2" sh -c '"$1" op "$2" < "$3"' _ "$C" "$3" "$T/in.txt"
}
bad "unknown op" "unknown op 'frobnicate'" frobnicate 'n=1\nx_bits=0x3F800000\n'
bad "missing field" "missing field 'x_bits'" exp_pinned 'n=1\n'
bad "count mismatch" "x_bits has 2 values, expected 3" exp_pinned 'n=3\nx_bits=0x3F800000,0x0\n'
bad "malformed hex" "not 0x-prefixed" silu 'n=1\nx_bits=3F800000\n'
bad "bad hex digit" "unexpected character 'G'" silu 'n=1\nx_bits=0x3F80000G\n'
bad "9 hex digits" "more than 8 hex digits" silu 'n=1\nx_bits=0x13F800000\n'
bad "empty item" "no hex digits" silu 'n=2\nx_bits=0x1,0x\n'
bad "trailing comma" "not 0x-prefixed" silu 'n=1\nx_bits=0x1,\n'
bad "shape mismatch" "w_bits has 3 values, expected 4" matvec 'out_features=2\nin_features=2\nw_bits=0x0,0x0,0x0\nx_bits=0x0,0x0\n'
bad "x shape mismatch" "x_bits has 1 values, expected 2" matvec 'out_features=1\nin_features=2\nw_bits=0x0,0x0\nx_bits=0x0\n'
bad "token id >= vocab" "token_ids item 1 is 2, not below vocab=2" embed_lookup 'vocab=2\nhidden=1\nembed_bits=0x0,0x1\ntoken_ids=1,2\n'
bad "negative int" "expected a decimal integer" dot_seq 'n=-1\na_bits=0x0\nb_bits=0x0\n'
bad "zero n" "expected a decimal integer" rsqrt 'n=0\nx_bits=0x0\n'
bad "huge n" "expected a decimal integer" rsqrt 'n=99999999999\nx_bits=0x0\n'
bad "huge shape" "too large" matvec 'out_features=16777216\nin_features=16777216\nw_bits=0x0\nx_bits=0x0\n'
bad "odd head_dim" "head_dim must be even" rope_table 'head_dim=7\nrope_theta_bits=0x47C35000\npositions=0\n'
bad "bad theta" "not a positive normal finite" rope_table 'head_dim=8\nrope_theta_bits=0xBF800000\npositions=0\n'
bad "position too far" "positions item 0" rope_table 'head_dim=8\nrope_theta_bits=0x47C35000\npositions=16777217\n'
bad "rotate length" "not a multiple of head_dim=8" rope_rotate 'head_dim=8\nrope_theta_bits=0x47C35000\npos=1\nx_bits=0x0,0x0\n'
bad "attention shape" "k_bits has 3 values, expected 4" attention_block 'head_dim=2\nseq_len=2\nq_head_bits=0x0,0x0\nk_bits=0x0,0x0,0x0\nv_bits=0x0,0x0,0x0,0x0\n'
bad "eps count" "eps_bits has 2 values, expected 1" rmsnorm 'n=1\neps_bits=0x0,0x0\nx_bits=0x0\ngamma_bits=0x0\n'
bad "duplicate key" "duplicate field 'n'" exp_pinned 'n=1\nn=1\nx_bits=0x0\n'
bad "line without =" "expected key=value" exp_pinned 'n=1\nx_bits\n'
bad "op field disagrees" "vector says op=silu" exp_pinned 'op=silu\nn=1\nx_bits=0x0\n'
bad "empty input" "missing field 'n'" exp_pinned ''
bad "NUL byte" "NUL byte" exp_pinned 'n=1\nx_bits=0x0\0\n'
expect_err "op rejects no argument" "usage" "$C" op
expect_err "op rejects two arguments" "unexpected argument 'extra'" "$C" op rsqrt extra
head -c 70000000 /dev/zero | tr '\0' '#' > "$T/huge.txt"
expect_err "op rejects >64 MiB input" "stdin: more than the 67108864 bytes" sh -c '"$1" op rsqrt < "$2"' _ "$C" "$T/huge.txt"
rm -f "$T/huge.txt"
# Comments, blank lines, CRLF and blanks around items are fine.
printf '# c\r\n\r\nop=rsqrt\r\nn = 2\r\nx_bits= 0x42800000 , 0x3f800000 \r\n' > "$T/in.txt"
expect_eq "op accepts comments/CRLF/blanks" "$("$C" op rsqrt < "$T/in.txt" | tail -n1)" "out_bits=0x3E000000,0x3F800000"

# ---- the .txt files are exactly what the seeded generator writes
if command -v python3 >/dev/null; then
    o=$(python3 tools/gen_vectors.py --check --out "$V" 2>&1)
    case "$o" in *" 0 problem(s)") pass "gen_vectors.py --check";; *) fail "gen_vectors.py --check" "$o";; esac
else
    skip "gen_vectors.py --check" "no python3"
fi

# ---- the independent oracle as a third-party candidate
ORACLE=../shared/tools/oracle_candidate.py
if [ ! -f "$ORACLE" ]; then
    skip "suite oracle_candidate.py" "$ORACLE not found"
elif [ "${BUILD:-build}" != build ]; then
    # the oracle's answers and the vectors do not depend on BUILD; this build's runner
    # drove its own `cis2 op` through the same vectors above
    skip "suite oracle_candidate.py" "BUILD=$BUILD: the oracle's run does not depend on the build (make test runs it)"
elif ! command -v python3 >/dev/null; then
    skip "suite oracle_candidate.py" "no python3"
else
    out=$("$C" suite "$ORACLE" 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | tail -n1)" == "all $n vector(s) passed" ]; then
        pass "suite oracle_candidate.py: all $n vectors"
    else
        fail "suite oracle_candidate.py" "rc=$rc: $(printf '%s\n' "$out" | grep -v '^PASS' | head -n5)"
    fi
fi
