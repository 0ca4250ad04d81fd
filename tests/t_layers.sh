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
rank() { local i; for i in "${!LAYERS[@]}"; do [ "${LAYERS[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
# check_tree ROOT: prints one line per violation
check_tree() {
    local root="$1" f layer r inc il ir
    for f in "$root"/src/*/*.[ch]; do
        [ -e "$f" ] || continue
        layer=$(basename "$(dirname "$f")"); r=$(rank "$layer")
        [ "$r" -ge 0 ] || { echo "$f: directory '$layer' is not a layer"; continue; }
        while IFS= read -r inc; do
            case "$inc" in
                cis2.h) ;;
                */*) il="${inc%%/*}"; ir=$(rank "$il")
                     if [ "$ir" -lt 0 ]; then echo "$f: includes \"$inc\" (not a layer)";
                     elif [ "$ir" -gt "$r" ]; then echo "$f: $layer includes \"$inc\" from the higher layer $il"; fi ;;
                *) echo "$f: includes \"$inc\" without its layer directory" ;;
            esac
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
        head -c 2 "$f" | grep -q '^/\*' || echo "$f: does not open with a comment saying what it is for"
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
        for fn in $defs; do
            perl -0pe 's{/\*.*?\*/}{}gs' "$f" | grep -qw "$fn" && echo "$f: calls $fn, which engine.c defines (calls go engine.c -> $(basename "$f") only)"
        done
    done
    return 0
}
out=$(check_tree .)
n=$(ls src/*/*.[ch] | wc -l)
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
