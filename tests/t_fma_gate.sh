#!/usr/bin/env bash
# Runs the §1.4 FMA gate over the binary under test, with the allow-list's
# premise checked on the build's objects, and over the int8 unit binary,
# which links the approximate arm D (its FMA is allowed there by name only).
source "$(dirname "$0")/lib.sh"
bash tests/fma_gate.sh "$CIS2" objdump cc "${BUILD:-build}"
if [ -x "${BUILD:-build}/unit_int8" ]; then
    bash tests/fma_gate.sh "${BUILD:-build}/unit_int8" | grep no-fma-in
fi
# ... and over the shared library (its own -fPIC objects).
so=$(ls "${BUILD:-build}"/libcis2.so.[0-9]*.[0-9]*.[0-9]* 2>/dev/null | head -1)
if [ -n "$so" ]; then bash tests/fma_gate.sh "$so" objdump cc "${BUILD:-build}/pic" | grep -v negative-control
else fail fma-gate.shared-lib "no ${BUILD:-build}/libcis2.so.X.Y.Z (make all builds it)"; fi
