# Helpers for tests/t_*.sh. Source it; then use pass/fail/skip/expect_*.
set -u
CIS2="${CIS2:-./cis2}"
TESTTMP="${TESTTMP:-tests/tmp}"
mkdir -p "$TESTTMP"
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: ${2:-}"; }
skip() { echo "SKIP $1: ${2:-}"; }
# expect_err NAME EXPECTED_SUBSTRING CMD...: command must exit nonzero (not by a
# signal), print exactly one line on stderr containing the substring.
expect_err() {
    local name="$1" want="$2"; shift 2
    local out rc
    out=$("$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 0 ]; then fail "$name" "exited 0, wanted an error containing '$want'"; return; fi
    if [ $rc -ge 128 ]; then fail "$name" "killed by signal (rc=$rc): $out"; return; fi
    if [ "$(printf '%s\n' "$out" | grep -c .)" -ne 1 ]; then fail "$name" "wanted one error line, got: $out"; return; fi
    case "$out" in *"$want"*) pass "$name";; *) fail "$name" "error '$out' lacks '$want'";; esac
}
# expect_eq NAME GOT WANT
expect_eq() { if [ "$2" == "$3" ]; then pass "$1"; else fail "$1" "got '$2' want '$3'"; fi; }
# The real SmolLM2 artifacts: env var, then models/, then ../shared/models/.
find_real_model() {
    for d in "${CIS2_SMOLLM2_DIR:-}" models/SmolLM2-135M ../shared/models/SmolLM2-135M; do
        [ -n "$d" ] && [ -f "$d/$1" ] && { echo "$d"; return 0; }
    done
    return 1
}
# errors_row ID "WHAT IS WRONG" "ALSO TESTED BY" CMD...: the command's one stderr
# line and exit status must be exactly those of docs/errors.md's row ID (paths
# under $ERRORS_DIR written DIR); ERRORS_DUMP=1 prints the row from the binary.
errors_row() {
    local id="$1" what="$2" also="$3" out rc n line want_rc want_msg; shift 3
    out=$("$@" 2>&1 >/dev/null); rc=$?
    out=$(printf '%s' "$out" | sed "s#${ERRORS_DIR:?}/[A-Za-z0-9_.-]*#DIR#g")
    if [ -n "${ERRORS_DUMP:-}" ]; then
        printf '| `%s` | %s | %s | `%s` | %s |\n' "$id" "$what" "$rc" "$out" "$also"; return
    fi
    n=$(printf '%s\n' "$out" | grep -c .)
    line=$(grep -F "| \`$id\` |" docs/errors.md | head -1)
    if [ -z "$line" ]; then fail "errors.$id" "no row for $id in docs/errors.md"; return; fi
    want_rc=$(printf '%s' "$line" | awk -F' [|] ' '{ print $3 }')
    want_msg=$(printf '%s' "$line" | awk -F' [|] ' '{ print $4 }' | sed 's/^`//; s/`$//')
    if [ $rc -ge 128 ]; then fail "errors.$id" "killed by signal (rc=$rc): $out"
    elif [ "$n" -ne 1 ]; then fail "errors.$id" "wanted one stderr line, got $n: $out"
    elif [ "$rc" != "$want_rc" ]; then fail "errors.$id" "exit $rc, docs/errors.md says $want_rc ($out)"
    elif [ "$out" != "$want_msg" ]; then fail "errors.$id" "message '$out', docs/errors.md says '$want_msg'"
    else pass "errors.$id"; fi
}
