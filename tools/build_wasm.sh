#!/usr/bin/env bash
# Issue 8: build the engine for wasm32 → web/cis2.wasm (the JS glue is the
# hand-written web/cis2.js, committed; nothing is generated but the .wasm).
#
# Toolchain: clang + wasm-ld (lld) + Debian's wasi-libc + the wasm32
# compiler-rt builtins (docs/wasm.md says why not emscripten):
#   apt-get install -y clang lld wasi-libc libclang-rt-14-dev-wasm32
# Override the compiler with WASM_CC=... (any clang >= 11 with a wasm32 target).
#
# Single-threaded, scalar, reference backend. The same -ffp-contract=off and
# no fast-math as natively (§1.4/§1.5); §1.3 FTZ/DAZ is emulated in software
# by src/core/fparith.h (__wasm__ branch). Excluded: the fast backend and its
# ISA kernels/thread pool (x86/ARM only), and the CLI (src/cli/):
# web/wasm_api.c is the entry point.
set -euo pipefail
# Exit status: 0 built, 3 no usable wasm32 toolchain (tests SKIP), else a build error.
cd "$(dirname "$0")/.."

CC="${WASM_CC:-}"
if [ -z "$CC" ]; then
    for c in clang clang-16 clang-15 clang-14; do command -v "$c" >/dev/null 2>&1 && { CC="$c"; break; }; done
fi
[ -n "$CC" ] || { echo "build_wasm: no clang found (apt-get install -y clang lld wasi-libc libclang-rt-14-dev-wasm32)" >&2; exit 3; }
SYSROOT="${WASI_SYSROOT:-}"
SYSFLAGS=()
if [ -n "$SYSROOT" ]; then SYSFLAGS=(--sysroot="$SYSROOT"); fi
# Probe: can this clang compile and link a wasi program?
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stdio.h>\nint main(void){printf("%%g\\n",1.5);return 0;}\n' > "$probe/p.c"
if ! "$CC" --target=wasm32-wasi "${SYSFLAGS[@]}" -O2 "$probe/p.c" -o "$probe/p.wasm" 2> "$probe/err"; then
    echo "build_wasm: $CC cannot build for wasm32-wasi:" >&2
    head -5 "$probe/err" >&2
    echo "build_wasm: install: apt-get install -y clang lld wasi-libc libclang-rt-14-dev-wasm32" >&2
    exit 3
fi

# WASM_BUILD: object dir; WASM_OUT: the module (tests build into tests/tmp).
OUT="${WASM_BUILD:-build-wasm}"
WASM_OUT="${WASM_OUT:-web/cis2.wasm}"
mkdir -p "$OUT" "$(dirname "$WASM_OUT")"
SRC="engine/backend_ref model/config engine/decode engine/fault model/weights model/bigmem core/fpenv core/json kernels/kernels_ref kernels/pick model/model core/pinned_math verify/receipt verify/receipt_verify model/safetensors core/selftest core/sha256 model/tokenizer model/unicode_tables core/util core/io core/strbuf"
CFLAGS=(--target=wasm32-wasi "${SYSFLAGS[@]}" -std=c11 -D_GNU_SOURCE -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_GETPID
        -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
        -ffp-contract=off -fno-math-errno -fno-strict-aliasing -O2 -Iinclude -Isrc)
OBJS=()
for f in $SRC; do
    o="$OUT/${f//\//_}.o"
    # rebuild when the source or any header is newer
    if [ ! -f "$o" ] || [ -n "$(find "src/$f.c" src/*/*.h include/*.h -newer "$o" 2>/dev/null | head -1)" ]; then
        "$CC" "${CFLAGS[@]}" -c "src/$f.c" -o "$o"
    fi
    OBJS+=("$o")
done
for f in wasm_api wasm_stubs; do
    o="$OUT/$f.o"
    "$CC" "${CFLAGS[@]}" -c "web/$f.c" -o "$o"
    OBJS+=("$o")
done
# Reactor (no main): the glue calls _initialize, then the cis2w_* exports.
# Memory grows on demand up to 4 GiB (SmolLM2: ~270 MB file + ~540 MB f32).
"$CC" "${CFLAGS[@]}" -mexec-model=reactor -Wl,--max-memory=4294967296 -Wl,-z,stack-size=1048576 \
    -o "$WASM_OUT" "${OBJS[@]}"
# No FMA exists in wasm's scalar (or SIMD128) instruction set; relaxed-simd's
# fused ops (f32x4.relaxed_madd) would be the only risk and are not enabled.
echo "build_wasm: $WASM_OUT ($(stat -c %s "$WASM_OUT") bytes) with $($CC --version | head -1)"
