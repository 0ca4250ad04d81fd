#!/usr/bin/env python3
"""Tokenizer benchmark (numbers only, never a test): runs `cis2 tokenize
--bench` REPEAT times on each workload and prints the median and min-max of
what it reports (wall and thread-CPU).

Workloads (written under OUT_DIR, default tests/tmp/tokbench):
  qwen-en     Qwen2's structure (NFC, Split with Qwen's regex, ByteLevel) over
              SmolLM2's vocab and merges, plus merges making the first 3000
              CJK ideographs and 3000 two-character words single tokens (as
              Qwen's own vocab does); English text: the CIS-2 spec x 60.
  qwen-zh     the same tokenizer on 2 MB of CJK text (random ideographs of
              that set, with punctuation and line breaks).
  smollm2-en  SmolLM2's own tokenizer.json on the English text.
  added-100k  SmolLM2's tokenizer plus 100000 added tokens: the load time.
  lt-20k      20000 added tokens, all starting with '<'; encoding 100 kB of '<'.

Usage: tools/tok_bench.py [--cis2 ./cis2] [--repeat 5] [OUT_DIR]
Needs ../shared/models/SmolLM2-135M/tokenizer.json (or CIS2_SMOLLM2_DIR).
"""
import argparse, json, os, random, statistics, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tok_reference import B2U, REGEX  # noqa: E402  (GPT-2's byte map; the regexes)


def make_inputs(out, smol):
    b2u = B2U
    src = json.load(open(smol, encoding='utf-8'))
    q = json.loads(json.dumps(src))
    q['normalizer'] = {'type': 'NFC'}
    bl = {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': False,
          'use_regex': False}
    q['pre_tokenizer'] = {'type': 'Sequence', 'pretokenizers': [
        {'type': 'Split', 'pattern': {'Regex': REGEX['qwen']}, 'behavior': 'Isolated',
         'invert': False},
        bl]}
    q['post_processor'] = bl
    m = q['model']
    m['continuing_subword_prefix'] = m['end_of_word_suffix'] = ''
    vocab = m['vocab']
    for b in range(256):  # SmolLM2 lacks 21 byte symbols; Qwen's vocab has all 256
        vocab.setdefault(b2u[b], len(vocab))
    have = {tuple(x.split(' ', 1)) if isinstance(x, str) else tuple(x) for x in m['merges']}
    cjk = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    rng = random.Random(1)
    words = [(rng.choice(cjk[:800]), rng.choice(cjk[:800])) for _ in range(3000)]
    new = []
    for ch in cjk:  # highest priority, as a CJK-trained vocab would rank them
        u = [b2u[b] for b in ch.encode()]
        new += [(u[0], u[1]), (u[0] + u[1], u[2])]
    for a, b in words:
        new.append((''.join(b2u[c] for c in a.encode()), ''.join(b2u[c] for c in b.encode())))
    merges = []
    for a, b in new:
        if (a, b) in have: continue
        have.add((a, b))
        vocab.setdefault(a + b, len(vocab))
        merges.append([a, b])
    m['merges'] = merges + [x.split(' ', 1) if isinstance(x, str) else x for x in m['merges']]
    json.dump(q, open(os.path.join(out, 'qwen.json'), 'w', encoding='utf-8'), ensure_ascii=False)
    spec = os.path.join(os.path.dirname(smol), '..', '..', 'spec', 'CIS2_SPEC_v0.3b.md')
    en = open(spec, encoding='utf-8').read() if os.path.exists(spec) else \
        open(__file__, encoding='utf-8').read() * 40
    open(os.path.join(out, 'en.txt'), 'w', encoding='utf-8').write(en * 60)
    zh, size = [], 0
    while size < 700000:
        k = rng.randint(8, 30)
        zh.append(''.join(rng.choice(cjk[:2500]) for _ in range(k)) + rng.choice('，。、；：？！'))
        size += k + 1
        if rng.random() < 0.1: zh.append('\n')
    open(os.path.join(out, 'zh.txt'), 'w', encoding='utf-8').write(''.join(zh))
    for k, name in ((100000, 'added-100k.json'), (20000, 'added-20k.json')):
        d = json.loads(json.dumps(src))
        d['added_tokens'] = src['added_tokens'] + [
            {'id': len(src['model']['vocab']) + i, 'content': '<extra_%d>' % i,
             'single_word': False, 'lstrip': False, 'rstrip': False, 'normalized': False,
             'special': True} for i in range(k)]
        json.dump(d, open(os.path.join(out, name), 'w', encoding='utf-8'), ensure_ascii=False)
    open(os.path.join(out, 'lt.txt'), 'w').write('<' * 100000)
    open(os.path.join(out, 'x.txt'), 'w').write('x')


def bench(cis2, tok, text, repeat):
    rows = []
    for _ in range(repeat):
        o = subprocess.run([cis2, 'tokenize', '--tokenizer', tok, '--bench', text],
                           capture_output=True, text=True)
        if o.returncode: sys.exit('%s: %s' % (tok, o.stderr.strip()))
        kv = dict(w.split('=', 1) for w in o.stdout.split() if '=' in w)
        if kv.get('round_trip') != 'ok': sys.exit('%s: round trip failed' % tok)
        rows.append(kv)
    return rows


def show(name, rows, key, unit):
    v = sorted(float(r[key]) for r in rows)
    print('%-11s %-21s median %8.2f %-5s (min %.2f, max %.2f, %d runs)' %
          (name, key, statistics.median(v), unit, v[0], v[-1], len(v)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out', nargs='?', default='tests/tmp/tokbench')
    ap.add_argument('--cis2', default='./cis2')
    ap.add_argument('--repeat', type=int, default=5)
    a = ap.parse_args()
    smol = None
    for d in (os.environ.get('CIS2_SMOLLM2_DIR', ''), 'models/SmolLM2-135M',
              '../shared/models/SmolLM2-135M'):
        if d and os.path.exists(os.path.join(d, 'tokenizer.json')):
            smol = os.path.join(d, 'tokenizer.json')
            break
    if not smol: sys.exit('no SmolLM2 tokenizer.json (set CIS2_SMOLLM2_DIR)')
    os.makedirs(a.out, exist_ok=True)
    make_inputs(a.out, smol)
    j = lambda f: os.path.join(a.out, f)
    for name, tok, text in (('qwen-en', j('qwen.json'), j('en.txt')),
                            ('qwen-zh', j('qwen.json'), j('zh.txt')),
                            ('smollm2-en', smol, j('en.txt'))):
        rows = bench(a.cis2, tok, text, a.repeat)
        print('%-11s %d bytes, %s tokens' % (name, int(rows[0]['encode_bytes']), rows[0]['tokens']))
        show(name, rows, 'encode_MB_per_s', 'MB/s')
        show(name, rows, 'encode_cpu_MB_per_s', 'MB/s')
    rows = bench(a.cis2, j('added-100k.json'), j('x.txt'), a.repeat)
    show('added-100k', rows, 'load_ms', 'ms')
    show('added-100k', rows, 'load_cpu_ms', 'ms')
    rows = bench(a.cis2, j('added-20k.json'), j('lt.txt'), a.repeat)
    for r in rows: r['encode_s'] = float(r['encode_ms']) / 1e3
    show('lt-20k', rows, 'encode_ms', 'ms')


main()
