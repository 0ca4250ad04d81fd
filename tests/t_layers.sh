#!/usr/bin/env bash
# The layers of src/ (core → model → kernels → engine → verify → cli) are
# visible in the tree and only ever include downward: a file may include the
# public header, headers of its own layer, and headers of layers below it.
# Also: include/cis2.h is public (no internal header), and every source file
# opens with a comment saying what it is for. A negative control proves the
# check fires.
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
