#!/usr/bin/env bash
# Runs the §1.4 FMA gate over the binary under test.
source "$(dirname "$0")/lib.sh"
bash tests/fma_gate.sh "$CIS2"
