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
prompt = [int(t) for t in sys.argv[2].split(',')]
out, wit, am = m.run(prompt, int(sys.argv[3]))
print('generated_token_ids=' + ','.join(map(str, out)))
print('argmax_digest=' + am)
print('CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=fp32' % (wit, len(prompt), len(out)))
