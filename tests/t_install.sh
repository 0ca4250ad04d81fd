#!/usr/bin/env bash
# `make install` and the installed tree: the layout (binary, libcis2.a,
# libcis2.so with its soname links, cis2.h, cis2.pc), the shared library's
# soname and exported symbols (exactly the functions cis2.h declares), no CLI
# code in the libraries, and a C and a C++ client built against the INSTALLED
# tree with pkg-config, shared and static, whose receipts must equal the
# installed CLI's byte for byte.
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/install"; rm -rf "$T"; mkdir -p "$T"
BUILD="${BUILD:-build}"
bin="${CIS2#./}"
ver=$(sed -n 's/^#define CIS2_VERSION  *"\(.*\)".*/\1/p' include/cis2.h)
abi=$(sed -n 's/^#define CIS2_ABI_VERSION  *\([0-9]*\).*/\1/p' include/cis2.h)
soname="libcis2.so.$abi"
IFS=. read -r _ minor patch <<< "$ver"
real="$soname.$minor.$patch"

[ -f "$BUILD/$real" ] || { fail install.built "$BUILD/$real missing (make all builds it)"; exit 0; }
# A cross build's library cannot be linked into host programs: the aarch64 leg
# checks its libraries with the FMA gate instead.
lib_arch=$(readelf -h "$BUILD/$real" | sed -n 's/^ *Machine: *//p')
host_arch=$(readelf -h /bin/sh | sed -n 's/^ *Machine: *//p')
if [ "$lib_arch" != "$host_arch" ]; then
    skip install "the library under test is built for '$lib_arch', this host is '$host_arch'"
    exit 0
fi
for tool in pkg-config g++ nm readelf; do
    command -v $tool >/dev/null || { fail install.tools "$tool not installed (.ci/run installs it)"; exit 0; }
done

# Nothing is rebuilt by the test: an install from a stale tree would mix flags.
if ! make -q BUILD="$BUILD" BIN="$bin" "$bin" "$BUILD/libcis2.a" "$BUILD/$real" >/dev/null 2>&1; then
    fail install.up-to-date "make BUILD=$BUILD BIN=$bin: the build is stale (run make first)"; exit 0
fi

# --- make install PREFIX=P, and DESTDIR staging
P="$T/prefix"
out=$(make -s --no-print-directory install BUILD="$BUILD" BIN="$bin" PREFIX="$P" 2>&1); rc=$?
[ $rc -eq 0 ] && pass install.make-install || { fail install.make-install "rc=$rc $out"; exit 0; }
missing=""
for f in bin/cis2 lib/libcis2.a "lib/$real" include/cis2.h lib/pkgconfig/cis2.pc; do
    [ -f "$P/$f" ] || missing="$missing $f"
done
[ -x "$P/bin/cis2" ] || missing="$missing bin/cis2(executable)"
[ "$(readlink "$P/lib/$soname")" = "$real" ] || missing="$missing lib/$soname->$real"
[ "$(readlink "$P/lib/libcis2.so")" = "$soname" ] || missing="$missing lib/libcis2.so->$soname"
[ -z "$missing" ] && pass "install.layout (bin, libcis2.a, $real + links, cis2.h, cis2.pc)" \
    || fail install.layout "missing or wrong:$missing"
cmp -s include/cis2.h "$P/include/cis2.h" && pass install.header-is-the-public-header \
    || fail install.header-is-the-public-header "differs from include/cis2.h"
make -s --no-print-directory install BUILD="$BUILD" BIN="$bin" PREFIX=/opt/cis2 DESTDIR="$T/stage" >/dev/null 2>&1
[ -f "$T/stage/opt/cis2/lib/$real" ] && grep -qx 'prefix=/opt/cis2' "$T/stage/opt/cis2/lib/pkgconfig/cis2.pc" \
    && [ ! -e /opt/cis2/lib/$real ] && pass install.destdir-stages-prefix \
    || fail install.destdir-stages-prefix "$(find "$T/stage" -type f | head -5 | tr '\n' ' ')"
make -s --no-print-directory uninstall BUILD="$BUILD" BIN="$bin" PREFIX=/opt/cis2 DESTDIR="$T/stage" >/dev/null 2>&1
left=$(find "$T/stage" -type f -o -type l)
[ -z "$left" ] && pass install.uninstall-removes-everything || fail install.uninstall-removes-everything "$left"

# --- the shared library: soname, exports, dependencies
so="$P/lib/$real"
got=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
expect_eq "install.soname ($real)" "$got" "$soname"
# Declared: what the compiler sees in cis2.h (gcc -aux-info lists every prototype).
echo '#include "cis2.h"' > "$T/decl.c"
gcc -Iinclude -fsyntax-only -aux-info "$T/decl.txt" "$T/decl.c"
grep 'include/cis2.h:' "$T/decl.txt" | sed -n 's/.* \**\(cis2_[a-z0-9_]*\) (.*/\1/p' | sort -u > "$T/declared"
nm -D --defined-only "$so" | awk '$2 == "T" || $2 == "D" || $2 == "B" || $2 == "R" { print $3 }' | sort -u > "$T/exported"
nd=$(wc -l < "$T/declared")
d=$(diff "$T/declared" "$T/exported")
[ "$nd" -gt 40 ] && [ -z "$d" ] && pass "install.exports-exactly-the-public-api ($nd functions)" \
    || fail install.exports-exactly-the-public-api "declared $nd; < declared only, > exported only: $(echo "$d" | grep '^[<>]' | head -8 | tr '\n' ' ')"
# ... while the internals exist in the library (the check above can see a leak).
nm "$P/lib/libcis2.a" 2>/dev/null | grep -q ' T cis2_model_load$' && ! grep -qx cis2_model_load "$T/exported" \
    && pass install.internals-hidden-in-shared-lib || fail install.internals-hidden-in-shared-lib "cis2_model_load"
members=$(ar t "$P/lib/libcis2.a")
cli=$(echo "$members" | grep -E '^(main|common|cmd_.*|trace|conformance|serve.*)\.o$')
nm "$P/lib/libcis2.a" 2>/dev/null | grep -q ' T main$' && cli="$cli main()"
[ -z "$cli" ] && pass "install.static-lib-has-no-cli ($(echo "$members" | wc -l) objects)" \
    || fail install.static-lib-has-no-cli "$cli"
needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | xargs)
case "$needed" in
    *microhttpd*|*stdc++*) fail install.shared-lib-dependencies "$needed" ;;
    *) pass "install.shared-lib-dependencies ($needed)" ;;
esac

# --- clients built against the installed tree through pkg-config
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
cflags=$(pkg-config --cflags cis2); libs=$(pkg-config --libs cis2)
slibs=$(pkg-config --static --libs cis2 | sed 's/-lcis2\b/-l:libcis2.a/')
expect_eq install.pkg-config-version "$(pkg-config --modversion cis2)" "$ver"
case "$(pkg-config --static --libs cis2)" in
    *-lpthread*-lm*) pass install.pkg-config-libs-private ;;
    *) fail install.pkg-config-libs-private "$(pkg-config --static --libs cis2)" ;;
esac
# An ASan build's library needs its runtime in the client too.
san=""
nm -D "$so" 2>/dev/null | grep -q ' U __asan_' && san="-fsanitize=address,undefined"
build_client() { # NAME COMPILER STD SOURCE LINKFLAGS
    local out
    if out=$($2 $3 -Wall -Wextra -Werror -pedantic $san $cflags "$4" -o "$T/$1" $5 2>&1); then
        pass "install.build.$1"
    else fail "install.build.$1" "$(echo "$out" | head -3 | tr '\n' ' ')"; fi
}
build_client c-shared gcc -std=c11 tests/clients/client.c "$libs"
build_client c-static gcc -std=c11 tests/clients/client.c "$slibs"
build_client cxx-shared g++ -std=c++11 tests/clients/client.cpp "$libs"
build_client cxx-static g++ -std=c++11 tests/clients/client.cpp "$slibs"
for c in c-static cxx-static; do
    [ -x "$T/$c" ] || continue
    readelf -d "$T/$c" | grep -q 'NEEDED.*libcis2' && fail "install.$c-is-static" "needs libcis2.so" \
        || pass "install.$c-is-static"
done
if [ -x "$T/c-shared" ]; then
    l=$(LD_LIBRARY_PATH="$P/lib" ldd "$T/c-shared" | grep libcis2)
    case "$l" in *"$P/lib/$soname"*) pass install.c-shared-loads-the-installed-lib ;;
        *) fail install.c-shared-loads-the-installed-lib "$l" ;; esac
    # pkg-config's flags carry the run-time path: no LD_LIBRARY_PATH needed.
    l=$(env -u LD_LIBRARY_PATH ldd "$T/c-shared" | grep libcis2)
    case "$l" in *"$P/lib/$soname"*) pass install.c-shared-finds-lib-without-ld-library-path ;;
        *) fail install.c-shared-finds-lib-without-ld-library-path "$l" ;; esac
fi

# --- the installed CLI names its own, the library's and the spec's version
spec=$(sed -n 's/^#define CIS2_SPEC_VERSION  *"\(.*\)".*/\1/p' include/cis2.h)
expect_eq install.cli-version "$("$P/bin/cis2" --version)" "cis2 $ver (libcis2 $ver, CIS-2 spec $spec)"

# --- same receipts as the installed CLI
python3 tools/make_model.py "$T/model" --arch qwen2 --heads 6 --kv-heads 2 --hidden 48 >/dev/null
M="$T/model"; prompt="Hello, wörld"; ids=5,17,42,7,99
"$P/bin/cis2" run --model "$M" --prompt "$prompt" -n 5 --receipt "$T/cli-text.receipt" >/dev/null \
    || fail install.cli-run "prompt run failed"
"$P/bin/cis2" run --model "$M" --prompt-ids "$ids" -n 5 --receipt "$T/cli-ids.receipt" >"$T/cli-ids.out" \
    || fail install.cli-run "ids run failed"
cli_ref=$(grep '^CIS2_REF' "$T/cli-ids.out")
for c in c-shared c-static; do
    [ -x "$T/$c" ] || continue
    out=$(LD_LIBRARY_PATH="$P/lib" "$T/$c" "$M" "$prompt" 5 "$T/$c.receipt" 2>&1); rc=$?
    [ $rc -eq 0 ] && [[ "$out" =~ fields=[1-9][0-9]*\ mismatches=0$ ]] \
        && pass "install.$c.runs-and-verifies" || fail "install.$c.runs-and-verifies" "rc=$rc $out"
    cmp -s "$T/cli-text.receipt" "$T/$c.receipt" && pass "install.$c.receipt-equals-cli" \
        || fail "install.$c.receipt-equals-cli" "$(diff "$T/cli-text.receipt" "$T/$c.receipt" | head -4 | tr '\n' ' ')"
done
for c in cxx-shared cxx-static; do
    [ -x "$T/$c" ] || continue
    out=$(LD_LIBRARY_PATH="$P/lib" "$T/$c" "$M" "$ids" 5 "$T/$c.receipt" 2>&1); rc=$?
    [ $rc -eq 0 ] && [ "$out" == "$cli_ref" ] && pass "install.$c.cis2-ref-equals-cli" \
        || fail "install.$c.cis2-ref-equals-cli" "rc=$rc got '$out' want '$cli_ref'"
    cmp -s "$T/cli-ids.receipt" "$T/$c.receipt" && pass "install.$c.receipt-equals-cli" \
        || fail "install.$c.receipt-equals-cli" "$(diff "$T/cli-ids.receipt" "$T/$c.receipt" | head -4 | tr '\n' ' ')"
done
# a client's error is the library's one line
out=$(LD_LIBRARY_PATH="$P/lib" "$T/c-shared" "$T/nonexistent" x 1 "$T/x.receipt" 2>&1); rc=$?
[ $rc -ne 0 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && case "$out" in *nonexistent*) true;; *) false;; esac \
    && pass install.client-error-is-one-line || fail install.client-error-is-one-line "rc=$rc $out"
