#!/usr/bin/env python3
"""Writes cis2's op-level conformance vectors (tests/vectors/*.txt), seeded.

    python3 tools/gen_vectors.py [--out DIR] [--cis2 CMD] [--oracle PATH] [--check]

* The .txt inputs come from this file alone: hand-picked spec examples and edge
  values, plus random inputs from random.Random(seed) with a fixed seed per
  vector, so rerunning writes byte-identical files.
* --cis2 CMD: compute every vector with `CMD op OP < NAME.txt` (the project's
  scalar kernels) and write NAME.expected from its output.
* --oracle PATH: also run `PATH OP < NAME.txt` (the independent Python oracle,
  ../shared/tools/oracle_candidate.py) and require identical out_bits; any
  disagreement is printed and makes the run fail (no .expected is written for
  that vector).
* --check: write nothing; verify the .txt files in DIR are exactly what this
  generator produces (and, with --cis2, that each .expected matches).

No vector's output is a NaN: the spec says "return NaN" without pinning the
bits, and NaN payloads differ across ISAs and languages. Sin/cos inputs stay
finite (6.3 is defined for finite x).

Stdlib only. See tests/vectors/README.md.
"""
import argparse, hashlib, math, os, random, shlex, struct, subprocess, sys

# ------------------------------------------------------------------ helpers
def fb(x):
    """binary32 bit pattern of the f32 nearest to x (RNE; overflow -> inf)."""
    try:
        return struct.unpack('<I', struct.pack('<f', x))[0]
    except OverflowError:
        return 0xFF800000 if x < 0 else 0x7F800000

def b2f(b): return struct.unpack('<f', struct.pack('<I', b))[0]

def hexl(bits): return ','.join('0x%08X' % b for b in bits)

def fl(xs): return [fb(x) for x in xs]

def uni(rng, lo, hi, n): return [fb(rng.uniform(lo, hi)) for _ in range(n)]

def gauss(rng, sigma, n): return [fb(rng.gauss(0.0, sigma)) for _ in range(n)]

EPS = 0x3727C5AC          # §2.3 EPS_F32
THETA_1E4, THETA_1E5, THETA_1E6 = fb(1e4), fb(1e5), fb(1e6)
MIN_NORMAL, MIN_SUB, MAX_SUB, FLT_MAX = 0x00800000, 0x00000001, 0x007FFFFF, 0x7F7FFFFF
PINF, NINF, QNAN, NZERO = 0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000

def neighbours(b):
    """b-1, b, b+1 as bit patterns (same sign: the float neighbours)."""
    return [b - 1, b, b + 1]

VECTORS = []   # (name, op, spec_ref, comment, [(key, value_str)])

def vec(name, op, spec, comment, **fields):
    items = []
    for k, v in fields.items():
        if k.endswith('_bits'): v = hexl(v)
        elif isinstance(v, (list, tuple)): v = ','.join(str(i) for i in v)
        items.append((k, str(v)))
    VECTORS.append((name, op, spec, comment, items))

def elem(name, op, spec, comment, xs):
    vec(name, op, spec, comment, n=len(xs), x_bits=xs)

# ------------------------------------------------------------ the vectors
def build():
    # §5.1 / §5.2: the cancellation example, and the §1.3 denormal rows.
    vec('dot_seq_cancellation', 'dot_seq', '5.1',
        '[1e8, 1, -1e8] . [1, 1, 1] must be exactly +0.0 (left-to-right order)',
        n=3, a_bits=fl([1e8, 1.0, -1e8]), b_bits=fl([1.0, 1.0, 1.0]))
    vec('dot_seq_ftz_rows', 'dot_seq', '1.3, 5.1',
        'the 1.3 rows as operands: MIN_NORMAL*1e-10 flushes to +0; a subnormal*1 reads as 0',
        n=3, a_bits=[MIN_NORMAL, MIN_SUB, MAX_SUB], b_bits=[fb(1e-10), fb(1.0), fb(1.0)])
    vec('dot_seq_overflow', 'dot_seq', '5.1', 'a product overflows to +inf and stays inf',
        n=3, a_bits=fl([1e30, 1.0, -5.0]), b_bits=fl([1e30, 2.0, 3.0]))
    rng = random.Random(5101)
    vec('dot_seq_rand64', 'dot_seq', '5.1', 'random n=64 (seed 5101)', n=64,
        a_bits=gauss(rng, 1.0, 64), b_bits=gauss(rng, 1.0, 64))
    rng = random.Random(5102)
    vec('dot_seq_rand576', 'dot_seq', '5.1', 'random n=576, mixed magnitudes (seed 5102)', n=576,
        a_bits=[fb(rng.gauss(0, 1) * 10 ** rng.uniform(-3, 3)) for _ in range(576)],
        b_bits=gauss(rng, 0.05, 576))

    vec('matvec_cancellation', 'matvec', '5.1, 5.2',
        'row 0 is the 5.1 example (must give +0.0); rows 1-2 small exact values',
        out_features=3, in_features=3,
        w_bits=fl([1e8, 1.0, -1e8, 1.0, 2.0, 3.0, 0.5, 0.25, 0.125]), x_bits=fl([1, 1, 1]))
    rng = random.Random(5201)
    vec('matvec_rand_16x64', 'matvec', '5.2', 'random 16x64 (seed 5201)', out_features=16,
        in_features=64, w_bits=gauss(rng, 0.1, 16 * 64), x_bits=gauss(rng, 1.0, 64))
    rng = random.Random(5202)
    vec('matvec_rand_48x576', 'matvec', '5.2', 'realistic row length: 48 rows of hidden=576 (seed 5202)',
        out_features=48, in_features=576, w_bits=gauss(rng, 0.04, 48 * 576), x_bits=gauss(rng, 1.0, 576))
    vec('matvec_denormal_weights', 'matvec', '1.3, 5.2',
        'subnormal weights and inputs read as zero (DAZ)', out_features=2, in_features=3,
        w_bits=[MIN_SUB, fb(1.0), MAX_SUB, fb(2.0), 0x80000005, fb(-1.0)],
        x_bits=[fb(1e30), fb(0.5), MIN_SUB])

    # §6.1 rsqrt
    elem('rsqrt_spec', 'rsqrt', '6.1', 'rsqrt(64)=0x3E000000 first; small exact and inexact values',
         fl([64.0, 1.0, 4.0, 0.25, 2.0, 3.0, 576.0, 8.0, 100.0, 1e-5]) + [EPS])
    elem('rsqrt_edges', 'rsqrt', '1.3, 6.1', '+0 -> +inf, -0 -> -inf, subnormal -> +inf (DAZ), inf -> 0, extremes',
         [0, NZERO, MIN_SUB, MAX_SUB, PINF, FLT_MAX, MIN_NORMAL, fb(1e-38), fb(1e38)])
    rng = random.Random(6101)
    elem('rsqrt_rand', 'rsqrt', '6.1', 'random positive values over many binades (seed 6101)',
         [fb(10 ** rng.uniform(-30, 30)) for _ in range(48)])

    # §6.2 exp
    elem('exp_edges', 'exp_pinned', '6.2',
         'clamps at +-88 and just past, +-inf, zeros, subnormal, near-overflow k=127',
         [fb(88.0), fb(88.0) + 1, fb(-88.0), fb(-88.0) + 1, fb(87.99), fb(-87.99), fb(88.5), fb(-88.5),
          fb(88.72), PINF, NINF, 0, NZERO, MIN_SUB, 0x80000001, fb(1e30), fb(-1e30),
          fb(88.0) - 1, fb(-88.0) - 1])
    elem('exp_public_points', 'exp_pinned', '6.2', 'the public suite\'s exp_pinned_v1 points',
         fl([-40.0, -10.0, -1.0, 0.0, 0.5, 1.0, 10.0, 40.0]))
    rng = random.Random(6201)
    elem('exp_rand_softmax_domain', 'exp_pinned', '6.2', 'random x in [-88, 0] (softmax arguments, seed 6201)',
         uni(rng, -88.0, 0.0, 64))
    rng = random.Random(6202)
    elem('exp_rand_wide', 'exp_pinned', '6.2', 'random x in [-88, 88] (seed 6202)', uni(rng, -88.0, 88.0, 64))
    elem('exp_ln2_multiples', 'exp_pinned', '6.2', 'x near k*ln2 and k*ln2 +- ln2/2 (range-reduction edges)',
         [fb(k * math.log(2) + d) for k in (-126, -64, -1, 1, 2, 64, 126) for d in (0.0, 0.34657359, -0.34657359)])

    # §6.5 ln
    elem('ln_theta', 'ln_pinned', '6.5, 7.1', 'rope_theta values and their reciprocals',
         fl([1e4, 1e5, 1e6, 5e5, 1e7, 1e-4, 1e-5, 1e-6, 2e-6]))
    elem('ln_edges', 'ln_pinned', '6.5',
         'tiny/huge, sqrt(0.5) boundary neighbours, 1, 2, zeros (-> -inf), subnormal (-> -inf)',
         [MIN_NORMAL, fb(1e-30), fb(1e30), FLT_MAX] + neighbours(0x3F3504F3) +
         fl([1.0, 2.0, 0.5, 0.999, 1.5, 10.0]) + [0, NZERO, MIN_SUB])
    rng = random.Random(6501)
    elem('ln_rand', 'ln_pinned', '6.5', 'random positive values over many binades (seed 6501)',
         [fb(10 ** rng.uniform(-37, 38)) for _ in range(64)])

    # §6.3 sin / cos
    quad = []
    for k in range(-4, 9):
        quad += neighbours(fb(k * math.pi / 2)) if k else [0, NZERO]
    quart = []
    for k in (1, 3, 5, 7, -1, -3):
        quart += neighbours(fb(k * math.pi / 4))
    large = fl([100.0, 1000.0, 4095.5, 8191.0, 8191.99, 8192.0, -8192.0, 5000.123, 6434.0, 7853.98])
    for op, tag in (('sin_pinned', 'sin'), ('cos_pinned', 'cos')):
        elem(tag + '_quadrants', op, '6.3', 'multiples of pi/2 and their f32 neighbours, +-0', quad)
        elem(tag + '_octant_edges', op, '6.3', 'odd multiples of pi/4 (reduction switches quadrant there)', quart)
        elem(tag + '_large', op, '6.3', 'large angles up to the RoPE bound 8192, subnormal', large + [MIN_SUB, MAX_SUB])
        rng = random.Random(6301 if tag == 'sin' else 6302)
        elem(tag + '_rand', op, '6.3', 'random angles in [-8192, 8192] (seed %d)' % (6301 if tag == 'sin' else 6302),
             uni(rng, -8192.0, 8192.0, 64))

    # §6.4 silu
    elem('silu_edges', 'silu', '6.4', 'x at -88 and just past, very negative (-> -0), x >= 64 (-> x), zeros, subnormal',
         [fb(-88.0), fb(-88.0) + 1, fb(-88.0) - 1, fb(-87.5), fb(-89.0), fb(-100.0), fb(-1e30),
          fb(64.0), fb(64.5), fb(88.0), fb(88.5), fb(100.0), fb(1e10), FLT_MAX, PINF,
          0, NZERO, MIN_SUB, fb(1.0), fb(-1.0)])
    rng = random.Random(6401)
    elem('silu_rand', 'silu', '6.4', 'random gate values in [-20, 20] (seed 6401)', uni(rng, -20.0, 20.0, 64))

    # §8 rmsnorm
    vec('rmsnorm_public_n8', 'rmsnorm', '8', 'n=8 halves/quarters, pinned eps (the public rmsnorm_v1 shape)',
        n=8, eps_bits=[EPS], x_bits=fl([0.5, -1.0, 1.5, -2.0, 0.25, 3.0, -0.75, 1.0]),
        gamma_bits=fl([1.0, 0.5, 2.0, 1.0, -1.0, 0.25, 1.5, 1.0]))
    rng = random.Random(8001)
    vec('rmsnorm_hidden576', 'rmsnorm', '8', 'realistic hidden=576, random (seed 8001)', n=576, eps_bits=[EPS],
        x_bits=gauss(rng, 1.0, 576), gamma_bits=[fb(rng.uniform(0.0, 2.0)) for _ in range(576)])
    vec('rmsnorm_zeros', 'rmsnorm', '8', 'all-zero input: mean=0, inv=rsqrt(eps), outputs +-0', n=4, eps_bits=[EPS],
        x_bits=[0, NZERO, 0, 0], gamma_bits=fl([1.0, 1.0, -1.0, 2.0]))
    vec('rmsnorm_denormal', 'rmsnorm', '1.3, 8', 'subnormal inputs and gains read as zero', n=6, eps_bits=[EPS],
        x_bits=[MIN_SUB, fb(1.0), MAX_SUB, fb(-2.0), 0x80000003, fb(0.5)],
        gamma_bits=[fb(1.0), MIN_SUB, fb(1.0), fb(1.0), fb(1.0), 0x807FFFFF])
    rng = random.Random(8002)
    vec('rmsnorm_big_small', 'rmsnorm', '8', 'large (sum of squares overflows) and tiny magnitudes (seed 8002)',
        n=16, eps_bits=[EPS], x_bits=[fb(rng.uniform(-1, 1) * 1e20) for _ in range(16)],
        gamma_bits=gauss(rng, 1.0, 16))
    vec('rmsnorm_n1', 'rmsnorm', '8', 'n=1, other eps', n=1, eps_bits=[fb(1e-6)], x_bits=[fb(3.0)],
        gamma_bits=[fb(0.7)])

    # §9.3 softmax
    vec('softmax_tie', 'softmax', '9.3, 11.2', 'two equal maxima (first wins, same values either way)', n=4,
        scores_bits=fl([1.0, 3.0, 3.0, 2.0]))
    vec('softmax_signed_zero_tie', 'softmax', '9.3', '-0 and +0 tie for the max; the first (-0) is kept', n=3,
        scores_bits=[NZERO, 0, fb(-1.0)])
    vec('softmax_single', 'softmax', '9.3', 'one score gives exactly 1', n=1, scores_bits=[fb(-123.25)])
    vec('softmax_uniform', 'softmax', '9.3', 'all equal: 1/n each', n=20, scores_bits=[fb(0.7)] * 20)
    vec('softmax_wide_range', 'softmax', '9.3', 'differences past -88 underflow to 0; subnormal scores read as 0', n=6,
        scores_bits=[fb(10.0), fb(-80.0), fb(-1e30), MIN_SUB, fb(9.5), fb(-78.0)])
    rng = random.Random(9301)
    vec('softmax_rand20', 'softmax', '9.3', 'random n=20 (seed 9301)', n=20, scores_bits=gauss(rng, 3.0, 20))

    # §9.2-§9.4 attention block
    vec('attention_public_shape', 'attention_block', '9.2-9.4', 'head_dim=8, seq_len=3, small exact values',
        head_dim=8, seq_len=3, q_head_bits=fl([0.5, -1.0, 0.25, 1.0, 0.0, 2.0, -0.5, 1.5]),
        k_bits=fl([1, 0, 0, 1, 0.5, -0.5, 1, 0, 0.25, 1, -1, 0.5, 0, 1, 0.5, -1, -1, 0.5, 2, 0, 1, -0.25, 0, 1]),
        v_bits=fl([1, 2, 3, 4, 5, 6, 7, 8, -1, 0.5, 0, 1, 2, -2, 0.25, 3, 0.5, 0.5, -1, 2, 1, 0, -3, 0.125]))
    for sl, seed in ((1, 9201), (7, 9202), (20, 9203)):
        rng = random.Random(seed)
        vec('attention_hd64_len%d' % sl, 'attention_block', '9.2-9.4',
            'head_dim=64, seq_len=%d, random (seed %d)' % (sl, seed), head_dim=64, seq_len=sl,
            q_head_bits=gauss(rng, 1.0, 64), k_bits=gauss(rng, 1.0, 64 * sl), v_bits=gauss(rng, 1.0, 64 * sl))
    rng = random.Random(9204)
    krow = gauss(rng, 1.0, 64)
    vec('attention_tied_scores', 'attention_block', '9.2-9.4',
        'identical key rows: equal scores (softmax tie), head_dim=64, seq_len=5 (seed 9204)',
        head_dim=64, seq_len=5, q_head_bits=gauss(rng, 1.0, 64), k_bits=krow * 5, v_bits=gauss(rng, 1.0, 320))

    # §7 RoPE
    vec('rope_table_public', 'rope_table', '7.1-7.3', 'head_dim=8, theta=1e4, positions 0,3 (public rope_v1 shape)',
        head_dim=8, rope_theta_bits=[THETA_1E4], positions=[0, 3])
    vec('rope_table_smollm2', 'rope_table', '7.1-7.3',
        'SmolLM2-135M: head_dim=64, theta=1e5, the 20 decode positions; inv_freq digest must be 7.2\'s',
        head_dim=64, rope_theta_bits=[THETA_1E5], positions=list(range(20)))
    vec('rope_table_qwen_far', 'rope_table', '7.1-7.3', 'head_dim=64, theta=1e6, far positions up to 8191',
        head_dim=64, rope_theta_bits=[THETA_1E6], positions=[1, 19, 100, 1000, 4095, 8000, 8191])
    vec('rope_table_hd128', 'rope_table', '7.1-7.3', 'head_dim=128, theta=5e5', head_dim=128,
        rope_theta_bits=[fb(5e5)], positions=[7, 511, 2048])
    vec('rope_table_hd2', 'rope_table', '7.1-7.3', 'head_dim=2: one frequency, inv_freq[0]=1', head_dim=2,
        rope_theta_bits=[THETA_1E5], positions=[0, 1, 2, 3, 4, 5, 6, 7, 8191])
    rng = random.Random(7401)
    vec('rope_rotate_q_pos19', 'rope_rotate', '7.1-7.4', 'SmolLM2 q: 9 heads x 64 at pos 19, theta=1e5 (seed 7401)',
        head_dim=64, rope_theta_bits=[THETA_1E5], pos=19, x_bits=gauss(rng, 1.0, 576))
    rng = random.Random(7402)
    vec('rope_rotate_k_pos8191', 'rope_rotate', '7.1-7.4', 'k: 3 heads x 64 at pos 8191, theta=1e5 (seed 7402)',
        head_dim=64, rope_theta_bits=[THETA_1E5], pos=8191, x_bits=gauss(rng, 1.0, 192))
    vec('rope_rotate_pos0', 'rope_rotate', '7.4', 'pos 0: cos=1, sin=0; -0 inputs become +0', head_dim=8,
        rope_theta_bits=[THETA_1E4], pos=0, x_bits=[NZERO, fb(1.0), fb(-2.0), NZERO, fb(0.5), NZERO, fb(3.0), fb(-1.0)])
    vec('rope_rotate_public', 'rope_rotate', '7.1-7.4', 'head_dim=8, theta=1e4, pos 3, one head', head_dim=8,
        rope_theta_bits=[THETA_1E4], pos=3, x_bits=fl([1, 2, 3, 4, 5, 6, 7, 8]))

    # embedding lookup (a row copy: bits pass through untouched)
    rng = random.Random(2501)
    vec('embed_lookup_hidden576', 'embed_lookup', '2.5, 4', 'vocab=8, hidden=576, repeated ids (seed 2501)',
        vocab=8, hidden=576, embed_bits=gauss(rng, 0.02, 8 * 576), token_ids=[3, 0, 7, 3, 1])
    vec('embed_lookup_special_bits', 'embed_lookup', '2.5, 4',
        'rows holding subnormal, -0, inf: copied bit for bit (no DAZ without arithmetic)', vocab=3, hidden=4,
        embed_bits=[MIN_SUB, NZERO, PINF, NINF, fb(1.0), fb(2.0), fb(3.0), fb(4.0), 0x807FFFFF, FLT_MAX, MIN_NORMAL, 0],
        token_ids=[0, 2, 1, 0])

    ftz_window()


def ftz_window():
    """§1.3 on every ISA: an exact result in [FLT_MIN - 2^-151, FLT_MIN) is
    FLT_MIN on x86-64 (tiny after rounding: no) and +0 under aarch64's FPCR.FZ
    alone (tiny before rounding). docs/conformance.md, "gap in §1.3/§13.2"."""
    def inv(base, off):  # the float `off` ulps from FLT_MIN / base: products straddle FLT_MIN
        return fb(2.0 ** -126 / b2f(base)) + off
    vec('dot_seq_ftz_window_min', 'dot_seq', '1.3, 5.1',
        'the smallest reproducer: 0x3F7FFFFE * 0x00800001 = FLT_MIN*(1-2^-46) -> FLT_MIN (x86-64), never +0',
        n=1, a_bits=[0x3F7FFFFE], b_bits=[0x00800001])
    b = [MIN_NORMAL + 3 * i + 1 for i in range(16)]
    vec('dot_seq_ftz_window', 'dot_seq', '1.3, 5.1',
        'products a few ulps either side of FLT_MIN, some in the flush window; the sum keeps each one',
        n=16, a_bits=[inv(b[i], i % 5 - 2) ^ (0x80000000 if i % 3 == 0 else 0) for i in range(16)], b_bits=b)
    base = [MIN_NORMAL + (k * 7919) % 0x7FFFFF for k in range(8)]
    vec('matvec_ftz_window', 'matvec', '1.3, 5.2',
        'weights just above FLT_MIN times inputs near FLT_MIN/weight: products straddle the flush window',
        out_features=5, in_features=8,
        w_bits=[(base[k] + r % 3) ^ (0x80000000 if (r + k) % 5 == 0 else 0) for r in range(5) for k in range(8)],
        x_bits=[inv(base[k], k % 5 - 2) for k in range(8)])
    m = [42, 42, 42, 41, 43, 42, 42, 42, 42, 42, 42, 41, 42, 43, 42]
    vec('rmsnorm_ftz_window', 'rmsnorm', '1.3, 8',
        'x = (4, +-FLT_MIN*(1+m*2^-23)): the tiny squares flush, inv = rsqrt(1+eps), and x*inv lands in the '
        'flush window for m = 42 (tools/make_model.py --ftz-window does this in a model)',
        n=16, eps_bits=[EPS],
        x_bits=[fb(4.0)] + [(MIN_NORMAL + mm) ^ (0x80000000 if i % 3 == 0 else 0) for i, mm in enumerate(m)],
        gamma_bits=[fb(1.0)] * 12 + [0x3F7FFFFE, 0x3F800001, fb(2.0), fb(1.0)])
    q, k = [fb(-246.0)] + [0] * 7, [fb(1.0)] + [0] * 15
    vec('attention_ftz_window_p', 'attention_block', '9.2-9.4',
        'scores (-246*rsqrt(8), 0): p0 = 0x00B7E897, a probability just above FLT_MIN (v0 = 1, v1 = 0 show it)',
        head_dim=8, seq_len=2, q_head_bits=q, k_bits=k, v_bits=[fb(1.0)] * 8 + [0] * 8)
    vec('attention_ftz_window', 'attention_block', '1.3, 9.2-9.4',
        'the V-mix of attention_ftz_window_p with v0 near FLT_MIN/p0: p0*v0 straddles the flush window',
        head_dim=8, seq_len=2, q_head_bits=q, k_bits=k,
        v_bits=[inv(0x00B7E897, d - 3) ^ (0x80000000 if d % 3 == 1 else 0) for d in range(8)] + [0] * 8)


# -------------------------------------------------------------- writing
def txt_text(name, op, spec, comment, items):
    lines = ['# %s: %s' % (name, comment),
             '# generated by tools/gen_vectors.py; spec section(s) %s of CIS-2 v0.3b' % spec,
             'op=%s' % op, 'spec_ref=%s' % spec]
    lines += ['%s=%s' % kv for kv in items]
    return '\n'.join(lines) + '\n'

def run_candidate(cmd, op, text):
    p = subprocess.run(cmd + [op], input=text.encode(), capture_output=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError('%s exited %d: %s' % (' '.join(cmd + [op]), p.returncode, p.stderr.decode()[:300]))
    kv = {}
    for line in p.stdout.decode().splitlines():
        if '=' in line:
            k, v = line.split('=', 1); kv[k] = v
    bits = [int(t, 16) for t in kv['out_bits'].split(',')]
    h = hashlib.sha256(b''.join(struct.pack('<I', b) for b in bits)).hexdigest()
    if h != kv['out_sha256']:
        raise RuntimeError('%s: out_bits do not hash to out_sha256' % ' '.join(cmd))
    return bits, kv['out_sha256']

def expected_text(name, op, items, bits, sha):
    lines = ['# %s: computed by `cis2 op %s` (scalar reference kernels),' % (name, op),
             '# cross-checked bit for bit against ../shared/tools/oracle_candidate.py',
             'out_bits=' + hexl(bits), 'out_sha256=' + sha]
    if op == 'rope_table':   # §7.2 digest over the inv_freq prefix
        half = int(dict(items)['head_dim']) // 2
        lines.append('inv_freq_table_digest=' +
                     hashlib.sha256(b''.join(struct.pack('<I', b) for b in bits[:half])).hexdigest())
    return '\n'.join(lines) + '\n'

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'vectors'))
    ap.add_argument('--cis2', help='command for the project binary, e.g. ./cis2')
    ap.add_argument('--oracle', help='path to oracle_candidate.py')
    ap.add_argument('--check', action='store_true', help='verify files instead of writing them')
    a = ap.parse_args()
    build()
    names = [v[0] for v in VECTORS]
    assert len(names) == len(set(names)), 'duplicate vector names'
    os.makedirs(a.out, exist_ok=True)
    cis2 = shlex.split(a.cis2) + ['op'] if a.cis2 else None
    bad = 0
    for name, op, spec, comment, items in VECTORS:
        text = txt_text(name, op, spec, comment, items)
        tpath = os.path.join(a.out, name + '.txt')
        if a.check:
            if not os.path.exists(tpath) or open(tpath).read() != text:
                print('DIFFERS %s.txt' % name); bad += 1
        else:
            with open(tpath, 'w') as f: f.write(text)
        if not cis2: continue
        bits, sha = run_candidate(cis2, op, text)
        if a.oracle:
            obits, osha = run_candidate([sys.executable, a.oracle], op, text)
            if obits != bits:
                i = next((i for i in range(min(len(bits), len(obits))) if bits[i] != obits[i]), min(len(bits), len(obits)))
                print('DISAGREE %s (%s): index %d: cis2 %s oracle %s' % (
                    name, op, i, '0x%08X' % bits[i] if i < len(bits) else '-',
                    '0x%08X' % obits[i] if i < len(obits) else '-'))
                bad += 1
                continue
        etext = expected_text(name, op, items, bits, sha)
        epath = os.path.join(a.out, name + '.expected')
        if a.check:
            if not os.path.exists(epath) or open(epath).read() != etext:
                print('DIFFERS %s.expected' % name); bad += 1
        else:
            with open(epath, 'w') as f: f.write(etext)
    print('%d vector(s), %d problem(s)' % (len(VECTORS), bad))
    return 1 if bad else 0

if __name__ == '__main__':
    sys.exit(main())
