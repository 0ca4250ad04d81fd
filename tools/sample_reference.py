#!/usr/bin/env python3
"""An independent reading of docs/sampling.md: the sampler written from that
page alone (and spec §6.2's pinned exp), in numpy binary32, one operation at
a time with §1.3's DAZ/FTZ applied to every operand and result.

It reads the logits a `cis2 trace` file holds (docs/divergence.md: a
safetensors file; step t of a run with an n-token prompt is the tensor
p{n-1+t}.logits) and prints the id the sampler picks at each step, comma-
separated, as `cis2 run` prints generated_token_ids=.

    python3 tools/sample_reference.py TRACE --n-prompt N --temperature T
        [--top-k K] [--top-p P] [--min-p M] --seed S [--steps N]

With --receipt R (a CIS-2-RECEIPT v1+sampling file) it verifies R instead, as a peer would:
the prompt ids, sampler and seed come from R, TRACE must be R's run (its prompt ids, then R's
generated ids but the last teacher-forced), and it prints MATCH/MISMATCH for
generated-token-ids (the ids this sampler picks), argmax-digest (spec §12.2) and
witness-digest (§12.1 with docs/sampling.md §5's sampler record), exit 0 when all match.
The five artifact digests are taken from R as they are: that they are the model's files'
is sha256sum's to check.

    python3 tools/sample_reference.py TRACE --receipt R

tests/t_sampling.sh runs it against cis2 for several seeds and parameters.

    python3 tools/sample_reference.py TRACE --n-prompt N --logprobs K --ids ID,ID,...

prints docs/sampling.md §9's log-probabilities instead (spec §6.5's pinned ln
written out too): per step, the chosen id's and the top K ids' values as
binary32 bit patterns (tests/t_serve_sampling.sh, tests/t_python.py).
"""
import argparse
import hashlib
import json
import struct
import sys

import numpy as np

F = np.float32
FLT_MIN = F(np.finfo(np.float32).tiny)


def f32(bits):
    return np.frombuffer(struct.pack("<I", bits), dtype=np.float32)[0]


def ftz(x):
    """DAZ/FTZ (spec §1.3): a subnormal is a zero of its sign."""
    x = F(x)
    if x != 0 and abs(x) < FLT_MIN:
        return F(-0.0) if np.signbit(x) else F(0.0)
    return x


def add(a, b):
    with np.errstate(all="ignore"):
        return ftz(F(ftz(a)) + F(ftz(b)))


def sub(a, b):
    with np.errstate(all="ignore"):
        return ftz(F(ftz(a)) - F(ftz(b)))


def mul(a, b):
    with np.errstate(all="ignore"):
        return ftz(F(ftz(a)) * F(ftz(b)))


def div(a, b):
    with np.errstate(all="ignore"):
        return ftz(F(ftz(a)) / F(ftz(b)))


# spec §6.2: the pinned exp
EXP_LOG2E = f32(0x3FB8AA3B)
EXP_C1 = f32(0x3F318000)
EXP_C2 = f32(0xB95E8083)
EXP_P = [f32(b) for b in (0x39506967, 0x3AB743CE, 0x3C088908, 0x3D2AA9C1, 0x3E2AAAAA, 0x3F000000)]


def ldexp_exact(x, k):
    """§6.2.1: replace the exponent field."""
    if x == 0:
        return x
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    e = ((bits >> 23) & 0xFF) + k
    if e <= 0:
        return F(0.0)
    if e >= 0xFF:
        return F(-np.inf) if bits >> 31 else F(np.inf)
    return f32((bits & ~(0xFF << 23) & 0xFFFFFFFF) | (e << 23))


def exp_pinned(x):
    x = ftz(x)
    if np.isnan(x):
        return x
    if x > F(88.0):
        return F(np.inf)
    if x < F(-88.0):
        return F(0.0)
    t = mul(x, EXP_LOG2E)
    z0 = add(t, F(0.5))
    k = F(np.floor(z0))
    r0 = sub(x, mul(k, EXP_C1))
    r = sub(r0, mul(k, EXP_C2))
    r2 = mul(r, r)
    poly = EXP_P[0]
    for i in range(1, 6):
        poly = add(mul(poly, r), EXP_P[i])
    m1 = mul(poly, r2)
    result = add(add(m1, r), F(1.0))
    return ldexp_exact(result, int(k))


LOG_SQRTHF = f32(0x3F3504F3)
LOG_Q1 = f32(0xB95E8083)
LOG_Q2 = f32(0x3F318000)
LOG_P = [f32(b) for b in (0x3D9021BB, 0xBDEBD1B8, 0x3DEF251B, 0xBDFE5D4F, 0x3E11E9BF,
                          0xBE2AAE50, 0x3E4CCEAD, 0xBE7FFFFC, 0x3EAAAAAA)]


def ln_pinned(x):
    """spec §6.5 for a finite x >= 1 (what §9 needs: Z >= 1, or a count)."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    e = ((bits >> 23) & 0xFF) - 126
    m = f32((bits & 0x807FFFFF) | (126 << 23))  # frexp: m in [0.5, 1)
    if m < LOG_SQRTHF:
        e -= 1
        m = sub(add(m, m), F(1.0))
    else:
        m = sub(m, F(1.0))
    z = mul(m, m)
    poly = LOG_P[0]
    for i in range(1, 9):
        poly = add(mul(poly, m), LOG_P[i])
    y = mul(mul(poly, m), z)
    fe = F(e)
    y = add(y, mul(fe, LOG_Q1))
    y = sub(y, mul(F(0.5), z))
    return add(add(m, y), mul(fe, LOG_Q2))


def logprobs(logits, k):
    """docs/sampling.md §9: every id's log-probability and the top k ids."""
    lg = [ftz(v) for v in logits]
    ok = [i for i, v in enumerate(lg) if not np.isnan(v)]
    lp = [F(-np.inf)] * len(lg)
    if ok:
        m = max(lg[i] for i in ok)
        if np.isinf(m):
            at = [i for i in ok if lg[i] == m]
            for i in at:
                lp[i] = sub(F(0.0), ln_pinned(F(len(at))))
        else:
            z = F(0.0)
            for i in ok:
                z = add(z, exp_pinned(sub(lg[i], m)))
            lz = ln_pinned(z)
            for i in ok:
                lp[i] = sub(sub(lg[i], m), lz)
    top = sorted(ok, key=lambda i: (-float(lg[i]), i))[:k]
    return lp, top


M64 = (1 << 64) - 1


def splitmix64(seed, step):
    """docs/sampling.md §3: the (step+1)-th SplitMix64 output for `seed`."""
    z = (seed + (step + 1) * 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def uniform(seed, step):
    return F(splitmix64(seed, step) >> 40) * F(2.0**-24)


def pick(logits, T, K, P, M, seed, step):
    """docs/sampling.md §2, literally: every candidate, no shortcut."""
    T, P, M = F(T), F(P), F(M)
    lg = [ftz(v) for v in logits]
    cand = [i for i, v in enumerate(lg) if not np.isnan(v)]
    if not cand:
        return 0
    # §2.2: logit descending, lower id first (-0 == +0: float keys compare equal)
    cand.sort(key=lambda i: (-float(lg[i]), i))
    n = len(cand)
    if 0 < K < n:
        n = K
    s = [div(lg[cand[i]], T) for i in range(n)]
    s0 = s[0]
    if np.isinf(s0):
        w = [F(1.0) if s[i] == s0 else F(0.0) for i in range(n)]
    else:
        w = [exp_pinned(sub(s[i], s0)) for i in range(n)]
    C = []
    acc = None
    for i in range(n):
        acc = w[i] if acc is None else add(acc, w[i])
        C.append(acc)
    if P < F(1.0):
        theta = mul(P, C[n - 1])
        n = next(i for i in range(n) if C[i] >= theta) + 1
    if M > F(0.0):
        mu = mul(M, w[0])
        n = next((i for i in range(1, n) if w[i] < mu), n)
    x = mul(uniform(seed, step), C[n - 1])
    for i in range(n):
        if C[i] > x:
            return cand[i]
    for j in range(n - 1, 0, -1):
        if w[j] > 0:
            return cand[j]
    return cand[0]


def read_trace(path):
    with open(path, "rb") as f:
        data = f.read()
    hl = struct.unpack("<Q", data[:8])[0]
    hdr = json.loads(data[8 : 8 + hl])
    base = 8 + hl
    out = {}
    for name, t in hdr.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[base + a : base + b], dtype="<f4")
    return out


def sample_ids(t, n_prompt, T, K, P, M, seed, steps, path):
    ids = []
    step = 0
    while True:
        name = "p%d.logits" % (n_prompt - 1 + step)
        if name not in t or (steps and step >= steps):
            break
        ids.append(pick(t[name], T, K, P, M, seed, step))
        step += 1
    if not ids:
        sys.exit("sample_reference.py: %s holds no p%d.logits" % (path, n_prompt - 1))
    return ids


RECEIPT_KEYS = [
    "spec-version", "weights-sha256", "config-sha256", "tokenizer-sha256", "prompt-hex",
    "prompt-token-ids", "gen-toks", "dtype", "table-digest", "inv-freq-table-digest",
    "generated-token-ids", "argmax-digest", "witness-digest", "sampler", "seed",
]


def read_receipt(path):
    """docs/sampling.md §6: the v1+sampling form only (a v1 receipt is greedy: no sampler)."""
    try:
        lines = open(path, "rb").read().decode("ascii").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        sys.exit("sample_reference.py: %s: cannot read: %s" % (path, e))
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != "CIS-2-RECEIPT v1+sampling":
        sys.exit('sample_reference.py: %s: line 1: not "CIS-2-RECEIPT v1+sampling"' % path)
    if len(lines) != 1 + len(RECEIPT_KEYS):
        sys.exit("sample_reference.py: %s: %d lines, expected %d" % (path, len(lines), 1 + len(RECEIPT_KEYS)))
    r = {}
    for i, (k, line) in enumerate(zip(RECEIPT_KEYS, lines[1:])):
        key, _, val = line.partition(" ")
        if key != k:
            sys.exit('sample_reference.py: %s: line %d: expected "%s"' % (path, i + 2, k))
        r[k] = val
    smp = dict(kv.split("=", 1) for kv in r["sampler"].split(" "))
    ids = lambda v: [int(x) for x in v.split(",")]
    try:
        return {
            "digests": b"".join(bytes.fromhex(r[k]) for k in (
                "weights-sha256", "tokenizer-sha256", "config-sha256", "table-digest",
                "inv-freq-table-digest")),
            "prompt": ids(r["prompt-token-ids"]), "gen": ids(r["generated-token-ids"]),
            "argmax": r["argmax-digest"], "witness": r["witness-digest"],
            # §1: each number read as the nearest binary32 (Python's float, then float32)
            "T": F(float(smp["temperature"])), "K": int(smp["top-k"]),
            "P": F(float(smp["top-p"])), "M": F(float(smp["min-p"])), "S": int(r["seed"]),
        }
    except (KeyError, ValueError) as e:
        sys.exit("sample_reference.py: %s: malformed value: %s" % (path, e))


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def verify_receipt(trace_path, rpath):
    r = read_receipt(rpath)
    t = read_trace(trace_path)
    n_p, n = len(r["prompt"]), len(r["gen"])
    got = sample_ids(t, n_p, r["T"], r["K"], r["P"], r["M"], r["S"], n, trace_path)
    # §12.2: SHA-256 over the prompt ids and the generated ids, u32 little-endian
    am = hashlib.sha256(b"".join(u32(i) for i in r["prompt"] + got)).hexdigest()
    # §12.1 with docs/sampling.md §5: the artifact digests, the prompt ids, the 40-byte sampler
    # record, then each step's logits row (binary32 little-endian) and its id
    w = hashlib.sha256(r["digests"])
    w.update(b"".join(u32(i) for i in r["prompt"]))
    w.update(b"CIS-2-SAMPLER-v1" + struct.pack("<fIffQ", r["T"], r["K"], r["P"], r["M"], r["S"]))
    for step, i in enumerate(got):
        w.update(t["p%d.logits" % (n_p - 1 + step)].astype("<f4").tobytes())
        w.update(u32(i))
    rows = [("generated-token-ids", ",".join(map(str, r["gen"])), ",".join(map(str, got))),
            ("argmax-digest", r["argmax"], am), ("witness-digest", r["witness"], w.hexdigest())]
    bad = 0
    for k, want, have in rows:
        if want == have:
            print("MATCH " + k)
        else:
            bad += 1
            print("MISMATCH %s: receipt %s, recomputed %s" % (k, want, have))
    sys.exit(1 if bad else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--receipt", help="verify this v1+sampling receipt against TRACE's logits")
    ap.add_argument("--n-prompt", type=int)
    ap.add_argument("--temperature", type=float)
    ap.add_argument("--logprobs", type=int, default=None,
                    help="K: print §9's log-probabilities instead of picks: one JSON line per "
                    "step, [chosen's bits, [[id, bits] of the top K]], chosen from --ids")
    ap.add_argument("--ids", default="", help="the generated ids (for --logprobs)")
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--min-p", type=float, default=0.0)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--steps", type=int, default=0, help="0: every logits tensor from the prompt's last")
    a = ap.parse_args()
    if a.receipt:
        verify_receipt(a.trace, a.receipt)
    if a.logprobs is not None:
        if a.n_prompt is None:
            ap.error("--n-prompt is required with --logprobs")
        t = read_trace(a.trace)
        gen = [int(x) for x in a.ids.split(",") if x]
        bits = lambda v: "%08x" % struct.unpack("<I", struct.pack("<f", v))[0]
        for step, c in enumerate(gen):
            name = "p%d.logits" % (a.n_prompt - 1 + step)
            if name not in t:
                sys.exit("sample_reference.py: %s holds no %s" % (a.trace, name))
            lp, top = logprobs(t[name], a.logprobs)
            print(json.dumps([bits(lp[c]), [[i, bits(lp[i])] for i in top]]))
        return
    for k in ("n_prompt", "temperature", "seed"):
        if getattr(a, k) is None:
            ap.error("--%s is required (or --receipt, or --logprobs)" % k.replace("_", "-"))
    t = read_trace(a.trace)
    ids = sample_ids(t, a.n_prompt, a.temperature, a.top_k, a.top_p, a.min_p, a.seed, a.steps, a.trace)
    print(",".join(str(i) for i in ids))


if __name__ == "__main__":
    main()
