#!/usr/bin/env python3
"""Write a small deterministic Hugging Face-style checkpoint (config.json,
model.safetensors, tokenizer.json) for tests, the demo and the benchmark.

  make_model.py OUT_DIR [--arch llama|qwen2|qwen3|cis2-toy] [--hidden 64] [--inter 128]
      [--layers 2] [--heads 4] [--kv-heads 2] [--head-dim N] [--vocab 320]
      [--theta 10000] [--eps 1e-5] [--untied] [--dtype bf16|f32|f16] [--seed 1]
      [--max-pos 8192] [--tokenizer FILE] [--smollm2-shape] [--drop-config KEY,...]
  make_model.py OUT_DIR --shape NAME [--layers N] [--tokenizer FILE] [--seed 1]

Standard library only (numpy for --shape). The same arguments always give the same bytes: small
tensors come from splitmix64, large bf16 tensors from SHAKE-256 with a fixed
exponent band (so the 135M-shaped benchmark model is written in seconds).
--smollm2-shape sets SmolLM2-135M's shape (30 layers, hidden 576, inter 1536,
9/3 heads, vocab 49152, theta 100000, tied) and copies --tokenizer if given.
--shape NAME writes the exact shape of a released checkpoint (SHAPES below,
sources in docs/shapes.md): every width, the vocabulary, tying, RoPE, eps and
max_position_embeddings of its config.json, bf16 like the real weights, every
matrix from numpy's PCG64 (needs numpy; seconds for 1.7e9 parameters); --layers N
keeps the widths with N layers (layer l's tensors are the same bytes at every
depth), so a test runs the real widths in a second.
--arch cis2-toy writes the test-only fixture architecture of docs/architecture.md:
the llama checkpoint of the same arguments (the same bytes for every shared
tensor) plus a per-layer self_attn.o_gain.weight [hidden] (--toy-gain ones:
all 1.0); cis2 reads it only with CIS2_TEST_ARCHS=1.
--ftz-window writes a checkpoint whose RMSNorms multiply in the §1.3
flush-to-zero window (see ftz_window below).
"""
import argparse, hashlib, json, math, os, shutil, struct

SPECIALS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<repo_name>', '<reponame>',
            '<file_sep>', '<filename>', '<gh_stars>', '<issue_start>', '<issue_comment>',
            '<issue_closed>', '<jupyter_start>', '<jupyter_text>', '<jupyter_code>',
            '<jupyter_output>', '<jupyter_script>', '<empty_output>']
CORPUS = ("Once upon a time, there was a little girl named Lily. She loved to play outside "
          "in the sun with her dog. One day she found a shiny red ball in the garden and "
          "she was very happy. The quick brown fox jumps over the lazy dog. It's what we'd "
          "all say: they're here, we've seen it, I'm sure you'll agree. for i in range(10): print(i)\n"
          "Il était une fois une petite fille. Ünïcödé façade naïve café. 1234567890 ") * 2


# The released checkpoints' shapes, from their config.json (docs/shapes.md names
# the file each number comes from). head_dim is written where the real config
# has the key; bos/eos are the real ids (a generated tokenizer lacks them: the
# engine then has no end token, as with any id it does not know).
SHAPES = {
    'smollm2-360m': dict(arch='llama', hidden=960, inter=2560, layers=32, heads=15, kv_heads=5,
                         head_dim=None, vocab=49152, theta=100000.0, eps=1e-5, max_pos=8192,
                         tied=True, rope_scaling=None, bos=0, eos=0),
    'smollm2-1.7b': dict(arch='llama', hidden=2048, inter=8192, layers=24, heads=32, kv_heads=32,
                         head_dim=None, vocab=49152, theta=130000.0, eps=1e-5, max_pos=8192,
                         tied=True, rope_scaling=None, bos=0, eos=0),
    'qwen2.5-0.5b': dict(arch='qwen2', hidden=896, inter=4864, layers=24, heads=14, kv_heads=2,
                         head_dim=None, vocab=151936, theta=1000000.0, eps=1e-6, max_pos=32768,
                         tied=True, rope_scaling=None, bos=151643, eos=151643),
    'qwen2.5-1.5b': dict(arch='qwen2', hidden=1536, inter=8960, layers=28, heads=12, kv_heads=2,
                         head_dim=None, vocab=151936, theta=1000000.0, eps=1e-6, max_pos=131072,
                         tied=True, rope_scaling=None, bos=151643, eos=151643),
    'qwen3-0.6b': dict(arch='qwen3', hidden=1024, inter=3072, layers=28, heads=16, kv_heads=8,
                       head_dim=128, vocab=151936, theta=1000000.0, eps=1e-6, max_pos=40960,
                       tied=True, rope_scaling=None, bos=151643, eos=151645),
    'qwen3-1.7b': dict(arch='qwen3', hidden=2048, inter=6144, layers=28, heads=16, kv_heads=8,
                       head_dim=128, vocab=151936, theta=1000000.0, eps=1e-6, max_pos=40960,
                       tied=True, rope_scaling=None, bos=151643, eos=151645),
    'llama3.2-1b': dict(arch='llama', hidden=2048, inter=8192, layers=16, heads=32, kv_heads=8,
                        head_dim=64, vocab=128256, theta=500000.0, eps=1e-5, max_pos=131072,
                        tied=True, rope_scaling='llama3:32:1:4:8192', bos=128000, eos=128001),
}


class SplitMix:
    def __init__(self, seed):
        self.s = seed & (2**64 - 1)

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        return z ^ (z >> 31)

    def uniform(self, a):  # in [-a, a)
        return (self.next() >> 11) / float(1 << 53) * 2 * a - a


def f32_bits(x):
    return struct.unpack('<I', struct.pack('<f', x))[0]


def bf16_bits(x):  # round to nearest even from the f32 value
    b = f32_bits(x)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def shake_bf16(tag, n, scale):
    """n bf16 values, random sign and mantissa, |w| in [scale/2, scale)."""
    e = max(1, min(254, int(math.floor(math.log2(scale))) + 127))
    raw = hashlib.shake_256(tag.encode()).digest(2 * n)
    out = bytearray(2 * n)
    out[0::2] = raw[0::2].translate(bytes(((e & 1) << 7) | (b & 0x7F) for b in range(256)))
    out[1::2] = raw[1::2].translate(bytes((b & 0x80) | (e >> 1) for b in range(256)))
    return bytes(out)


def pcg_bf16(tag, n, scale, chunk=1 << 22):
    """n bf16 values as shake_bf16 draws them (random sign and mantissa, |w| in
    [scale/2, scale)), the random bits from numpy's PCG64 seeded by SHA-256 of
    tag: yields the little-endian bytes in chunks (a few MB in memory)."""
    import numpy as np
    e = max(1, min(254, int(math.floor(math.log2(scale))) + 127))
    seed = int.from_bytes(hashlib.sha256(tag.encode()).digest(), 'little')
    bg = np.random.PCG64(np.random.SeedSequence(seed))
    for i in range(0, n, chunk):
        m = min(chunk, n - i)
        r = bg.random_raw((m + 3) // 4).astype('<u8', copy=False).view('<u2')[:m]
        yield ((r & 0x807F) | (e << 7)).astype('<u2', copy=False).tobytes()


class Lazy:
    """A tensor's payload of n bytes, made by make() when it is written."""
    def __init__(self, n, make):
        self.n, self.make = n, make

    def __len__(self):
        return self.n


def bytes_to_unicode():
    """GPT-2's byte->unicode map (spec §3.1.5.a)."""
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def make_tokenizer(vocab_size):
    """A SmolLM2-shaped byte-level BPE tokenizer.json with merges learned from CORPUS."""
    b2u = bytes_to_unicode()
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    words = {}
    for w in CORPUS.replace('\n', ' ').split(' '):
        key = tuple(b2u[c] for c in (' ' + w).encode())
        words[key] = words.get(key, 0) + 1
    merges = []
    while len(vocab) < vocab_size:
        counts = {}
        for w, n in words.items():
            for p in zip(w, w[1:]):
                counts[p] = counts.get(p, 0) + n
        if not counts:
            break
        best = max(sorted(counts), key=lambda p: counts[p])
        merges.append(best[0] + ' ' + best[1])
        vocab[best[0] + best[1]] = len(vocab)
        nw = {}
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1]); i += 2
                else:
                    out.append(w[i]); i += 1
            nw[tuple(out)] = nw.get(tuple(out), 0) + n
        words = nw
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": True},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": vocab, "merges": merges}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--arch', default='llama', choices=['llama', 'qwen2', 'qwen3', 'cis2-toy'])
    ap.add_argument('--toy-gain', default='random', choices=['random', 'ones'])
    ap.add_argument('--hidden', type=int, default=64)
    ap.add_argument('--inter', type=int, default=128)
    ap.add_argument('--layers', type=int, help='layers (default 2; with --shape, its own)')
    ap.add_argument('--heads', type=int, default=4)
    ap.add_argument('--kv-heads', type=int, default=2)
    ap.add_argument('--head-dim', type=int)
    ap.add_argument('--vocab', type=int, default=None,
                    help='vocabulary size (default 320; with --shape, its own: a smaller one keeps every\n'
                    'other width, for tests under emulation, with bos/eos moved into range)')
    ap.add_argument('--theta', type=float, default=10000.0)
    ap.add_argument('--eps', type=float, default=1e-5)
    ap.add_argument('--untied', action='store_true')
    ap.add_argument('--dtype', default='bf16', choices=['bf16', 'f32', 'f16'])
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--max-pos', type=int, default=8192)
    ap.add_argument('--tokenizer', help='copy this tokenizer.json instead of generating one')
    ap.add_argument('--smollm2-shape', action='store_true')
    ap.add_argument('--rope-scaling', metavar='llama3:FACTOR:LOW:HIGH:ORIGINAL',
                    help='write rope_scaling {"rope_type": "llama3", factor, low_freq_factor, '
                         'high_freq_factor, original_max_position_embeddings} (docs/rope_scaling.md)')
    ap.add_argument('--llama32-1b-shape', action='store_true',
                    help="Llama-3.2-1B's shape and RoPE (about 1.2e9 parameters: 2.5 GB in bf16)")
    ap.add_argument('--shape', choices=sorted(SHAPES),
                    help="a released checkpoint's exact shape (docs/shapes.md); --layers N overrides its depth")
    ap.add_argument('--ftz-window', action='store_true')
    ap.add_argument('--drop-config', default='', metavar='KEY,...',
                    help='leave these keys out of config.json (e.g. model_type,architectures)')
    a = ap.parse_args()
    layers_given = a.layers
    vocab_given = a.vocab
    if a.vocab is None:
        a.vocab = 320
    if a.layers is None:
        a.layers = 2
    elif a.layers < 1 and (a.shape or a.smollm2_shape or a.llama32_1b_shape):
        ap.error('--layers: want a positive number of layers')
    bos = eos = 0
    if a.shape:
        try:
            import numpy  # noqa: F401 (pcg_bf16)
        except ImportError:
            ap.error('--shape needs numpy (Debian: /usr/bin/python3 with python3-numpy)')
        sh = SHAPES[a.shape]
        a.arch, a.hidden, a.inter, a.layers = sh['arch'], sh['hidden'], sh['inter'], sh['layers']
        a.heads, a.kv_heads, a.head_dim, a.vocab = sh['heads'], sh['kv_heads'], sh['head_dim'], sh['vocab']
        a.theta, a.eps, a.max_pos, a.untied = sh['theta'], sh['eps'], sh['max_pos'], not sh['tied']
        a.rope_scaling, a.dtype, bos, eos = sh['rope_scaling'], 'bf16', sh['bos'], sh['eos']
    if a.ftz_window:
        a.arch, a.dtype, a.untied, a.hidden, a.inter, a.layers = 'llama', 'f32', True, 16, 32, 1
    if a.smollm2_shape:
        a.arch, a.hidden, a.inter, a.layers, a.heads, a.kv_heads = 'llama', 576, 1536, 30, 9, 3
        a.vocab, a.theta, a.untied, a.dtype = 49152, 100000.0, False, 'bf16'
    if a.llama32_1b_shape:
        a.arch, a.hidden, a.inter, a.layers, a.heads, a.kv_heads = 'llama', 2048, 8192, 16, 32, 8
        a.vocab, a.theta, a.untied, a.dtype, a.max_pos = 128256, 500000.0, False, 'bf16', 131072
        a.rope_scaling = a.rope_scaling or 'llama3:32:1:4:8192'
    if layers_given is not None and (a.shape or a.smollm2_shape or a.llama32_1b_shape):
        a.layers = layers_given
    if vocab_given is not None and a.shape:
        a.vocab = vocab_given
        bos, eos = min(bos, a.vocab - 1), min(eos, a.vocab - 1)
    rope_scaling = None
    if a.rope_scaling:
        parts = a.rope_scaling.split(':')
        try:
            if len(parts) != 5 or parts[0] != 'llama3':
                raise ValueError
            rope_scaling = {"factor": float(parts[1]), "high_freq_factor": float(parts[3]),
                            "low_freq_factor": float(parts[2]),
                            "original_max_position_embeddings": int(parts[4]), "rope_type": "llama3"}
        except ValueError:
            ap.error('--rope-scaling: want llama3:FACTOR:LOW:HIGH:ORIGINAL, e.g. llama3:32:1:4:8192')
    hd = a.head_dim or a.hidden // a.heads
    rng = SplitMix(a.seed)
    toy_rng = SplitMix(a.seed ^ 0x70E)  # its own stream: the shared tensors stay llama's
    tensors = []  # (name, shape, payload bytes, dtype)

    def pack(vals):
        if a.dtype == 'bf16':
            return struct.pack('<%dH' % len(vals), *[bf16_bits(v) for v in vals]), 'BF16'
        if a.dtype == 'f16':
            return struct.pack('<%de' % len(vals), *vals), 'F16'
        return struct.pack('<%df' % len(vals), *vals), 'F32'

    def lin(name, rows, cols, scale=None):
        s = scale if scale is not None else 1.0 / math.sqrt(cols)
        if a.shape:
            # numpy's PCG64 (a bit stream numpy keeps stable across versions,
            # NEP 19), seeded from the seed and the name, so a tensor's bytes
            # do not depend on the depth or on the order; made when written
            tag = '%d:%s' % (a.seed, name)
            tensors.append((name, [rows, cols], Lazy(2 * rows * cols, lambda: pcg_bf16(tag, rows * cols, s)), 'BF16'))
            return
        if rows * cols > 200000 and a.dtype == 'bf16':
            # made when written (one tensor in memory at a time): its bytes
            # depend on the seed and the name only, not on the order
            tag = '%d:%s' % (a.seed, name)
            tensors.append((name, [rows, cols], Lazy(2 * rows * cols, lambda: [shake_bf16(tag, rows * cols, s)]), 'BF16'))
            return
        data, dt = pack([rng.uniform(s) for _ in range(rows * cols)])
        tensors.append((name, [rows, cols], data, dt))

    def vec(name, n, center=1.0, spread=0.2):
        # --shape: a stream of its own per tensor (the depth changes no byte of layer 0 or the final norm)
        r = SplitMix(int.from_bytes(hashlib.sha256(('%d:%s' % (a.seed, name)).encode()).digest()[:8], 'little')) \
            if a.shape else rng
        data, dt = pack([center + r.uniform(spread) for _ in range(n)])
        tensors.append((name, [n], data, dt))

    lin('model.embed_tokens.weight', a.vocab, a.hidden, 0.5)
    for l in range(a.layers):
        p = 'model.layers.%d.' % l
        vec(p + 'input_layernorm.weight', a.hidden)
        lin(p + 'self_attn.q_proj.weight', a.heads * hd, a.hidden)
        lin(p + 'self_attn.k_proj.weight', a.kv_heads * hd, a.hidden)
        lin(p + 'self_attn.v_proj.weight', a.kv_heads * hd, a.hidden)
        if a.arch == 'qwen2':
            vec(p + 'self_attn.q_proj.bias', a.heads * hd, 0.0, 0.5)
            vec(p + 'self_attn.k_proj.bias', a.kv_heads * hd, 0.0, 0.5)
            vec(p + 'self_attn.v_proj.bias', a.kv_heads * hd, 0.0, 0.5)
        if a.arch == 'qwen3':
            vec(p + 'self_attn.q_norm.weight', hd)
            vec(p + 'self_attn.k_norm.weight', hd)
        lin(p + 'self_attn.o_proj.weight', a.hidden, a.heads * hd, 4.0 / math.sqrt(a.heads * hd))
        if a.arch == 'cis2-toy':
            g = [1.0 if a.toy_gain == 'ones' else 1.0 + toy_rng.uniform(0.75) for _ in range(a.hidden)]
            data, dt = pack(g)
            tensors.append((p + 'self_attn.o_gain.weight', [a.hidden], data, dt))
        vec(p + 'post_attention_layernorm.weight', a.hidden)
        lin(p + 'mlp.gate_proj.weight', a.inter, a.hidden)
        lin(p + 'mlp.up_proj.weight', a.inter, a.hidden)
        lin(p + 'mlp.down_proj.weight', a.hidden, a.inter, 4.0 / math.sqrt(a.inter))
    vec('model.norm.weight', a.hidden)
    if a.untied:
        lin('lm_head.weight', a.vocab, a.hidden)

    if a.ftz_window:
        tensors = ftz_window(a, tensors)
    header, offset = {}, 0
    tensors.sort(key=lambda t: t[0])
    for name, shape, data, dt in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    hb = json.dumps(header, separators=(',', ':'), sort_keys=True).encode()
    hb += b' ' * ((8 - len(hb) % 8) % 8)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, 'model.safetensors'), 'wb') as f:
        f.write(struct.pack('<Q', len(hb)))
        f.write(hb)
        for _, _, data, _ in tensors:
            if not isinstance(data, Lazy):
                f.write(data)
                continue
            for chunk in data.make():
                f.write(chunk)
    arch = {'llama': 'LlamaForCausalLM', 'qwen2': 'Qwen2ForCausalLM', 'qwen3': 'Qwen3ForCausalLM',
            'cis2-toy': 'Cis2ToyForCausalLM'}[a.arch]
    cfg = {"architectures": [arch], "model_type": a.arch, "hidden_act": "silu", "hidden_size": a.hidden,
           "intermediate_size": a.inter, "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
           "num_key_value_heads": a.kv_heads, "rms_norm_eps": a.eps,
           "rope_theta": int(a.theta) if a.theta == int(a.theta) else a.theta,
           "max_position_embeddings": a.max_pos, "tie_word_embeddings": not a.untied,
           "bos_token_id": bos, "eos_token_id": eos,
           "torch_dtype": {"bf16": "bfloat16", "f32": "float32", "f16": "float16"}[a.dtype], "vocab_size": a.vocab}
    if a.head_dim:
        cfg["head_dim"] = hd
    if rope_scaling:
        cfg["rope_scaling"] = rope_scaling
    for k in filter(None, a.drop_config.split(',')):
        cfg.pop(k, None)
    with open(os.path.join(a.out, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
        f.write('\n')
    tpath = os.path.join(a.out, 'tokenizer.json')
    if a.tokenizer:
        shutil.copyfile(a.tokenizer, tpath)
    else:
        with open(tpath, 'w', encoding='utf-8') as f:
            json.dump(make_tokenizer(min(a.vocab, 600)), f, ensure_ascii=False, indent=2)


def ftz_window(a, tensors):
    """The RMSNorm's x*inv lands in [FLT_MIN - 2^-151, FLT_MIN), where x86-64
    gives FLT_MIN (tiny after rounding: no) and aarch64's FZ alone gives 0.
    Every embedding row is (+-e0, +-FLT_MIN*(1+m*2^-23), ...): the tiny parts
    square to 0 on every ISA, so the sum of squares is e0^2 and inv =
    rsqrt(e0^2/16 + eps) is computed here exactly (binary32 steps, all normal);
    e0 ~ 4 is picked per row so that some m puts x*inv in the window. o_proj and
    down_proj are zero, so every layer's norms and the final norm see the
    embedding; the final norm's weight 2^120 on the tiny dims turns FLT_MIN
    into 2^-6, which moves every logit."""
    f32 = lambda x: struct.unpack('<f', struct.pack('<f', x))[0]
    edge, fmin = 2.0 ** -126 - 2.0 ** -151, 2.0 ** -126
    eps, H = f32(a.eps), a.hidden
    rows, hits = [], 0
    for t in range(a.vocab):
        for j in range(t * 5 % 97, 100000):
            e0 = f32(4.0 * (1 + j * 2.0 ** -21))
            ss = f32(e0 * e0)
            inv = f32(1.0 / f32(math.sqrt(f32(f32(ss / H) + eps))))
            win = [m for m in range(1, 512) if edge <= fmin * (1 + m * 2.0 ** -23) * inv < fmin]
            if win:
                break
        m = win[0]
        row = [e0 if t % 2 else -e0]
        for i in range(1, H):
            mm = m if i % 4 else (m - 1 if i % 8 else m + 1)  # a few just outside
            hits += mm == m
            v = fmin * (1 + mm * 2.0 ** -23)
            row.append(-v if (t + i) % 3 == 0 else v)
        rows += row
    assert hits > a.vocab
    zero = lambda n: struct.pack('<%df' % n, *([0.0] * n))
    out = []
    for name, shape, data, dt in tensors:
        n = shape[0] * (shape[1] if len(shape) > 1 else 1)
        if name == 'model.embed_tokens.weight':
            data = struct.pack('<%df' % n, *rows)
        elif name.endswith('o_proj.weight') or name.endswith('down_proj.weight'):
            data = zero(n)
        elif name.endswith('layernorm.weight'):
            data = struct.pack('<%df' % n, *([1.0] * n))
        elif name == 'model.norm.weight':
            data = struct.pack('<%df' % n, *([1.0] + [2.0 ** 120] * (n - 1)))
        out.append((name, shape, data, dt))
    return out


if __name__ == '__main__':
    main()
