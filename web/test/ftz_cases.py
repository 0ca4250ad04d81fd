"""Operand pairs for web/test/ftz_diff.sh: the §1.3 rows, random mixes of
zeros/subnormals/normals/specials, and results right at the flush edge
(products, quotients and narrowings whose exact value is within a few ulps
of FLT_MIN, on both sides of x86's "tininess after rounding" threshold
FLT_MIN - 2^-151). Lines: "OP A B" in hex, deterministic (seeded)."""
import random, struct, sys

def f2u(f): return struct.unpack('<I', struct.pack('<f', f))[0]
def u2f(u): return struct.unpack('<f', struct.pack('<I', u))[0]
def d2u(d): return struct.unpack('<Q', struct.pack('<d', d))[0]
rng = random.Random(20261202)
out = []
def add(op, a, b): out.append(f"{op} {a & 0xFFFFFFFF:08x} {b & 0xFFFFFFFF:08x}")

rows = [(2, 0x20000000, 0x1F800000), (2, 0x33800000, 0x0C000000), (0, 0x00800001, 0x80800000), (0, 1, 0),
        (2, 1, 0x3F800000), (2, 1, 0x7F000000), (2, 0x00800000, 0x3F000000), (2, 0x00800000, 0x2EDBE6FF)]
for r in rows: add(*r)

def rnd_bits():
    k = rng.randrange(6)
    s = rng.randrange(2) << 31
    if k == 0: return s | rng.randrange(1, 0x800000)                    # subnormal
    if k == 1: return s | (rng.randrange(1, 30) << 23) | rng.randrange(0x800000)   # tiny normal
    if k == 2: return s | (rng.randrange(100, 160) << 23) | rng.randrange(0x800000) # ordinary
    if k == 3: return s | rng.choice([0, 0x00800000, 0x007FFFFF, 0x7F800000, 0x7F7FFFFF, 0x3F800000])
    if k == 4: return s | (rng.randrange(200, 254) << 23) | rng.randrange(0x800000)  # huge
    return s | rng.randrange(0, 0x7F800000)
for _ in range(20000):
    add(rng.randrange(5), rnd_bits(), rnd_bits())

FLT_MIN = 2.0 ** -126
for _ in range(20000):
    # a product a*b within a few ulps of +-FLT_MIN: pick a, set b ~ FLT_MIN/a, jiggle b.
    ea = rng.randrange(-60, 60)
    a = u2f(((ea + 127) << 23) | rng.randrange(0x800000))
    b0 = f2u(FLT_MIN / a)
    b = b0 + rng.randrange(-3, 4)
    s = rng.randrange(2) << 31
    add(2, f2u(a) | s, b)
    # a quotient a/b near FLT_MIN: a ~ FLT_MIN*b.
    eb = rng.randrange(-60, 60)
    bq = u2f(((eb + 127) << 23) | rng.randrange(0x800000))
    aq = f2u(FLT_MIN * bq * (1 + rng.uniform(-2.5e-7, 2.5e-7)))   # rounds: quotients fall between the grid points
    add(3, aq | s, f2u(bq))
    # a binary64 within a few float-ulps of FLT_MIN, narrowed.
    d = FLT_MIN * (1 + rng.randrange(-2**31, 2**31) * 2.0 ** -54)
    u = d2u(-d if s else d)
    add(5, u >> 32, u & 0xFFFFFFFF)
    # sums landing near FLT_MIN.
    x = f2u(FLT_MIN) + rng.randrange(0, 1 << 20)
    y = (0x80000000 | (x - rng.randrange(-4, 1 << 20))) & 0xFFFFFFFF
    add(0, x, y)
sys.stdout.write("\n".join(out) + "\n")
