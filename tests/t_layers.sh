#!/usr/bin/env bash
# The layers of src/ (core → model → kernels → engine → verify → cli) are
# visible in the tree and only ever include downward: a file may include the
# public header, headers of its own layer, and headers of layers below it.
# Also: include/cis2.h is public (no internal header), and every source file
# opens with a comment saying what it is for; and inside the engine, calls go
# one way: engine.c calls forward.c, kv_cache.c and witness.c, and no other
# engine file calls a function engine.c defines (no engine.c <-> forward.c
# circle). Negative controls prove the checks fire.
set -u
cd "$(dirname "$0")/.."
LAYERS=(core model kernels engine verify cli)
declare -A RANK=()
for i in "${!LAYERS[@]}"; do RANK[${LAYERS[$i]}]=$i; done
# check_tree ROOT: prints one line per violation
check_tree() {
    local root="$1" f layer r inc il ir first
    for f in "$root"/src/*/*.[ch] "$root"/src/*/*/*.[ch]; do
        [ -e "$f" ] || continue
        layer=${f#"$root"/src/}; layer=${layer%%/*}; r=${RANK[$layer]:--1}
        [ "$r" -ge 0 ] || { echo "$f: directory '$layer' is not a layer"; continue; }
        while IFS= read -r inc; do
            case "$inc" in
                cis2.h) ;;
                */*) il="${inc%%/*}"; ir=${RANK[${il:-.}]:--1}
                     if [ "$ir" -lt 0 ]; then echo "$f: includes \"$inc\" (not a layer)";
                     elif [ "$ir" -gt "$r" ]; then echo "$f: $layer includes \"$inc\" from the higher layer $il"; fi ;;
                *) echo "$f: includes \"$inc\" without its layer directory" ;;
            esac
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
        first=""; IFS= read -r -n 2 first < "$f"
        [ "$first" = "/*" ] || echo "$f: does not open with a comment saying what it is for"
    done
    grep -q '#include "' "$root/include/cis2.h" && echo "include/cis2.h: includes a project header"
    return 0
}
# check_engine ROOT: one line per engine file that calls a function engine.c
# defines (its non-static definitions: a line opening with a type, then
# NAME(; comments, which may name them, are left out of the search).
check_engine() {
    local root="$1" f fn
    local defs
    defs=$(sed -n '/^static/d; s/^[a-z][a-z0-9_ *]*[ *]\([a-z_][a-z0-9_]*\)(.*/\1/p' "$root/src/engine/engine.c" \
        2>/dev/null | grep -v '^$' | sort -u)
    for f in "$root"/src/engine/*.c; do
        [ "$(basename "$f")" = engine.c ] && continue
        [ -n "$defs" ] || continue
        perl -0pe 's{/\*.*?\*/}{}gs' "$f" | grep -owF "$defs" | sort -u | while IFS= read -r fn; do
            echo "$f: calls $fn, which engine.c defines (calls go engine.c -> $(basename "$f") only)"
        done
    done
    return 0
}
out=$(check_tree .)
n=$(ls src/*/*.[ch] src/*/*/*.[ch] 2>/dev/null | wc -l)
if [ -z "$out" ]; then echo "PASS layers.include-direction ($n files in ${#LAYERS[@]} layers, none includes upward)"
else echo "FAIL layers.include-direction: $(echo "$out" | head -5 | tr '\n' ';')"; fi
[ -z "$(ls src/*.c src/*.h 2>/dev/null)" ] && echo "PASS layers.no-flat-src (every source lives in a layer directory)" \
    || echo "FAIL layers.no-flat-src: $(ls src/*.c src/*.h 2>/dev/null | head -3 | tr '\n' ' ')"
# negative control: a model file including an engine header must be caught
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/model" "$tmp/include"; : > "$tmp/include/cis2.h"
printf '/* control */\n#include "engine/backend.h"\n' > "$tmp/src/model/bad.c"
ctl=$(check_tree "$tmp")
case "$ctl" in *"higher layer engine"*) echo "PASS layers.negative-control-fires";; *) echo "FAIL layers.negative-control-fires: got '$ctl'";; esac
out=$(check_engine .)
nd=$(sed -n '/^static/d; s/^[a-z][a-z0-9_ *]*[ *]\([a-z_][a-z0-9_]*\)(.*/\1/p' src/engine/engine.c | grep -c .)
if [ -z "$out" ] && [ "$nd" -gt 0 ]; then
    echo "PASS layers.engine-one-way (no other engine file calls any of engine.c's $nd functions)"
else echo "FAIL layers.engine-one-way: ${out:-no function definitions found in src/engine/engine.c}"; fi
# negative control: a forward.c calling back into engine.c must be caught
mkdir -p "$tmp/src/engine"
printf '/* control */\nint cis2_engine_step(void *e, char *err)\n{\n    return 0;\n}\n' > "$tmp/src/engine/engine.c"
printf '/* control */\nstatic void f(void) { cis2_engine_step(0, 0); }\n' > "$tmp/src/engine/forward.c"
ctl=$(check_engine "$tmp")
case "$ctl" in *"forward.c: calls cis2_engine_step"*) echo "PASS layers.engine-negative-control-fires";; *) echo "FAIL layers.engine-negative-control-fires: got '$ctl'";; esac

# ---- The library's edge (Makefile: the three lists; docs/architecture.md, "The library's
# edge"), read from the built objects with nm by tests/edge_check.py:
#   cli-public-api: every library function a src/cli/ object calls is exported by libcis2.so
#     (so declared by cis2.h, tests/t_install.sh) or defined by the tool library
#     libcis2_tool.a; `cis2 bench`'s white-box objects take exactly the internals listed here;
#   lib-all-reachable: every object of libcis2.so is reached from an exported function;
#   tool-shared-are-leaves: an object archived in both libraries needs nothing of libcis2
#     but exported functions and the tool library's own objects;
#   wasm-public-api: the same rule as cli-public-api for the wasm build's web/wasm_api.c.
# Negative controls: a CLI object calling cis2_model_load, and an orphan library object.
BUILD="${BUILD:-build}"
so="$BUILD/libcis2.so"
if [ ! -e "$so" ] || ! command -v nm >/dev/null || ! command -v python3 >/dev/null; then
    echo "SKIP layers.edge: no $so (make first), nm or python3"
else
    make -s --no-print-directory BUILD="$BUILD" print-edge > "$tmp/lists"
    out=$(python3 tests/edge_check.py "$so" "$tmp/lists" 2>&1)
    counts=$(echo "$out" | sed -n 's/^counts //p')
    read -r used internal white nlib unreach <<< "$counts"
    bad=$(echo "$out" | grep '^cli-internal ')
    if [ -z "$counts" ]; then echo "FAIL layers.edge: edge_check.py: $(echo "$out" | tail -2 | tr '\n' ' ')"
    elif [ -z "$bad" ]; then echo "PASS layers.edge.cli-public-api ($used library functions used by the CLI: exported or libcis2_tool.a's)"
    else echo "FAIL layers.edge.cli-public-api: $internal internal functions: $(echo "$bad" | head -6 | tr '\n' ';')"; fi
    # `cis2 bench` times the engine's parts; a new internal there is a decision, made here.
    wb=$(echo "$out" | sed -n 's/^whitebox //p' | tr '\n' ' ')
    want_wb="cli/bench_peak.o fast_kernels_pick cli/cmd_bench.o cis2_backend_fast_create cli/cmd_bench.o cis2_backend_ref_new cli/cmd_bench.o cis2_model_load cli/cmd_bench.o cis2_model_unload cli/cmd_bench.o cis2_weights_step_bytes "
    [ -n "$counts" ] && { [ "$wb" = "$want_wb" ] && echo "PASS layers.edge.whitebox-is-bench-only ($white internals: $wb)" \
        || echo "FAIL layers.edge.whitebox-is-bench-only: got '$wb'"; }
    un=$(echo "$out" | sed -n 's/^unreachable //p' | tr '\n' ' ')
    [ -n "$counts" ] && { [ -z "$un" ] && [ "${nlib:-0}" -gt 20 ] && echo "PASS layers.edge.lib-all-reachable ($nlib objects in libcis2.so, each reached from an export)" \
        || echo "FAIL layers.edge.lib-all-reachable: $unreach of $nlib unreachable: $un"; }
    nl=$(echo "$out" | grep '^shared-not-leaf ')
    [ -n "$counts" ] && { [ -z "$nl" ] && echo "PASS layers.edge.tool-shared-are-leaves" \
        || echo "FAIL layers.edge.tool-shared-are-leaves: $(echo "$nl" | head -4 | tr '\n' ';')"; }
    # negative controls
    printf 'struct m;\nint cis2_model_load(void);\nint control_cli(void) { return cis2_model_load(); }\n' > "$tmp/ctl_cli.c"
    printf 'int cis2_orphan_control(void);\nint cis2_orphan_control(void) { return 42; }\n' > "$tmp/ctl_orphan.c"
    if cc -c "$tmp/ctl_cli.c" -o "$tmp/ctl_cli.o" && cc -c "$tmp/ctl_orphan.c" -o "$tmp/ctl_orphan.o"; then
        sed "s#^LIB #LIB $tmp/ctl_orphan.o #" "$tmp/lists" > "$tmp/lists2"
        ctl=$(python3 tests/edge_check.py "$so" "$tmp/lists2" "$tmp/ctl_cli.o" 2>&1)
        echo "$ctl" | grep -q '^cli-internal [^ ]*ctl_cli.o cis2_model_load$' \
            && echo "$ctl" | grep -q '^unreachable [^ ]*ctl_orphan.o$' \
            && echo "PASS layers.edge.negative-controls-fire" \
            || echo "FAIL layers.edge.negative-controls-fire: $(echo "$ctl" | grep -v '^whitebox' | head -3 | tr '\n' ';')"
    else echo "FAIL layers.edge.negative-controls-fire: cc could not build the controls"; fi
    # The wasm build's glue (web/wasm_api.c) stands where the CLI does: cis2.h plus
    # libcis2_tool.a. Compiled natively (-w: the wasm export attributes), it is one more
    # CLI object to the check, and no library function it calls may be an internal.
    if cc -std=c11 -w -D_GNU_SOURCE -Isrc -Iinclude -c web/wasm_api.c -o "$tmp/wasm_api.o" 2> "$tmp/wasm_cc"; then
        wout=$(python3 tests/edge_check.py "$so" "$tmp/lists" "$tmp/wasm_api.o" 2>&1)
        wbad=$(echo "$wout" | grep -E '^(cli-internal|whitebox) [^ ]*wasm_api\.o ')
        wused=$(nm "$tmp/wasm_api.o" | awk '$1 == "U" && $2 ~ /^(cis2_|smp_)/' | wc -l)
        if ! echo "$wout" | grep -q '^counts '; then echo "FAIL layers.edge.wasm-public-api: edge_check.py: $(echo "$wout" | tail -2 | tr '\n' ' ')"
        elif [ -z "$wbad" ] && [ "$wused" -gt 30 ]; then echo "PASS layers.edge.wasm-public-api (web/wasm_api.c calls $wused library functions: exported or libcis2_tool.a's)"
        else echo "FAIL layers.edge.wasm-public-api: $(echo "$wbad" | wc -l) internal functions (of $wused): $(echo "$wbad" | head -6 | sed 's/^[^ ]* [^ ]* //' | tr '\n' ' ')"; fi
    else echo "FAIL layers.edge.wasm-public-api: cc could not compile web/wasm_api.c: $(head -2 "$tmp/wasm_cc" | tr '\n' ' ')"; fi
fi

# ---- Library messages are in the library's terms, never a command-line flag (cis2.h, at
# cis2_engine_new): the cis2 CLI names its flag when it prints one (src/cli/common.c,
# flag_terms), and Python or a C program never sees a flag it cannot give. Every string
# literal of a libcis2 source (the Makefile's LIB list) is checked; comments are not.
if [ -s "${tmp}/lists" ]; then
    libsrc=$(sed -n 's/^LIB //p' "$tmp/lists" | tr ' ' '\n' | sed -n 's#^.*/pic/\(.*\)\.o$#src/\1.c#p')
    # shellcheck disable=SC2086
    flags=$(python3 tests/edge_check.py --flags $libsrc 2>&1)
    nf=$(echo "$libsrc" | wc -w)
    [ -z "$flags" ] && [ "$nf" -gt 20 ] && echo "PASS layers.lib-messages-name-no-flag ($nf libcis2 sources)" \
        || echo "FAIL layers.lib-messages-name-no-flag: $(echo "$flags" | wc -l) literals: $(echo "$flags" | head -4 | tr '\n' ';')"
    printf '/* a --comment */\nstatic const char *m = "unknown --isa x"; // "--no"\n' > "$tmp/ctl_flag.c"
    ctl=$(python3 tests/edge_check.py --flags "$tmp/ctl_flag.c" 2>&1)
    [ "$ctl" = "flag $tmp/ctl_flag.c:2: \"unknown --isa x\"" ] && echo "PASS layers.lib-messages-negative-control-fires" \
        || echo "FAIL layers.lib-messages-negative-control-fires: got '$ctl'"
fi
