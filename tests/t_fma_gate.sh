#!/usr/bin/env bash
# Runs the §1.4 FMA gate over the binary under test.
source "$(dirname "$0")/lib.sh"
bash tests/fma_gate.sh "$CIS2"
# ... and over the shared library (its own -fPIC objects).
so=$(ls "${BUILD:-build}"/libcis2.so.[0-9]*.[0-9]*.[0-9]* 2>/dev/null | head -1)
if [ -n "$so" ]; then bash tests/fma_gate.sh "$so" | grep -v negative-control
else fail fma-gate.shared-lib "no ${BUILD:-build}/libcis2.so.X.Y.Z (make all builds it)"; fi
