#!/usr/bin/env python3
"""Second readings of docs/rope_scaling.md's llama3 table, and its distance from Hugging Face's.

  /usr/bin/python3 tools/rope_scaling_check.py HEAD_DIM THETA FACTOR LOW HIGH ORIGINAL

Prints key=value lines:
  docs_numpy_digest   the §7.2 digest of the docs' step list read with numpy float32 scalars
                      over the pinned §7.1 table (tools/torch_trace.py's exp_pinned/ln_pinned)
  armb_digest         the same table through torch_trace.py's llama3_pinned (arm B)
  hf_on_pinned_digest Hugging Face's expression (llama3_hf, torch float32 on the CPU) over the
                      same pinned table
  hf_differs          entries where HF's whole computation (its own theta ** x table, then its
                      llama3 expression) differs from cis2's, and max_ulp, their largest distance
Needs Debian's python3-torch and python3-numpy.
"""
import hashlib, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch_trace as tt  # noqa: E402


def digest(v):
    return hashlib.sha256(np.asarray(v, dtype="<f4").tobytes()).hexdigest()


def docs_numpy(inv, factor, low, high, old):
    """docs/rope_scaling.md, step by step, numpy float32 scalars (one IEEE operation each)."""
    f32 = np.float32
    F, LO, CTX = f32(factor), f32(low), f32(old)
    LW, HW, SPAN = f32(old / low), f32(old / high), f32(high - low)
    TWO_PI = np.array([0x40C90FDB], dtype=np.uint32).view(np.float32)[0]
    out = []
    for v in inv:
        v = f32(v)
        wl = f32(f32(1) / v) * TWO_PI
        if wl > LW:
            out.append(v / F)
        elif wl < HW:
            out.append(v)
        else:
            r = f32(f32(1) / wl) * CTX
            s = (r - LO) / SPAN
            c = ((f32(1) - s) * v) / F
            out.append(c + s * v)
    return np.array(out, dtype=np.float32)


def ulps(a, b):  # positive finite float32 arrays
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__.split("\n\n")[1])
    hd, theta, factor, low, high = int(sys.argv[1]), float(sys.argv[2]), *map(float, sys.argv[3:6])
    old = int(sys.argv[6])
    rs = {"factor": factor, "low_freq_factor": low, "high_freq_factor": high,
          "original_max_position_embeddings": old}
    torch.set_flush_denormal(True)
    th = torch.tensor(np.float32(theta), dtype=torch.float32)
    frac = tt.div(torch.arange(0, hd, 2, dtype=torch.float32), torch.tensor(float(hd)))
    pinned = tt.exp_pinned(-(frac * tt.ln_pinned(th.reshape(1))))  # §7.1
    ours = docs_numpy(pinned.numpy(), factor, low, high, old)
    print("docs_numpy_digest=" + digest(ours))
    print("armb_digest=" + digest(tt.llama3_pinned(pinned, rs).numpy()))
    print("hf_on_pinned_digest=" + digest(tt.llama3_hf(pinned.clone(), rs).numpy()))
    torch.set_flush_denormal(False)
    hf_base = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    hf = tt.llama3_hf(hf_base, rs).numpy()
    d = ulps(hf, ours)
    db = ulps(hf_base.numpy(), pinned.numpy())
    print("hf_differs=%d/%d max_ulp=%d" % (int((d != 0).sum()), len(d), int(d.max())))
    print("hf_base_differs=%d/%d max_ulp=%d" % (int((db != 0).sum()), len(db), int(db.max())))
    print("ulp_by_entry=" + ",".join(str(int(x)) for x in d))


if __name__ == "__main__":
    main()
