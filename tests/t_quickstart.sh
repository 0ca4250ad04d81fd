#!/usr/bin/env bash
# docs/README.md's quickstart works offline as written: every command line of its
# marked block runs, in order, in a scratch directory that has ./cis2 and the
# docs' example prompts.jsonl. `make` lines are the ones a reader runs in the
# checkout: `make` itself is the build under test, `make demo-model` builds the
# demo checkpoint into the scratch directory's models/demo.
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/quickstart"; rm -rf "$T"; mkdir -p "$T"
root=$PWD
block=$(sed -n '/^<!-- quickstart/,/^<!-- end quickstart/p' docs/README.md | sed -n '/^```sh$/,/^```$/p' | sed '1d;$d')
[ -n "$block" ] || { fail quickstart.block "docs/README.md has no quickstart block"; exit 0; }
example=$(sed -n 's/^`prompts.jsonl` holds one request a line, e.g. `\({.*}\)`.*/\1/p' docs/README.md)
[ -n "$example" ] || { fail quickstart.example "docs/README.md gives no example prompts.jsonl line"; exit 0; }
case "$CIS2" in /*) ln -s "$CIS2" "$T/cis2" ;; *) ln -s "$root/${CIS2#./}" "$T/cis2" ;; esac
printf '%s\n' "$example" > "$T/prompts.jsonl"
n=0; script="set -e"
while IFS= read -r line; do
    cmd=${line%%#*}; cmd=${cmd%"${cmd##*[![:space:]]}"}
    [ -n "$cmd" ] || continue
    case "$cmd" in
        make) cmd="test -x ./cis2" ;;
        "make demo-model") cmd="make -s --no-print-directory -C '$root' demo-model DEMO_MODEL='$T/models/demo' >/dev/null" ;;
        make*) fail quickstart.make-line "a make line the test does not know: $cmd"; exit 0 ;;
    esac
    script+=$'\n'"$cmd"; n=$((n + 1))
done <<< "$block"
out=$(cd "$T" && bash -c "$script" 2>&1); rc=$?
if [ $rc -eq 0 ]; then pass "quickstart.runs-as-written ($n lines)"
else fail quickstart.runs-as-written "rc=$rc: $(printf '%s' "$out" | tail -3 | tr '\n' ' ')"; fi
case "$out" in *"receipt verified: all fields match"*) pass quickstart.receipt-verifies ;;
    *) fail quickstart.receipt-verifies "no 'all fields match' line" ;; esac
case "$out" in *"1 verified, 0 mismatched"*) pass quickstart.batch-verifies ;;
    *) fail quickstart.batch-verifies "verify-batch did not verify the example line" ;; esac
