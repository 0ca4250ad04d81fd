# Helpers for tests/t_*.sh. Source it; then use pass/fail/skip/expect_*.
set -u
CIS2="${CIS2:-./cis2}"
TESTTMP="${TESTTMP:-tests/tmp}"
# tools/torch_trace.py keeps its traces here (see its cache_key): the sanitizer and aarch64
# legs, whose TESTTMP differs, compare against what the native leg's PyTorch computed.
export CIS2_TRACE_CACHE="${CIS2_TRACE_CACHE:-$PWD/tests/tmp/torch-cache}"
mkdir -p "$TESTTMP"
source "$(dirname "${BASH_SOURCE[0]}")/py3_path.sh"
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
# A command still running after 20 s fails as hung (a FIFO opened blocking).
# The table is read once per suite (the first row of each ID), not per row.
shopt -s extglob
declare -A ERRTAB_RC=() ERRTAB_MSG=(); ERRTAB_READ=""
errtab_read() {
    local id rc msg
    while IFS=$'\t' read -r id rc msg; do
        [ -n "${ERRTAB_RC[$id]+x}" ] || { ERRTAB_RC[$id]=$rc; ERRTAB_MSG[$id]=$msg; }
    done < <(awk -F' [|] ' '/^\| `/ { id = $1; sub(/^\| `/, "", id); sub(/`$/, "", id)
        m = $4; sub(/^`/, "", m); sub(/`$/, "", m); print id "\t" $3 "\t" m }' docs/errors.md)
    ERRTAB_READ=1
}
errors_row() {
    local id="$1" what="$2" also="$3" out rc n=0 l want_rc want_msg; shift 3
    out=$(timeout 20 "$@" 2>&1 >/dev/null); rc=$?
    out=${out//"${ERRORS_DIR:?}/"*([A-Za-z0-9_.-])/DIR}
    if [ -n "${ERRORS_DUMP:-}" ]; then
        printf '| `%s` | %s | %s | `%s` | %s |\n' "$id" "$what" "$rc" "$out" "$also"; return
    fi
    while IFS= read -r l; do [ -z "$l" ] || n=$((n + 1)); done <<< "$out"
    [ -n "$ERRTAB_READ" ] || errtab_read
    if [ -z "${ERRTAB_RC[$id]+x}" ]; then fail "errors.$id" "no row for $id in docs/errors.md"; return; fi
    want_rc=${ERRTAB_RC[$id]} want_msg=${ERRTAB_MSG[$id]}
    if [ $rc -eq 124 ]; then fail "errors.$id" "hung (killed after 20 s): $out"
    elif [ $rc -ge 128 ]; then fail "errors.$id" "killed by signal (rc=$rc): $out"
    elif [ "$n" -ne 1 ]; then fail "errors.$id" "wanted one stderr line, got $n: $out"
    elif [ "$rc" != "$want_rc" ]; then fail "errors.$id" "exit $rc, docs/errors.md says $want_rc ($out)"
    elif [ "$out" != "$want_msg" ]; then fail "errors.$id" "message '$out', docs/errors.md says '$want_msg'"
    else pass "errors.$id"; fi
}
# make_fixture DIR QDIR [MAKE_MODEL_ARGS...]: a generated model (tools/make_model.py) in DIR
# and, unless QDIR is empty, its int8 twin (`cis2 quantize`, defaults) in QDIR; non-zero when
# either failed.
make_fixture() {
    local d="$1" q="$2"; shift 2
    python3 tools/make_model.py "$d" "$@" >/dev/null 2>&1 || return 1
    [ -z "$q" ] || "$CIS2" quantize --model "$d" --out "$q" >/dev/null 2>&1
}
# vector_args FILE.vector: the make_model.py arguments a fixture vector records.
vector_args() { sed -n 's/^#   python3 tools\/make_model.py DIR //p' "$1"; }
# serve_setup PREFIX: for the tests of `cis2 serve` (output under $T): SKIPs PREFIX and exits
# without curl or without libmicrohttpd; otherwise every server `start` launches is killed at
# exit. Then: start NAME ARGS... (a server on a free port: PORT and SPID; a failure is
# PREFIX.NAME.start), C (curl), jget FILE PYTHON-EXPR-over-d (jq-like).
serve_setup() {
    SERVE_PREFIX="$1"
    command -v curl >/dev/null || { skip "$1" "curl is not installed (apt-get install curl)"; exit 0; }
    local probe
    probe=$("$CIS2" serve --model /nonexistent 2>&1)
    case "$probe" in *"without libmicrohttpd"*) skip "$1" "$probe"; exit 0;; esac
    PIDS=()
    trap serve_cleanup EXIT
    source tools/serve_start.sh
}
serve_cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
start() {
    local name="$1"; shift
    serve_start "$T/$name.log" "$@"; local rc=$?
    PIDS+=("$SPID")
    [ $rc -eq 0 ] || fail "$SERVE_PREFIX.$name.start" "$(tail -3 "$T/$name.log")"
    return $rc
}
C() { curl -sS --max-time 120 "$@"; }
jget() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=eval(sys.argv[2]); print(v if not isinstance(v,(dict,list,bool)) else json.dumps(v))' "$@"; }
# numpy_python: the first of $CIS2_PYTHON, /usr/bin/python3, python3 that imports numpy
# (tools/sample_reference.py needs it); prints nothing when none does.
numpy_python() {
    local c p
    for c in ${CIS2_PYTHON:-} /usr/bin/python3 python3; do
        p=$(command -v "$c" 2>/dev/null) || continue
        "$p" -c 'import numpy' 2>/dev/null && { printf '%s\n' "$p"; return 0; }
    done
    return 1
}
# has_torch PY: PY can import torch and numpy (found, not imported: an import takes seconds).
has_torch() {
    "$1" -c 'import importlib.util as u, sys
sys.exit(not (u.find_spec("torch") and u.find_spec("numpy")))' 2>/dev/null
}
# host_isas: the --isa values this host runs (uname -m answers aarch64 under the aarch64 leg).
host_isas() {
    local isas="scalar sse2"
    grep -qw avx2 /proc/cpuinfo 2>/dev/null && isas="$isas avx2"
    grep -qw avx512f /proc/cpuinfo 2>/dev/null && isas="$isas avx512"
    [ "$(uname -m)" = aarch64 ] && isas="scalar neon"
    echo "$isas"
}
# make_nan_logit_model DIR: a one-layer f32 model whose logit 7 is NaN at every step (final
# norm weight 0 at index 0, so h[0] = 0, and +inf at lm_head[7][0]: inf * 0 = NaN; the loader
# refuses NaN/Inf in norms only). Non-zero when it could not be made.
make_nan_logit_model() {
    python3 tools/make_model.py "$1" --layers 1 --untied --dtype f32 >/dev/null || return 1
    python3 - "$1/model.safetensors" <<'PY'
import sys, struct, json
p = sys.argv[1]; d = bytearray(open(p, 'rb').read()); n = struct.unpack('<Q', d[:8])[0]
h = json.loads(d[8:8 + n]); base = 8 + n
a = h['model.norm.weight']['data_offsets'][0]; d[base + a:base + a + 4] = struct.pack('<f', 0.0)
hid = h['lm_head.weight']['shape'][1]; a = h['lm_head.weight']['data_offsets'][0] + 7 * hid * 4
d[base + a:base + a + 4] = struct.pack('<I', 0x7F800000); open(p, 'wb').write(d)
PY
}
