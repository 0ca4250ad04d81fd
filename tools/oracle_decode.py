#!/usr/bin/env python3
"""Development cross-check: run ../shared/tools/cis2_oracle.py (an independent
stdlib reading of the spec) on a checkpoint and print the same lines as
`cis2 run`, so the two can be compared. Not used by `make test`.

  oracle_decode.py MODEL_DIR PROMPT_IDS N [ORACLE_DIR]
"""
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[4] if len(sys.argv) > 4 else os.path.join(here, '..', '..', 'shared', 'tools'))
import cis2_oracle as o

m = o.Model(sys.argv[1])
cfg = o.json.load(open(os.path.join(sys.argv[1], 'config.json')))
if cfg.get('model_type') == 'cis2-toy':
    # The test-only variant of docs/architecture.md: o_proj's output times
    # self_attn.o_gain.weight, one rounded multiply per element, before the
    # residual. The oracle's forward calls matvec by its global name.
    gains = {id(m.t['model.layers.%d.self_attn.o_proj.weight' % l]):
             m.t['model.layers.%d.self_attn.o_gain.weight' % l] for l in range(m.L)}
    plain = o.matvec

    def matvec(w, rows, cols, x):
        y = plain(w, rows, cols, x)
        g = gains.get(id(w))
        return y if g is None else [o.mul(y[i], g[i]) for i in range(rows)]
    o.matvec = matvec
prompt = [int(t) for t in sys.argv[2].split(',')]
out, wit, am = m.run(prompt, int(sys.argv[3]))
print('generated_token_ids=' + ','.join(map(str, out)))
print('argmax_digest=' + am)
print('CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=fp32' % (wit, len(prompt), len(out)))
