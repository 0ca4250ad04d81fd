#!/usr/bin/env bash
# Build the engine for wasm32 → web/cis2.wasm (the JS glue is the
# hand-written web/cis2.js, committed; nothing is generated but the .wasm).
#
# Toolchain: clang + wasm-ld (lld) + Debian's wasi-libc + the wasm32
# compiler-rt builtins (docs/wasm.md says why not emscripten):
#   apt-get install -y clang lld wasi-libc libclang-rt-14-dev-wasm32
# Override the compiler with WASM_CC=... (any clang >= 11 with a wasm32 target).
#
# The fast backend with the WebAssembly SIMD128 kernels (src/kernels/kernels_wasm128.c;
# plain SIMD128, -msimd128, never relaxed-SIMD), single-threaded (the thread pool runs
# tasks on the caller), and the reference backend. The same -ffp-contract=off and no
# fast-math as natively (§1.4/§1.5); §1.3 FTZ/DAZ is emulated in software by
# src/core/fparith.h (__wasm__ branch, scalar and vector forms). Excluded: the CLI
# (src/cli/): web/wasm_api.c is the entry point.
set -euo pipefail
# Exit status: 0 built, 2 an unknown argument, 3 no usable wasm32 toolchain (tests SKIP),
# else a build error.
# --probe: only find the compiler and try it on a trivial program; prints the compiler
# (exit 0) or says why not (exit 3). Tests that build their own wasm32 programs use it.
cd "$(dirname "$0")/.."
# Names from the environment are printed escaped (printf %q): a control
# character in WASM_CC must not reach the terminal raw.
q() { printf '%q' "$1"; }
for a in "$@"; do
    [ "$a" = --probe ] && [ $# -eq 1 ] && continue
    echo "build_wasm: unknown argument $(q "$a") (the only one is --probe, alone)" >&2
    exit 2
done

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
    echo "build_wasm: $(q "$CC") cannot build for wasm32-wasi:" >&2
    head -5 "$probe/err" | cat -v >&2
    echo "build_wasm: install: apt-get install -y clang lld wasi-libc libclang-rt-14-dev-wasm32" >&2
    exit 3
fi
if [ "${1:-}" = --probe ]; then
    printf '%s\n' "$CC" # the command itself, for the caller to run
    exit 0
fi

# WASM_BUILD: object dir; WASM_OUT: the module (tests build into tests/tmp).
OUT="${WASM_BUILD:-build-wasm}"
WASM_OUT="${WASM_OUT:-web/cis2.wasm}"
mkdir -p "$OUT" "$(dirname "$WASM_OUT")"
# One source list with the native build: every file of the library's layers (the Makefile's
# LAYERS less cli: libcis2's sources and the tool library's, web/wasm_api.c being a tool),
# except those that cannot work in a browser tab: the conformance suite
# runner (fork/exec of a candidate), the writer of a quantized model directory (directory
# renames and fsync, its kill hooks' signals), and the chat templates (the Jinja renderer
# unwinds its errors with longjmp, which wasi-libc lacks; the page verifies receipts, which
# hold the rendered prompt's ids, and renders no template).
SRC=$(for f in src/core/*.c src/model/*.c src/kernels/*.c src/engine/*.c src/verify/*.c; do
    f=${f#src/}; f=${f%.c}
    case "$f" in
        verify/suite | model/quant_outdir | model/quantize_write | model/chat | model/jinja_*) ;;
        *) printf '%s ' "$f" ;;
    esac
done)
CFLAGS=(--target=wasm32-wasi -msimd128 "${SYSFLAGS[@]}" -std=c11 -D_GNU_SOURCE -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_GETPID
        -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
        -ffp-contract=off -fno-math-errno -fno-strict-aliasing -O2 -Iinclude -Isrc)
# The library's files as natively (the Makefile's CFLAGS_BASE): every non-static function
# declared in a header first. web/*.c: the exports are entry points named by their EXPORT
# attribute, with no header of their own.
SRC_WARN=(-Wmissing-prototypes)
OBJS=()
for f in $SRC; do
    o="$OUT/${f//\//_}.o"
    # rebuild when the source or any header is newer
    if [ ! -f "$o" ] || [ -n "$(find "src/$f.c" src/*/*.h include/*.h -newer "$o" 2>/dev/null | head -1)" ]; then
        "$CC" "${CFLAGS[@]}" "${SRC_WARN[@]}" -c "src/$f.c" -o "$o"
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
# No FMA exists in wasm's scalar or SIMD128 instruction set; relaxed-simd's fused
# ops (f32x4.relaxed_madd) would be the only risk: -mrelaxed-simd is never given, and
# the module's target_features section (written by wasm-ld from every object) must list
# simd128 and must not list relaxed-simd.
if grep -q 'relaxed-simd' "$WASM_OUT" || ! grep -q 'simd128' "$WASM_OUT"; then
    echo "build_wasm: $WASM_OUT: target_features must list simd128 and not relaxed-simd" >&2
    rm -f "$WASM_OUT"
    exit 1
fi
echo "build_wasm: $WASM_OUT ($(stat -c %s "$WASM_OUT") bytes) with $($CC --version | head -1)"
# WASM_TESTS=DIR: also the unit tests that prove the wasm kernels (tests/unit_fast.c: every
# kernel bit-identical to the scalar reference over shapes and dtypes; tests/unit_ftz.c: the
# §1.3 flush window) as WASI commands DIR/unit_*.wasm, run by web/test/run_wasi.mjs.
if [ -n "${WASM_TESTS:-}" ]; then
    mkdir -p "$WASM_TESTS"
    LIBOBJS=()
    for o in "${OBJS[@]}"; do case "$o" in */wasm_api.o) ;; *) LIBOBJS+=("$o") ;; esac; done
    for u in unit_fast unit_ftz; do
        "$CC" "${CFLAGS[@]}" -Itests "tests/$u.c" "${LIBOBJS[@]}" -o "$WASM_TESTS/$u.wasm"
    done
    echo "build_wasm: unit tests in $WASM_TESTS"
fi
