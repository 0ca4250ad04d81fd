# Sourced by tests/t_serve.sh, tests/t_serve_page.sh and tools/serve_bench.sh: start
# `$CIS2 serve ARGS...` on a port the kernel picks (127.0.0.1 unless ARGS say otherwise) and
# wait for its "listening on" line (60 s at most).
#   serve_start LOG ARGS...   sets SPID and PORT; returns 1 (PORT empty) when it did not
#                             start, LOG says why.
serve_start() {
    local log="$1"; shift
    "${CIS2:-./cis2}" serve --port 0 "$@" > "$log" 2>&1 &
    SPID=$!; PORT=""
    for _ in $(seq 1 600); do
        PORT=$(sed -n 's|^cis2 serve: listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$log")
        [ -n "$PORT" ] && return 0
        kill -0 "$SPID" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
