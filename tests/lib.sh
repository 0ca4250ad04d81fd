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
