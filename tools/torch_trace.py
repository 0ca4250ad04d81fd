#!/usr/bin/env python3
"""PyTorch arms of the divergence localizer (docs/divergence.md, docs/quantization.md).

  /usr/bin/python3 tools/torch_trace.py --model DIR --prompt-ids 1,2,3
      [--teacher-force 4,5 | -n N] -o FILE [--arm B | --arm NAME] [--layers 0-2,29] [--nodes a,b]

Arm A (the default; NAME labels it, default torch-fp32): a plain fp32
Llama / Qwen2 / Qwen3 forward pass written the way Hugging Face writes these
models -- it reads config.json and model.safetensors itself (no
`transformers`), single-threaded, deterministic algorithms on. Its bits
differ from cis2's in the last places (summation order, libm exp/sin/rsqrt),
which is why that comparison uses the tolerance table, not --exact. On an
int8 checkpoint it runs the dequantized weights (q * s).

Arm B (`--arm B`): the emulated-quantized ground truth of
DIVERGENCE_LOCALIZATION.md. The CIS-2 forward pass re-derived in PyTorch
float32 tensor operations, one IEEE operation per step: every reduction a
strict left-to-right loop of separate multiplies and adds (no torch.matmul,
no torch.sum), the pinned exp/ln/sin/cos/rsqrt of spec §6 step by step, FTZ
and DAZ from torch.set_flush_denormal plus the spec's explicit DAZ, no
division by a broadcast scalar (ATen may turn that into a multiply). Int8
linears (compressed-tensors `X.weight` I8 + `X.weight_scale`) are
y = s * dot_seq((float)q, x) (docs/quantization.md §2); float linears
dot_seq(w, x). It writes the same trace format and must equal `cis2 trace`
bit for bit on every node (tests/t_quant.sh).
Needs Debian's python3-torch and python3-numpy.
"""
import argparse, hashlib, json, math, os, struct, sys


def cache_key(argv):
    """CIS2_TRACE_CACHE=DIR keeps each successful run's trace and stdout under a key that is
    the sha256 of this script, the torch/numpy versions, the arguments but -o, and every file
    of --model; a run with the same key copies them instead of running PyTorch again. The test
    legs that re-run the suites (sanitizers, aarch64) then compare their binary against the
    traces the native leg computed. None when there is no cache or the arguments are not the
    plain `--model DIR ... -o FILE` form."""
    cache = os.environ.get("CIS2_TRACE_CACHE")
    if not cache or argv.count("-o") != 1 or argv.count("--model") != 1:
        return None
    i, j = argv.index("-o"), argv.index("--model")
    if i + 1 >= len(argv) or j + 1 >= len(argv) or not os.path.isdir(argv[j + 1]):
        return None
    import importlib.metadata as md
    h = hashlib.sha256()
    with open(__file__, "rb") as f:
        h.update(f.read())
    try:
        h.update(("torch %s numpy %s\0" % (md.version("torch"), md.version("numpy"))).encode())
    except md.PackageNotFoundError:
        return None
    h.update("\0".join(argv[:i] + argv[i + 2:]).encode() + b"\0\0")
    d = argv[j + 1]
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                h.update(name.encode() + b"\0" + f.read() + b"\0")
    return os.path.join(cache, h.hexdigest()), argv[i + 1]


def cache_get(key):
    """Copies a kept trace to -o and prints its stdout; True on a hit."""
    base, out = key
    try:
        with open(base + ".st", "rb") as f:
            st = f.read()
        with open(base + ".out", "r", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return False
    with open(out, "wb") as f:
        f.write(st)
    sys.stdout.write(text.replace("\0OUT\0", out))
    return True


def cache_put(key, text):
    """Keeps -o's trace and the run's stdout (each written beside, then renamed)."""
    base, out = key
    os.makedirs(os.path.dirname(base), exist_ok=True)
    text = text.replace(out, "\0OUT\0")  # the -o of the run that reads it back goes here
    for suffix, data in ((".st", open(out, "rb").read()), (".out", text.encode())):
        tmp = "%s%s.%d.tmp" % (base, suffix, os.getpid())
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, base + suffix)


if __name__ == "__main__":
    KEY = cache_key(sys.argv[1:])
    if KEY and cache_get(KEY):
        sys.exit(0)
    # a test run's one PyTorch process computes it (tools/torch_zygote.py), when there is one
    if os.environ.get("CIS2_TORCH_SERVER"):
        import torch_zygote
        RC = torch_zygote.forward(sys.argv[1:])
        if RC is not None:
            sys.exit(RC)

# PyTorch is imported only when a run computes (a cached run above needs neither).
import numpy as np  # noqa: E402
import torch  # noqa: E402

NODES = ["embed", "attn_norm", "q_proj", "k_proj", "v_proj", "q_norm", "k_norm", "q_rope", "k_rope",
         "attn_scores", "attn_probs", "attn_out", "o_proj", "resid_attn", "mlp_norm", "gate", "up", "act",
         "down", "resid_mlp", "final_norm", "logits"]


def die(msg):
    print("torch_trace.py: " + msg, file=sys.stderr)
    sys.exit(2)


def parse_ids(s, what):
    try:
        ids = [int(t) for t in s.split(",")]
    except ValueError:
        die("%s: expected comma-separated token ids, got %r" % (what, s))
    if not ids or any(i < 0 for i in ids):
        die("%s: expected non-negative token ids, got %r" % (what, s))
    return ids


def read_safetensors(path):
    """{name: tensor}: BF16/F16/F32 widened exactly to float32, I8 kept as int8."""
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as e:
        die("%s: cannot open: %s" % (path, e.strerror))
    if len(buf) < 8:
        die("%s: truncated safetensors file" % path)
    (hlen,) = struct.unpack("<Q", buf[:8])
    if hlen > len(buf) - 8:
        die("%s: safetensors header runs past the end of the file" % path)
    header = json.loads(buf[8:8 + hlen].decode("utf-8"))
    data = buf[8 + hlen:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[a:b]
        if t["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif t["dtype"] == "BF16":  # exact widening: bf16 bits are the top half of f32
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif t["dtype"] == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif t["dtype"] == "I8":
            arr = np.frombuffer(raw, dtype=np.int8)
        else:
            die("%s: tensor %s has unsupported dtype %s" % (path, name, t["dtype"]))
        out[name] = torch.from_numpy(arr.reshape(t["shape"]).copy())
    return out


def check_quant_config(c, path):
    """The compressed-tensors schemes computed exactly (docs/quantization.md §4), read
    independently of src/model/quant_config.c; returns (lm_head_int8, embed_int8)."""
    q = c.get("quantization_config")
    if q is None:
        return None
    if q.get("quant_method") != "compressed-tensors":
        die("%s: quantization_config.quant_method %r is not compressed-tensors" % (path, q.get("quant_method")))
    if q.get("format") not in ("int-quantized", "naive-quantized"):
        die("%s: quantization_config.format %r is not int-quantized" % (path, q.get("format")))
    targets = set()
    for gname, g in q.get("config_groups", {}).items():
        w = g.get("weights") or {}
        ok = (w.get("num_bits", 8) == 8 and w.get("type", "int") == "int" and w.get("symmetric", True) is True
              and (w.get("strategy") == "channel" or (w.get("strategy") is None and w.get("group_size") == -1))
              and w.get("group_size") in (None, -1) and not w.get("dynamic") and not w.get("actorder")
              and g.get("input_activations") is None and g.get("output_activations") is None)
        if not ok:
            die("%s: quantization_config.config_groups.%s is not int8 symmetric per-channel weights only" % (path, gname))
        targets.update(g.get("targets", []))
    if "Linear" not in targets or not targets <= {"Linear", "Embedding"}:
        die("%s: quantization_config targets %r (only Linear and Embedding)" % (path, sorted(targets)))
    return ("lm_head" not in (q.get("ignore") or []), "Embedding" in targets)


def int8_pair(w, name, path):
    """(q int8 [rows, cols], s float32 [rows]) for weight `name` if it is int8, else None."""
    q = w.get(name + ".weight")
    if q is None or q.dtype != torch.int8:
        return None
    s = w.get(name + ".weight_scale")
    if s is None or s.dtype != torch.float32 or s.numel() != q.shape[0]:
        die("%s: %s.weight is int8 but %s.weight_scale is missing or not [rows, 1]" % (path, name, name))
    zp = w.get(name + ".weight_zero_point")
    if zp is not None and bool((zp != 0).any()):
        die("%s: %s.weight_zero_point is not zero (asymmetric weights are not supported)" % (path, name))
    return q, s.reshape(-1).contiguous()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def rope_scaling_of(c, path):
    """config.json's rope_scaling: None, or the "llama3" parameters (docs/rope_scaling.md)."""
    rs = c.get("rope_scaling")
    if rs is None:
        return None
    kind = rs.get("rope_type", rs.get("type")) if isinstance(rs, dict) else None
    if kind != "llama3" or any(k not in rs for k in LLAMA3_KEYS):
        die("%s: rope_scaling %r is not a llama3 one" % (path, rs))
    return {k: rs[k] for k in LLAMA3_KEYS}


def llama3_hf(inv_freq, rs):
    """Hugging Face's _compute_llama3_parameters, expression for expression (arm A): Python
    scalars, `scalar / tensor`, torch.where over all three branches."""
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_wl, high_wl = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    out = torch.where(wavelen > low_wl, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
    return torch.where(medium, smoothed, out)


class Checkpoint:
    """config.json's shapes, the quantization_config (if any) and the tensors of DIR."""

    def __init__(self, d):
        try:
            with open(os.path.join(d, "config.json")) as f:
                c = json.load(f)
        except OSError as e:
            die("%s/config.json: cannot open: %s" % (d, e.strerror))
        # §2.2 reads no model_type: absent, the Llama family unless `architectures`
        # names a Qwen class (as the engine's config reader does).
        self.arch = c.get("model_type")
        if self.arch is None:
            names = c.get("architectures") or []
            self.arch = next((a for a, cls in (("qwen3", "Qwen3"), ("qwen2", "Qwen2"))
                              if any(str(x).startswith(cls) for x in names)), "llama")
        if self.arch not in ("llama", "qwen2", "qwen3"):
            die("%s/config.json: model_type %r is not llama, qwen2 or qwen3" % (d, self.arch))
        self.H = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads") or self.nh
        self.hd = c.get("head_dim") or self.H // self.nh
        self.vocab = c["vocab_size"]
        self.tied = bool(c.get("tie_word_embeddings", False))
        self.eps_text, self.theta_text = c["rms_norm_eps"], c.get("rope_theta", 10000.0)
        self.rope_scaling = rope_scaling_of(c, os.path.join(d, "config.json"))
        self.quant = check_quant_config(c, os.path.join(d, "config.json"))
        self.w = read_safetensors(os.path.join(d, "model.safetensors"))
        self.dir = d


class Model(Checkpoint):
    def __init__(self, d):
        Checkpoint.__init__(self, d)
        self.eps = float(self.eps_text)
        self.theta = float(self.theta_text)
        for name in [n[:-len(".weight")] for n in self.w if n.endswith(".weight")]:
            qs = int8_pair(self.w, name, d)
            if qs is not None:  # arm A on an int8 checkpoint: the dequantized weights q * s
                self.w[name + ".weight"] = qs[0].to(torch.float32) * qs[1][:, None]
        # Tied, or untied without an lm_head.weight: the head is the embedding.
        tied = self.tied or "lm_head.weight" not in self.w
        self.lm_head = self.w["model.embed_tokens.weight"] if tied else self.w["lm_head.weight"]

    def g(self, name):
        return self.w.get(name)

    def rmsnorm(self, x, w):  # Hugging Face's LlamaRMSNorm in fp32
        var = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(var + self.eps))

    def forward(self, tokens, emit):
        """Whole-sequence causal forward; emit(pos, layer, node, tensor) per position."""
        T, nh, nkv, hd = len(tokens), self.nh, self.nkv, self.hd
        x = self.w["model.embed_tokens.weight"][torch.tensor(tokens)].clone()
        for t in range(T):
            emit(t, -1, "embed", x[t])
        half = hd // 2
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        if self.rope_scaling:
            inv_freq = llama3_hf(inv_freq, self.rope_scaling)
        freqs = torch.arange(T, dtype=torch.int64).float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()  # [T, hd]

        def rope(v):  # v: [T, heads, hd]
            rot = torch.cat((-v[..., half:], v[..., :half]), dim=-1)
            return v * cos[:, None, :] + rot * sin[:, None, :]

        scale = hd ** -0.5
        group = nh // nkv
        mask = torch.full((T, T), float("-inf")).triu(1)
        for l in range(self.L):
            p = "model.layers.%d." % l
            xn = self.rmsnorm(x, self.g(p + "input_layernorm.weight"))
            for t in range(T):
                emit(t, l, "attn_norm", xn[t])
            q = torch.nn.functional.linear(xn, self.g(p + "self_attn.q_proj.weight"), self.g(p + "self_attn.q_proj.bias"))
            k = torch.nn.functional.linear(xn, self.g(p + "self_attn.k_proj.weight"), self.g(p + "self_attn.k_proj.bias"))
            v = torch.nn.functional.linear(xn, self.g(p + "self_attn.v_proj.weight"), self.g(p + "self_attn.v_proj.bias"))
            for t in range(T):
                emit(t, l, "q_proj", q[t]); emit(t, l, "k_proj", k[t]); emit(t, l, "v_proj", v[t])
            q = q.view(T, nh, hd)
            k = k.view(T, nkv, hd)
            v = v.view(T, nkv, hd)
            if self.g(p + "self_attn.q_norm.weight") is not None:  # Qwen3: per head, before RoPE
                q = self.rmsnorm(q, self.g(p + "self_attn.q_norm.weight"))
                k = self.rmsnorm(k, self.g(p + "self_attn.k_norm.weight"))
                for t in range(T):
                    emit(t, l, "q_norm", q[t].reshape(-1)); emit(t, l, "k_norm", k[t].reshape(-1))
            q = rope(q)
            k = rope(k)
            for t in range(T):
                emit(t, l, "q_rope", q[t].reshape(-1)); emit(t, l, "k_rope", k[t].reshape(-1))
            kx = k.repeat_interleave(group, dim=1)  # [T, nh, hd]
            vx = v.repeat_interleave(group, dim=1)
            scores = torch.matmul(q.transpose(0, 1), kx.permute(1, 2, 0)) * scale  # [nh, T, T]
            probs = torch.softmax(scores + mask, dim=-1)
            att = torch.matmul(probs, vx.transpose(0, 1)).transpose(0, 1).reshape(T, nh * hd)
            for t in range(T):
                emit(t, l, "attn_scores", scores[:, t, :t + 1])
                emit(t, l, "attn_probs", probs[:, t, :t + 1])
                emit(t, l, "attn_out", att[t])
            o = torch.nn.functional.linear(att, self.g(p + "self_attn.o_proj.weight"))
            x = x + o
            for t in range(T):
                emit(t, l, "o_proj", o[t]); emit(t, l, "resid_attn", x[t])
            xn = self.rmsnorm(x, self.g(p + "post_attention_layernorm.weight"))
            gate = torch.nn.functional.linear(xn, self.g(p + "mlp.gate_proj.weight"))
            up = torch.nn.functional.linear(xn, self.g(p + "mlp.up_proj.weight"))
            act = torch.nn.functional.silu(gate) * up
            down = torch.nn.functional.linear(act, self.g(p + "mlp.down_proj.weight"))
            x = x + down
            for t in range(T):
                emit(t, l, "mlp_norm", xn[t]); emit(t, l, "gate", gate[t]); emit(t, l, "up", up[t])
                emit(t, l, "act", act[t]); emit(t, l, "down", down[t]); emit(t, l, "resid_mlp", x[t])
        fn = self.rmsnorm(x, self.w["model.norm.weight"])
        logits = torch.nn.functional.linear(fn, self.lm_head)
        return fn, logits


# ---------------------------------------------------------------- arm B ----
# Float32 constants from bit patterns (spec §6.2, §6.3, §6.5).
def _f(bits):
    return torch.tensor(np.array([bits], dtype=np.uint32).view(np.float32)[0], dtype=torch.float32)


EXP_LOG2E, EXP_C1, EXP_C2 = _f(0x3FB8AA3B), _f(0x3F318000), _f(0xB95E8083)
EXP_P = [_f(b) for b in (0x39506967, 0x3AB743CE, 0x3C088908, 0x3D2AA9C1, 0x3E2AAAAA, 0x3F000000)]
PI_2_F64 = struct.unpack("<d", struct.pack("<Q", 0x3FF921FB54442D18))[0]
SIN_C = [_f(b) for b in (0xBE2AAAA3, 0x3C08839E, 0xB94CA1F9)]
COS_C = [_f(b) for b in (0x3D2AAAA5, 0xBAB6061A, 0x37CCF5CE)]
LOG_SQRTHF, LOG_Q1, LOG_Q2 = _f(0x3F3504F3), _f(0xB95E8083), _f(0x3F318000)
LOG_P = [_f(b) for b in (0x3D9021BB, 0xBDEBD1B8, 0x3DEF251B, 0xBDFE5D4F, 0x3E11E9BF,
                         0xBE2AAE50, 0x3E4CCEAD, 0xBE7FFFFC, 0x3EAAAAAA)]
F0, F05, F1, F88 = (torch.tensor(v, dtype=torch.float32) for v in (0.0, 0.5, 1.0, 88.0))
INF = torch.tensor(float("inf"), dtype=torch.float32)


def table_digest():
    h = hashlib.sha256()
    for v in [EXP_LOG2E, EXP_C1, EXP_C2] + EXP_P:
        h.update(struct.pack("<f", float(v)))
    h.update(struct.pack("<d", PI_2_F64))
    for v in SIN_C + COS_C + [LOG_SQRTHF, LOG_Q1, LOG_Q2] + LOG_P:
        h.update(struct.pack("<f", float(v)))
    return h.hexdigest()


def bits(x):  # float32 tensor -> its bit patterns as int64 in [0, 2^32)
    return x.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def from_bits(b):  # int64 bit patterns -> float32
    b = torch.where(b >= 2 ** 31, b - 2 ** 32, b)
    return b.to(torch.int32).view(torch.float32)


def daz(x):  # §1.3 by bit pattern: a subnormal becomes a zero of its sign
    b = bits(x)
    sub = ((b & 0x7F800000) == 0) & ((b & 0x007FFFFF) != 0)
    return torch.where(sub, from_bits(b & 0x80000000), x)


def div(a, b):  # IEEE a / b, never ATen's multiply-by-reciprocal of a broadcast scalar
    a, b = torch.broadcast_tensors(a, b)
    return torch.div(a.contiguous(), b.contiguous())


def ldexp_exact(x, k):  # §6.2.1 on float32 x, int64 k
    b = bits(x)
    e = ((b >> 23) & 0xFF) + k
    y = from_bits((b & ~(0xFF << 23)) | (e.clamp(0, 255) << 23))
    y = torch.where(e <= 0, F0.expand_as(x), y)
    y = torch.where(e >= 0xFF, torch.where(b >= 2 ** 31, -INF, INF), y)
    return torch.where((b & 0x7FFFFFFF) == 0, x, y)


def floor_small(z):
    fi = z.to(torch.int32).to(torch.float32)  # truncation toward zero, exact
    return torch.where(fi > z, fi - F1, fi)


def exp_pinned(x):  # §6.2, operation by operation (pinned_math.c)
    x = daz(x)
    nan, big, small = x != x, x > F88, x < -F88
    xs = torch.where(nan | big | small, F0.expand_as(x), x)
    t = xs * EXP_LOG2E
    z0 = t + F05
    k = floor_small(z0)
    kc1 = k * EXP_C1
    r0 = xs - kc1
    kc2 = k * EXP_C2
    r = r0 - kc2
    r2 = r * r
    poly = EXP_P[0].expand_as(x)
    for i in range(1, 6):
        pr = poly * r
        poly = pr + EXP_P[i]
    m1 = poly * r2
    poly2 = m1 + r
    res = poly2 + F1
    y = ldexp_exact(res, k.to(torch.int64))
    y = torch.where(small, F0.expand_as(x), y)
    y = torch.where(big, INF.expand_as(x), y)
    return torch.where(nan, x, y)


def ln_pinned(x):  # §6.5 for positive finite normal x (rope_theta)
    x = daz(x)
    b = bits(x)
    if bool(((b & 0x7F800000) == 0x7F800000).any()) or bool((b >= 2 ** 31).any()) or bool((x == 0).any()):
        die("ln_pinned: only positive finite arguments are needed here")
    e = ((b >> 23) & 0xFF) - 126
    m = from_bits((b & 0x807FFFFF) | (126 << 23))
    low = m < LOG_SQRTHF
    e = torch.where(low, e - 1, e)
    m = torch.where(low, (m + m) - F1, m - F1)
    z = m * m
    poly = LOG_P[0].expand_as(x)
    for i in range(1, 9):
        pm = poly * m
        poly = pm + LOG_P[i]
    y = poly * m
    y = y * z
    fe = e.to(torch.float32)
    t1 = fe * LOG_Q1
    y = y + t1
    half_z = F05 * z
    y = y - half_z
    res = m + y
    t2 = fe * LOG_Q2
    return res + t2


def sincos_pinned(x):  # §6.3 (finite x): binary64 reduction, one narrowing, f32 polynomials
    x = daz(x)
    xd = x.to(torch.float64)
    q = div(xd, torch.tensor(PI_2_F64, dtype=torch.float64))
    a = q.abs()
    t = a.to(torch.int64).to(torch.float64)
    frac = a - t
    t = torch.where(frac >= 0.5, t + 1.0, t)
    k = torch.where(q < 0, -t, t)
    khi = k * PI_2_F64
    r = (xd - khi).to(torch.float32)  # one RNE narrowing (FTZ applies, as in C)
    quad = torch.remainder(k.to(torch.int64), 4)
    r2 = r * r
    inner = SIN_C[2] * r2
    inner = inner + SIN_C[1]
    inner = inner * r2
    inner = inner + SIN_C[0]
    r3 = r2 * r
    sin_r = r + inner * r3
    cin = COS_C[2] * r2
    cin = cin + COS_C[1]
    cin = cin * r2
    cin = cin + COS_C[0]
    r4 = r2 * r2
    cterm = cin * r4
    step1 = F1 - F05 * r2
    cos_r = step1 + cterm
    s = torch.where(quad == 0, sin_r, torch.where(quad == 1, cos_r, torch.where(quad == 2, -sin_r, -cos_r)))
    c = torch.where(quad == 0, cos_r, torch.where(quad == 1, -sin_r, torch.where(quad == 2, -cos_r, sin_r)))
    return s, c


def rsqrt(x):  # §6.1: IEEE sqrt, then IEEE divide
    return div(F1, torch.sqrt(x))


def llama3_pinned(v, rs):
    """docs/rope_scaling.md's steps on the §7.1 table, one IEEE binary32 operation each."""
    f32 = lambda x: torch.tensor(np.float32(x), dtype=torch.float32)  # one RNE narrowing
    fac, low, high = (float(rs[k]) for k in ("factor", "low_freq_factor", "high_freq_factor"))
    old = int(rs["original_max_position_embeddings"])
    F, LO, CTX = f32(fac), f32(low), f32(float(old))
    LW, HW, SPAN = f32(old / low), f32(old / high), f32(high - low)  # binary64, then narrowed
    wl = div(F1, v) * _f(0x40C90FDB)  # wavelen: reciprocal, then times (float)(2*pi)
    s = div(div(F1, wl) * CTX - LO, SPAN)
    smoothed = div((F1 - s) * v, F) + s * v
    return torch.where(wl > LW, div(v, F), torch.where(wl < HW, v, smoothed))


class ArmB(Checkpoint):
    """CIS-2's forward pass (§5-§11) over the checkpoint's own weights, int8 linears
    as y = s * dot_seq((float)q, x): every reduction a left-to-right loop, vectorized
    only across independent outputs (rows, tokens, heads, keys, dims)."""

    def __init__(self, d):
        Checkpoint.__init__(self, d)
        f32 = lambda v: torch.tensor(np.float32(float(v)), dtype=torch.float32)  # §2.3: f64, one RNE
        self.eps = f32(self.eps_text)
        self.theta = f32(self.theta_text)
        self.lin = {}  # name -> ("i8", qT, s) | ("f32", wT): weights transposed, [cols, rows]
        self.n_int8 = 0
        h = hashlib.sha256()  # State 1: the int8 weights and scales this arm computes with
        for name in sorted(n[:-len(".weight")] for n in self.w if n.endswith(".weight")):
            qs = int8_pair(self.w, name, d)
            if qs is not None:
                self.n_int8 += 1
                h.update(name.encode() + b"\0" + qs[0].numpy().tobytes() + qs[1].numpy().astype("<f4").tobytes())
                self.lin[name] = ("i8", qs[0].t().to(torch.float32).contiguous(), qs[1])  # exact: |q| <= 128
            elif self.w[name + ".weight"].dim() == 2:
                self.lin[name] = ("f32", self.w[name + ".weight"].t().contiguous())
        self.int8_digest = h.hexdigest() if self.n_int8 else ""
        self.head = "model.embed_tokens" if self.tied or "lm_head.weight" not in self.w else "lm_head"
        if self.head not in self.lin:
            die("%s: no LM head weight (%s.weight)" % (d, self.head))
        hd = self.hd
        ln_t = ln_pinned(self.theta.reshape(1))
        frac = div(torch.arange(0, hd, 2, dtype=torch.float32), torch.tensor(float(hd), dtype=torch.float32))
        self.inv_freq = exp_pinned(-(frac * ln_t))  # §7.1
        if self.rope_scaling:
            self.inv_freq = llama3_pinned(self.inv_freq, self.rope_scaling)
        self.scale = rsqrt(torch.tensor(float(hd), dtype=torch.float32))  # §9.2

    def linear(self, name, x):  # x [T, cols] -> [T, rows]
        kind = self.lin[name]
        wt = kind[1]
        acc = torch.zeros(x.shape[0], wt.shape[1], dtype=torch.float32)
        for k in range(wt.shape[0]):  # §5.1: strictly left to right, one accumulator per output
            acc = acc + x[:, k:k + 1] * wt[k][None, :]
        return acc * kind[2][None, :] if kind[0] == "i8" else acc  # int8: one multiply after the sum

    def rmsnorm(self, x, w):  # §8 over the last dim
        ss = torch.zeros(x.shape[:-1], dtype=torch.float32)
        for i in range(x.shape[-1]):
            ss = ss + x[..., i] * x[..., i]
        mean = div(ss, torch.tensor(float(x.shape[-1]), dtype=torch.float32))
        inv = rsqrt(mean + self.eps)
        return (x * inv[..., None]) * w

    def embed(self, tokens):
        kind = self.lin.get("model.embed_tokens")
        if kind is not None and kind[0] == "i8":  # int8 embedding: (float)q[tok, i] * s[tok]
            q, s = kind[1].t(), kind[2]
            return q[tokens] * s[tokens][:, None]
        return self.w["model.embed_tokens.weight"][tokens].clone()

    def forward(self, tokens, emit):
        T, nh, nkv, hd, H = len(tokens), self.nh, self.nkv, self.hd, self.H
        half, group, g = hd // 2, nh // nkv, self.w.get
        x = self.embed(torch.tensor(tokens))
        for t in range(T):
            emit(t, -1, "embed", x[t])
        ang = torch.arange(T, dtype=torch.float32)[:, None] * self.inv_freq[None, :]  # §7.3
        sin, cos = sincos_pinned(ang)  # [T, half]

        def rope(v):  # §7.4 rotate-half on [T, heads, hd]
            x1, x2 = v[..., :half], v[..., half:]
            c, s = cos[:, None, :], sin[:, None, :]
            t1, t2, t3, t4 = x1 * c, (-x2) * s, x2 * c, x1 * s
            return torch.cat((t1 + t2, t3 + t4), dim=-1)

        keep = torch.arange(T)[None, :] <= torch.arange(T)[:, None]  # [t, j]: j <= t
        for l in range(self.L):
            p = "model.layers.%d." % l
            xn = self.rmsnorm(x, g(p + "input_layernorm.weight"))
            q = self.linear(p + "self_attn.q_proj", xn)
            k = self.linear(p + "self_attn.k_proj", xn)
            v = self.linear(p + "self_attn.v_proj", xn)
            if g(p + "self_attn.q_proj.bias") is not None:  # §9.1
                q = q + g(p + "self_attn.q_proj.bias")
                k = k + g(p + "self_attn.k_proj.bias")
                v = v + g(p + "self_attn.v_proj.bias")
            for t in range(T):
                emit(t, l, "attn_norm", xn[t])
                emit(t, l, "q_proj", q[t]); emit(t, l, "k_proj", k[t]); emit(t, l, "v_proj", v[t])
            q, k, v = q.view(T, nh, hd), k.view(T, nkv, hd), v.view(T, nkv, hd)
            if g(p + "self_attn.q_norm.weight") is not None:  # Qwen3: per head, before RoPE
                q = self.rmsnorm(q, g(p + "self_attn.q_norm.weight"))
                k = self.rmsnorm(k, g(p + "self_attn.k_norm.weight"))
                for t in range(T):
                    emit(t, l, "q_norm", q[t].reshape(-1)); emit(t, l, "k_norm", k[t].reshape(-1))
            q, k = rope(q), rope(k)
            for t in range(T):
                emit(t, l, "q_rope", q[t].reshape(-1)); emit(t, l, "k_rope", k[t].reshape(-1))
            kx = k.repeat_interleave(group, dim=1)  # query head h reads KV head h / group
            vx = v.repeat_interleave(group, dim=1)
            d = torch.zeros(T, nh, T, dtype=torch.float32)  # [query t, head, key j]
            for i in range(hd):  # §9.2 dot_seq over head_dim
                d = d + q[:, :, i][:, :, None] * kx[:, :, i].t()[None, :, :]
            sc = d * self.scale  # scale after the dot
            mx = sc[:, :, 0]  # §9.3: strict >, first max wins, keys j <= t only
            for j in range(1, T):
                upd = keep[:, j][:, None] & (sc[:, :, j] > mx)
                mx = torch.where(upd, sc[:, :, j], mx)
            e = exp_pinned(sc - mx[:, :, None])
            den = torch.zeros(T, nh, dtype=torch.float32)
            for j in range(T):  # §5.3 sum_seq over keys 0..t
                den = torch.where(keep[:, j][:, None], den + e[:, :, j], den)
            pr = div(e, den[:, :, None])
            att = torch.zeros(T, nh, hd, dtype=torch.float32)
            for j in range(T):  # §9.4: over keys in order
                att = torch.where(keep[:, j][:, None, None], att + pr[:, :, j][:, :, None] * vx[j][None, :, :], att)
            att = att.reshape(T, nh * hd)
            for t in range(T):
                emit(t, l, "attn_scores", sc[t, :, :t + 1])
                emit(t, l, "attn_probs", pr[t, :, :t + 1])
                emit(t, l, "attn_out", att[t])
            o = self.linear(p + "self_attn.o_proj", att)
            x = x + o
            xn = self.rmsnorm(x, g(p + "post_attention_layernorm.weight"))
            for t in range(T):
                emit(t, l, "o_proj", o[t]); emit(t, l, "resid_attn", x[t]); emit(t, l, "mlp_norm", xn[t])
            gate = self.linear(p + "mlp.gate_proj", xn)
            up = self.linear(p + "mlp.up_proj", xn)
            neg = -gate  # §6.4 silu(x) = x / (1 + exp_pinned(-x)), then §10 * up
            act = div(gate, F1 + exp_pinned(neg)) * up
            down = self.linear(p + "mlp.down_proj", act)
            x = x + down
            for t in range(T):
                emit(t, l, "gate", gate[t]); emit(t, l, "up", up[t]); emit(t, l, "act", act[t])
                emit(t, l, "down", down[t]); emit(t, l, "resid_mlp", x[t])
        fn = self.rmsnorm(x, self.w["model.norm.weight"])
        return fn, self.linear(self.head, fn)


def inv_freq_digest(m):
    return hashlib.sha256(m.inv_freq.numpy().astype("<f4").tobytes()).hexdigest()


def parse_layers(s, n):
    on = set()
    for part in s.split(","):
        a, _, b = part.partition("-")
        try:
            lo, hi = int(a), int(b) if b else int(a)
        except ValueError:
            die("--layers %r: expected a layer number or range like 0-2,29" % s)
        if lo > hi or hi >= n:
            die("--layers %r: bad range or layer beyond the model's %d layers" % (s, n))
        twice = on.intersection(range(lo, hi + 1))
        if twice:  # as cis2 trace --layers: a typo for another layer, not a request
            die("--layers %r: layer %d is given twice" % (s, min(twice)))
        on.update(range(lo, hi + 1))
    return on


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-ids", required=True)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--teacher-force")
    g.add_argument("-n", type=int)
    ap.add_argument("-o", required=True)
    ap.add_argument("--arm", default="torch-fp32", help="B: the emulated-quantized ground truth; "
                    "any other NAME labels the ordinary fp32 forward (arm A)")
    ap.add_argument("--layers")
    ap.add_argument("--nodes")
    a = ap.parse_args()

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.use_deterministic_algorithms(True)
    if hasattr(torch.backends, "cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_grad_enabled(False)

    arm_b = a.arm == "B"
    if arm_b and not torch.set_flush_denormal(True):  # FTZ+DAZ on this (the only) thread, §1.3
        die("--arm B: this CPU has no flush-to-zero control (torch.set_flush_denormal failed)")
    m = ArmB(a.model) if arm_b else Model(a.model)
    prompt = parse_ids(a.prompt_ids, "--prompt-ids")
    force = parse_ids(a.teacher_force, "--teacher-force") if a.teacher_force else []
    if a.n is not None and a.n < 1:
        die("-n must be at least 1")
    for t in prompt + force:
        if t >= m.vocab:
            die("token id %d is outside the vocabulary (vocab_size = %d)" % (t, m.vocab))
    layers = parse_layers(a.layers, m.L) if a.layers else None
    nodes = set(a.nodes.split(",")) if a.nodes else None
    if nodes and len(nodes) < len(a.nodes.split(",")):  # as cis2 trace --nodes
        seen = a.nodes.split(",")
        die("--nodes: node %s is given twice" % next(x for i, x in enumerate(seen)
                                                     if x in seen[:i]))
    if nodes and not nodes <= set(NODES):
        die("--nodes: unknown node(s) %s" % ",".join(sorted(nodes - set(NODES))))

    np_ = len(prompt)
    if a.n:  # greedy, the CIS-2 way: positions 0 .. np+n-2, logits from the last prompt position on
        tokens, picks = list(prompt), []
        while True:
            _, logits = m.forward(tokens, lambda *x: None)
            picks.append(int(torch.argmax(logits[-1])))
            if len(picks) == a.n:
                break
            tokens.append(picks[-1])
        logit_from = np_ - 1
    else:  # teacher forcing: every position has logits
        tokens, logit_from = prompt + force, 0

    captured = []

    def emit(pos, layer, node, t):
        if nodes is not None and node not in nodes:
            return
        if layer >= 0 and layers is not None and layer not in layers:
            return
        name = "p%d.%s" % (pos, node) if layer < 0 else "p%d.L%d.%s" % (pos, layer, node)
        captured.append((name, t.detach().to(torch.float32).contiguous().numpy().astype("<f4")))

    fn, logits = m.forward(tokens, emit)
    # forward() emitted per layer; regroup in execution order (position first)
    order = {n: i for i, n in enumerate(NODES)}

    def key(item):
        name = item[0]
        parts = name.split(".")
        pos = int(parts[0][1:])
        if len(parts) == 3:
            return (pos, int(parts[1][1:]) + 1, order[parts[2]])
        return (pos, 0 if parts[1] == "embed" else 10 ** 6, order[parts[1]])

    for t in range(logit_from, len(tokens)):
        emit(t, -1, "final_norm", fn[t])
        emit(t, -1, "logits", logits[t])
    captured.sort(key=key)
    predicted = [int(i) for i in torch.argmax(logits[logit_from:], dim=-1)]

    node_order = [n for n in NODES if n not in ("q_norm", "k_norm") or m.arch == "qwen3"]
    if arm_b:
        engine = "torch %s arm B: emulated CIS-2, strict left-to-right f32" % torch.__version__
        dtype = "int8-row" if m.n_int8 else "fp32"
    else:
        engine = "torch %s fp32" % torch.__version__
        dtype = "fp32 (dequantized int8-row)" if m.quant else "fp32"
    meta = {
        "format": "cis2-trace/1", "arm": a.arm, "engine": engine, "backend": "torch", "dtype": dtype,
        "arch": m.arch, "n_layers": str(m.L),
        "weights_sha256": sha256_file(os.path.join(a.model, "model.safetensors")),
        "config_sha256": sha256_file(os.path.join(a.model, "config.json")),
        "prompt_ids": ",".join(map(str, prompt)), "teacher_force": ",".join(map(str, force)),
        "mode": "greedy" if a.n else "teacher-force", "token_ids": ",".join(map(str, tokens)),
        "predicted_ids": ",".join(map(str, predicted)), "node_order": ",".join(node_order),
        "layers": a.layers or "all", "nodes": a.nodes or "all", "hash_only": "0",
    }
    tok = os.path.join(a.model, "tokenizer.json")
    if os.path.exists(tok):
        meta["tokenizer_sha256"] = sha256_file(tok)
    if arm_b:
        meta["table_digest"] = table_digest()
        meta["inv_freq_table_digest"] = inv_freq_digest(m)
        if m.n_int8:
            meta["int8_weights_sha256"] = m.int8_digest
    header, off = {"__metadata__": meta}, 0
    for name, arr in captured:
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + arr.nbytes]}
        off += arr.nbytes
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    tmp = a.o + ".tmp.%d" % os.getpid()
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for _, arr in captured:
            f.write(arr.tobytes())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, a.o)
    print("torch_trace: wrote %s (%d tensors, %d positions, arm %s)" % (a.o, len(captured), len(tokens), a.arm))
    print("token_ids=" + meta["token_ids"])
    print("predicted_ids=" + meta["predicted_ids"])


if __name__ == "__main__":
    if KEY is None:
        main()
    else:
        import contextlib, io
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                main()
        finally:
            sys.stdout.write(buf.getvalue())
        cache_put(KEY, buf.getvalue())
