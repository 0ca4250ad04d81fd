#!/usr/bin/env bash
# Runs the §1.4 FMA gate over the binary under test, with the allow-list's
# premise checked on the build's objects, and over the int8 unit binary,
# which links the approximate arm D (its FMA is allowed there by name only).
source "$(dirname "$0")/lib.sh"
bash tests/fma_gate.sh "$CIS2" objdump cc "${BUILD:-build}"
if [ -x "${BUILD:-build}/unit_int8" ]; then
    bash tests/fma_gate.sh "${BUILD:-build}/unit_int8" | grep no-fma-in
fi
