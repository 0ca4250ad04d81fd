#!/usr/bin/env python3
"""Puts an int8 checkpoint's scale multiply into the §1.3 flush-to-zero window.

  int8_ftz.py ones QDIR
      Sets QDIR's layer-0 q_proj scales to 1.0 and its layer-0 input norm
      weights (F32) to 2^-100, so q_proj's sums are tiny and a scale that puts
      them next to FLT_MIN is a normal number (in place).
  int8_ftz.py place QDIR TRACE
      QDIR is an int8 checkpoint whose layer-0 q_proj scales are all 1.0, and
      TRACE a `cis2 trace` of it: p0.L0.q_proj there is each row's exact sum
      acc = dot_seq((float)q, x) at position 0. For every row with 0 < |acc| < 1
      this picks the f32 scale s (a normal number) whose exact product |acc| * s
      lies in [FLT_MIN - 2^-151, FLT_MIN): x86-64's FTZ (tininess after
      rounding) gives FLT_MIN there, a plain flush-before-rounding gives 0 —
      the window where aarch64 needs fparith.h's exact product forms
      (docs/conformance.md). Rewrites QDIR's scales in place and prints the
      rows it placed; exit 1 when none could be placed (the fixture would not
      test the window). Pure Python (fractions), no numpy.
"""
import json, struct, sys
from fractions import Fraction

NAME = "model.layers.0.self_attn.q_proj"
FLT_MIN = Fraction(2) ** -126
LO = FLT_MIN - Fraction(2) ** -151


def header(buf):
    (n,) = struct.unpack("<Q", buf[:8])
    return json.loads(buf[8:8 + n]), 8 + n


def f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def main(qdir, trace):
    tb = open(trace, "rb").read()
    th, t0 = header(tb)
    a, b = th["p0.L0.q_proj"]["data_offsets"]
    acc = struct.unpack("<%df" % ((b - a) // 4), tb[t0 + a:t0 + b])
    p = qdir + "/model.safetensors"
    mb = bytearray(open(p, "rb").read())
    mh, m0 = header(mb)
    sa, sb = mh[NAME + ".weight_scale"]["data_offsets"]
    rows = (sb - sa) // 4
    placed = []
    for r in range(min(rows, len(acc))):
        x = abs(Fraction(acc[r]))
        if x == 0 or x >= 1:
            continue
        s = bits(float(FLT_MIN / x))  # near the right scale; then walk to the window
        for cand in range(s - 4, s + 5):
            v = Fraction(f32(cand))
            if v >= FLT_MIN and LO <= x * v < FLT_MIN:  # a normal scale, product in the window
                struct.pack_into("<f", mb, m0 + sa + 4 * r, f32(cand))
                placed.append(r)
                break
    open(p, "wb").write(mb)
    print("rows in the FTZ window: %s" % ",".join(map(str, placed)))
    return 0 if placed else 1


def ones(qdir):
    p = qdir + "/model.safetensors"
    mb = bytearray(open(p, "rb").read())
    mh, m0 = header(mb)
    sa, sb = mh[NAME + ".weight_scale"]["data_offsets"]
    mb[m0 + sa:m0 + sb] = struct.pack("<f", 1.0) * ((sb - sa) // 4)
    na, nb = mh["model.layers.0.input_layernorm.weight"]["data_offsets"]
    assert mh["model.layers.0.input_layernorm.weight"]["dtype"] == "F32"
    mb[m0 + na:m0 + nb] = struct.pack("<f", 2.0 ** -100) * ((nb - na) // 4)
    open(p, "wb").write(mb)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "ones":
        sys.exit(ones(sys.argv[2]))
    sys.exit(main(sys.argv[2], sys.argv[3]))
