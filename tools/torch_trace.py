#!/usr/bin/env python3
"""PyTorch oracle for the divergence localizer (issue 6, docs/divergence.md).

Runs a plain fp32 Llama / Qwen2 / Qwen3 forward pass in PyTorch -- it reads
config.json and model.safetensors itself (no `transformers`), single-threaded,
with deterministic algorithms on -- and writes a trace in the same format and
node names as `cis2 trace`, so `cis2 diff --tol` can compare the two.

  /usr/bin/python3 tools/torch_trace.py --model DIR --prompt-ids 1,2,3
      [--teacher-force 4,5 | -n N] -o FILE [--arm NAME] [--layers 0-2,29] [--nodes a,b]

This is an independent, ordinary fp32 implementation (the way Hugging Face
writes these models), not a CIS-2 engine: its bits differ from cis2's in the
last places (summation order, libm exp/sin/rsqrt), which is why the
comparison uses the tolerance table, not --exact.
Needs Debian's python3-torch and python3-numpy.
"""
import argparse, hashlib, json, os, struct, sys

import numpy as np
import torch

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
        else:
            die("%s: tensor %s has unsupported dtype %s" % (path, name, t["dtype"]))
        out[name] = torch.from_numpy(arr.reshape(t["shape"]).copy())
    return out


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Model:
    def __init__(self, d):
        try:
            with open(os.path.join(d, "config.json")) as f:
                c = json.load(f)
        except OSError as e:
            die("%s/config.json: cannot open: %s" % (d, e.strerror))
        self.arch = c.get("model_type")
        if self.arch not in ("llama", "qwen2", "qwen3"):
            die("%s/config.json: model_type %r is not llama, qwen2 or qwen3" % (d, self.arch))
        self.H = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads", self.nh)
        self.hd = c.get("head_dim") or self.H // self.nh
        self.eps = float(c["rms_norm_eps"])
        self.theta = float(c.get("rope_theta", 10000.0))
        self.vocab = c["vocab_size"]
        self.tied = bool(c.get("tie_word_embeddings", False))
        self.w = read_safetensors(os.path.join(d, "model.safetensors"))
        self.lm_head = self.w["model.embed_tokens.weight"] if self.tied else self.w["lm_head.weight"]
        self.dir = d

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
    ap.add_argument("--arm", default="torch-fp32")
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

    m = Model(a.model)
    prompt = parse_ids(a.prompt_ids, "--prompt-ids")
    force = parse_ids(a.teacher_force, "--teacher-force") if a.teacher_force else []
    if a.n is not None and a.n < 1:
        die("-n must be at least 1")
    for t in prompt + force:
        if t >= m.vocab:
            die("token id %d is outside the vocabulary (vocab_size = %d)" % (t, m.vocab))
    layers = parse_layers(a.layers, m.L) if a.layers else None
    nodes = set(a.nodes.split(",")) if a.nodes else None
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
    meta = {
        "format": "cis2-trace/1", "arm": a.arm, "engine": "torch %s fp32" % torch.__version__, "backend": "torch",
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
    main()
