#!/usr/bin/env bash
# House habits that a reader relies on: C lines of at most 100 columns, the
# tree formatted by .clang-format (where clang-format is installed), and no
# work-tracker tags ("issue N") in source comments — comments cite the spec (§).
set -u
cd "$(dirname "$0")/.."
files=$(git ls-files 'src/*.c' 'src/*.h' 'include/*.h' 'tests/*.c' 'tests/*.h' 'fuzz/*.c' 'fuzz/*.h' 'web/*.c' 'web/test/*.c' 'python/*.c' 2>/dev/null)
[ -n "$files" ] || files=$(ls src/*/*.[ch] src/*/*/*.[ch] include/*.h tests/*.[ch] fuzz/*.[ch] web/*.c)
# One python3 and one clang-format process over all the files, not one per file.
# shellcheck disable=SC2086
long=$(python3 -c '
import sys
for f in sys.argv[1:]:
    for i, l in enumerate(open(f, encoding="utf-8").read().split("\n")):
        if len(l) > 100: print("%s:%d (%d columns)" % (f, i + 1, len(l)))' $files)
n=$(echo "$files" | wc -w)
[ -z "$long" ] && echo "PASS style.columns ($n C files, every line <= 100 columns)" \
    || echo "FAIL style.columns: $(echo "$long" | head -3 | tr '\n' ' ')"
tags=$(grep -n -i -E '\bissue [0-9]+' $(echo "$files" | tr ' ' '\n' | grep '^src/\|^include/') 2>/dev/null)
[ -z "$tags" ] && echo "PASS style.no-issue-tags (src/ and include/ cite the spec, not the tracker)" \
    || echo "FAIL style.no-issue-tags: $(echo "$tags" | head -3 | tr '\n' ' ')"
if command -v clang-format >/dev/null 2>&1; then
    # --dry-run names each file it would change in its "file:line:col: error" lines.
    # shellcheck disable=SC2086
    bad=$(clang-format --dry-run -Werror $files 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort -u)
    # shellcheck disable=SC2086
    clang-format --dry-run -Werror $files >/dev/null 2>&1 || [ -n "$bad" ] || bad="(clang-format failed without naming a file)"
    [ -z "$bad" ] && echo "PASS style.clang-format ($n files match .clang-format)" \
        || echo "FAIL style.clang-format: not formatted: $(echo "$bad" | head -5 | tr '\n' ' ') (run clang-format -i)"
else
    echo "SKIP style.clang-format: clang-format not installed"
fi
