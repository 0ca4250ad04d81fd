#!/usr/bin/env python3
"""Second reading of `cis2 quantize` (tests/t_quant.sh), numpy only.

  quant_check.py check SRC QDIR [--lm-head] [--embed]
      Re-derives every int8 tensor from SRC by docs/quantization.md §1 in numpy
      (float32 division, round half to even, clamp) and checks QDIR byte for byte:
      q, scales [rows, 1] F32, norms/biases F32 (exact widening), other tensors
      verbatim, metadata, config.json = SRC's + the quantization_config, the
      tokenizer copied. Prints one line per finding; exit 1 on any.
  quant_check.py pow2 DIR [--all]
      Rewrites DIR's linear weights (--all: the embedding and LM head too; in
      place, same dtype) so each row is q * 2^e
      with max |q| = 127: quantizing such a row gives s = 2^e and q back exactly,
      so s * dot(q, x) = dot(q * s, x) bit for bit (the exact-scale check of arm B).
"""
import json, os, re, struct, sys

import numpy as np

LIN = re.compile(r"model\.layers\.\d+\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj)\.weight$")


def read(path):
    buf = open(path, "rb").read()
    (n,) = struct.unpack("<Q", buf[:8])
    hdr = json.loads(buf[8:8 + n])
    meta = hdr.pop("__metadata__", {})
    data = buf[8 + n:]
    return hdr, meta, data, n


def arr(hdr, data, name):
    t = hdr[name]
    a, b = t["data_offsets"]
    raw = data[a:b]
    dt = t["dtype"]
    if dt == "F32":
        x = np.frombuffer(raw, "<f4")
    elif dt == "BF16":
        x = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    elif dt == "F16":
        x = np.frombuffer(raw, "<f2").astype(np.float32)
    elif dt == "I8":
        x = np.frombuffer(raw, np.int8)
    else:
        raise SystemExit("unsupported dtype " + dt)
    return x.reshape(t["shape"])


def rule(w):
    """docs/quantization.md §1 in numpy float32 (no subnormal weights in these fixtures)."""
    w = w.astype(np.float32)
    assert not np.any((w != 0) & (np.abs(w) < np.float32(2.0 ** -126))), "subnormal weight"
    m = np.abs(w).max(axis=1)
    s = (m / np.float32(127)).astype(np.float32)
    s[np.abs(s) < np.float32(2.0 ** -126)] = 0  # FTZ
    safe = np.where(s == 0, np.float32(1), s)
    q = np.clip(np.rint((w / safe[:, None]).astype(np.float32)), -127, 127).astype(np.int8)
    q[s == 0] = 0
    return q, s


def check(src, qdir, lm_head, embed):
    bad = []
    sh, smeta, sdata, _ = read(os.path.join(src, "model.safetensors"))
    qh, qmeta, qdata, qn = read(os.path.join(qdir, "model.safetensors"))
    cfg = json.load(open(os.path.join(src, "config.json")))
    qcfg = json.load(open(os.path.join(qdir, "config.json")))
    tied = cfg.get("tie_word_embeddings", False)
    targets = {n for n in sh if LIN.match(n)}
    if lm_head and not tied:
        targets.add("lm_head.weight")
    if embed:
        targets.add("model.embed_tokens.weight")
    want = set()
    n_int8 = 0
    for name in sorted(sh):
        w = arr(sh, sdata, name)
        if name in targets:
            n_int8 += 1
            base = name[:-len(".weight")]
            want |= {name, base + ".weight_scale"}
            q, s = rule(w)
            if qh.get(name, {}).get("dtype") != "I8" or qh[name]["shape"] != list(w.shape):
                bad.append("%s: not I8 %s" % (name, list(w.shape)))
                continue
            sc = qh.get(base + ".weight_scale", {})
            if sc.get("dtype") != "F32" or sc.get("shape") != [w.shape[0], 1]:
                bad.append("%s.weight_scale: not F32 [rows, 1]: %s" % (base, sc))
                continue
            gq, gs = arr(qh, qdata, name), arr(qh, qdata, base + ".weight_scale").reshape(-1)
            if not np.array_equal(gq, q):
                i = np.argwhere(gq != q)[0]
                bad.append("%s: q differs at %s: cis2 %d numpy %d" % (name, tuple(i), gq[tuple(i)], q[tuple(i)]))
            if gs.view(np.uint32).tolist() != s.view(np.uint32).tolist():
                bad.append("%s: scales differ" % base)
            # the rule's own promise: |w - q s| <= s (1/2 + 2^-18) (w/s is one f32 division)
            err = np.abs(w.astype(np.float64) - q.astype(np.float64) * s[:, None].astype(np.float64))
            lim = s[:, None].astype(np.float64) * (0.5 + 2.0 ** -17)
            if np.any(err > lim):
                bad.append("%s: |w - q*s| exceeds s (1/2 + 2^-17)" % name)
        elif w.ndim == 1:
            want.add(name)
            if qh.get(name, {}).get("dtype") != "F32" or not np.array_equal(
                    arr(qh, qdata, name).view(np.uint32), w.astype(np.float32).view(np.uint32)):
                bad.append("%s: not the exact F32 widening" % name)
        else:
            want.add(name)
            a, b = sh[name]["data_offsets"]
            c, d = qh.get(name, {}).get("data_offsets", (0, 0))
            if qh.get(name, {}).get("dtype") != sh[name]["dtype"] or sdata[a:b] != qdata[c:d]:
                bad.append("%s: not copied verbatim" % name)
    if set(qh) != want:
        bad.append("tensor names: extra %s missing %s" % (sorted(set(qh) - want), sorted(want - set(qh))))
    if list(qh) != sorted(qh):
        bad.append("tensors not in name order")
    offs = sorted((t["data_offsets"] for t in qh.values()))
    if (8 + qn) % 8 or any(o[0] != p[1] for o, p in zip(offs[1:], offs)):
        bad.append("header not 8-byte padded or data not contiguous")
    import hashlib
    if qmeta.get("format") != "pt" or qmeta.get("source_sha256") != hashlib.sha256(
            open(os.path.join(src, "model.safetensors"), "rb").read()).hexdigest():
        bad.append("metadata %s" % qmeta)
    qc = qcfg.pop("quantization_config", None)
    if qcfg != cfg:
        bad.append("config.json changed beyond quantization_config")
    w = (qc or {}).get("config_groups", {}).get("group_0", {}).get("weights", {})
    exp_targets = ["Linear", "Embedding"] if embed else ["Linear"]
    if not qc or qc.get("quant_method") != "compressed-tensors" or qc.get("format") != "int-quantized" or \
            w.get("num_bits") != 8 or w.get("type") != "int" or w.get("symmetric") is not True or \
            w.get("strategy") != "channel" or qc["config_groups"]["group_0"].get("input_activations") is not None or \
            qc["config_groups"]["group_0"].get("targets") != exp_targets or \
            qc.get("ignore") != ([] if lm_head else ["lm_head"]):
        bad.append("quantization_config %s" % json.dumps(qc))
    if open(os.path.join(src, "tokenizer.json"), "rb").read() != open(os.path.join(qdir, "tokenizer.json"), "rb").read():
        bad.append("tokenizer.json not copied")
    for b in bad:
        print("MISMATCH " + b)
    print("checked %d int8 tensors, %d tensors in all" % (n_int8, len(qh)))
    return 1 if bad else 0


def pow2(d, everything):
    path = os.path.join(d, "model.safetensors")
    hdr, meta, data, _ = read(path)
    data = bytearray(data)
    extra = ("model.embed_tokens.weight", "lm_head.weight") if everything else ()
    for name, t in hdr.items():
        if not LIN.match(name) and name not in extra:
            continue
        w = arr(hdr, data, name).astype(np.float64)
        m = np.abs(w).max(axis=1)
        m = np.where(m == 0, 127.0, m)  # an all-zero row: scale 1, all q 0
        e = np.floor(np.log2(m / 127.0))
        s = np.exp2(e)
        q = np.clip(np.rint(w / s[:, None]), -127, 127)
        j = np.abs(w).argmax(axis=1)
        q[np.arange(len(q)), j] = np.where(w[np.arange(len(q)), j] < 0, -127, 127)
        v = (q * s[:, None]).astype(np.float32)  # <= 7 significant bits: exact in bf16/f16/f32
        a, b = t["data_offsets"]
        if t["dtype"] == "F32":
            raw = v.astype("<f4").tobytes()
        elif t["dtype"] == "BF16":
            raw = (v.view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            raw = v.astype("<f2").tobytes()
        assert len(raw) == b - a
        data[a:b] = raw
    hb = json.dumps(dict([("__metadata__", meta)] if meta else [], **hdr), separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + bytes(data))
    os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], "--lm-head" in sys.argv[4:], "--embed" in sys.argv[4:]))
    if len(sys.argv) in (3, 4) and sys.argv[1] == "pow2":
        sys.exit(pow2(sys.argv[2], sys.argv[3:] == ["--all"]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
