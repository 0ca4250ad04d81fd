#!/usr/bin/env python3
"""A second reading of the tokenizer (spec §3.1), written from the HF
`tokenizers` semantics and independent of src/model/*.c (stdlib only):

  added tokens   normalized=false ones found in the raw text (leftmost, then
                 longest: aho-corasick LeftmostLongest); each piece between
                 them normalized; normalized=true ones (their content
                 normalized too) found in those pieces.
  normalizer     NFC by Python's unicodedata.normalize.
  pre-tokenizer  Split(Regex, Isolated): the pattern run by Python's `re`
                 (a backtracking engine with Oniguruma's leftmost-first
                 alternation) after spelling \\p{L}, \\p{N}, \\s as explicit
                 classes from unicodedata and White_Space; matches and the
                 gaps between them are pieces. Digits(individual_digits): each
                 N character alone. ByteLevel: GPT-2's regex when use_regex.
  model          byte->unicode map, then the lowest-rank merge repeatedly
                 (naive, leftmost on ties), vocab lookup.
  decoder        ByteLevel: each token's characters through the inverse byte
                 map when all are in it, else its own UTF-8.

With libonig.so.5 (Debian libonig5, Oniguruma 6.9.8: the engine tokenizers
links), `check` also runs every pattern through Oniguruma itself.

Unicode versions: unicodedata is UCD 14.0 here, tokenizers' NFC tables are
UCD 9.0 (unicode-normalization-alignments 0.1.12), cis2's are 15.1. For code
points assigned in Unicode 9.0 or earlier all three agree (the normalization
stability policy; the L/N/White_Space classes of those code points did not
change), so the random strings below are drawn only from such code points;
newer ones are covered by cis2's own tests (NormalizationTest.txt, class
tables).

Usage:
  tok_reference.py make-json OUT.json {qwen|llama3|gpt2split|smollm2}
  tok_reference.py cases TOKENIZER.json SEED N > CASES   # hex text, ids, hex decode
  tok_reference.py encode TOKENIZER.json TEXT
  tok_reference.py check TOKENIZER.json SEED N          # re vs Oniguruma splits
  tok_reference.py fixtures DIR     # tests/fixtures/tokenizer/: the four synthetic
                                    # tokenizers, their cases, regex split cases
"""
import json, random, re, sys, unicodedata

WS = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F,
      0x3000] + list(range(0x2000, 0x200B))
REGEX = {
    'gpt2': r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    'qwen': r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
            r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    'llama3': r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]"
              r"+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}


# ------------------------------------------------------------------ classes
def _class_body(pred):
    out, lo = [], None
    for cp in range(0x110000 + 1):
        inside = cp < 0x110000 and not (0xD800 <= cp < 0xE000) and pred(cp)
        if inside and lo is None: lo = cp
        if not inside and lo is not None:
            hi = cp - 1
            out.append(re.escape(chr(lo)) + ('-' + re.escape(chr(hi)) if hi > lo else ''))
            lo = None
    return ''.join(out)


_BODY = {}


def body(name):
    if name not in _BODY:
        if name == 'L':
            _BODY[name] = _class_body(lambda c: unicodedata.category(chr(c))[0] == 'L')
        elif name == 'N':
            _BODY[name] = _class_body(lambda c: unicodedata.category(chr(c))[0] == 'N')
        else:
            _BODY[name] = ''.join(re.escape(chr(c)) for c in WS)
    return _BODY[name]


def translate(pat):
    """An Oniguruma pattern using \\p{L} \\p{N} \\s \\S as a Python `re` pattern."""
    out, i, in_class = [], 0, False
    while i < len(pat):
        c = pat[i]
        if c == '\\':
            t = pat[i:i + 5]
            if t in ('\\p{L}', '\\p{N}'):
                b = body(t[3])
                out.append(b if in_class else '[' + b + ']')
                i += 5
                continue
            t = pat[i:i + 2]
            if t == '\\s':
                out.append(body('S') if in_class else '[' + body('S') + ']')
            elif t == '\\S':
                assert not in_class
                out.append('[^' + body('S') + ']')
            else:
                out.append(t)
            i += 2
            continue
        if c == '[' and not in_class: in_class = True
        elif c == ']' and in_class: in_class = False
        out.append(c)
        i += 1
    return re.compile(''.join(out))


def is_n(ch): return unicodedata.category(ch)[0] == 'N'


# --------------------------------------------------------------- byte level
def bytes_to_unicode():
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()
U2B = {v: k for k, v in B2U.items()}


# --------------------------------------------------------------- tokenizer
class Tokenizer:
    def __init__(self, spec):
        self.nfc = spec.get('normalizer') is not None
        if self.nfc: assert spec['normalizer'] == {'type': 'NFC'}
        pt = spec['pre_tokenizer']
        steps = pt['pretokenizers'] if pt['type'] == 'Sequence' else [pt]
        self.steps = []
        for s in steps:
            if s['type'] == 'Digits':
                assert s['individual_digits']
                self.steps.append(('digits', None))
            elif s['type'] == 'Split':
                assert s['behavior'] == 'Isolated' and not s['invert']
                self.steps.append(('split', s['pattern']['Regex']))
            else:
                assert s['type'] == 'ByteLevel' and not s['add_prefix_space']
                if s.get('use_regex', True): self.steps.append(('split', REGEX['gpt2']))
        self.compiled = {p: translate(p) for k, p in self.steps if k == 'split'}
        m = spec['model']
        self.vocab = m['vocab']
        self.inv = {v: k for k, v in self.vocab.items()}
        self.ranks = {}
        for r, mg in enumerate(m['merges']):
            a, b = mg.split(' ', 1) if isinstance(mg, str) else mg
            self.ranks[(a, b)] = r
        self.added = [(a['content'], a['id'], a.get('normalized', True))
                      for a in spec.get('added_tokens') or []]
        self.added_by_id = {i: c for c, i, _ in self.added}
        self.pat = [{}, {}]  # pass -> {pattern: id}
        for c, i, norm in self.added:
            self.pat[1 if norm else 0][self.normalize(c) if norm else c] = i

    def normalize(self, s):
        return unicodedata.normalize('NFC', s) if self.nfc else s

    @staticmethod
    def find_added(text, pats):
        """Leftmost-longest non-overlapping matches: [(start, end, id)]."""
        out, i = [], 0
        lens = sorted({len(p) for p in pats}, reverse=True)
        while i < len(text):
            hit = None
            for l in lens:
                if text[i:i + l] in pats:
                    hit = (i, i + l, pats[text[i:i + l]])
                    break
            if hit:
                out.append(hit)
                i = hit[1]
            else:
                i += 1
        return out

    def split(self, piece, k=0):
        if not piece: return []
        if k == len(self.steps): return [piece]
        kind, p = self.steps[k]
        parts = []
        if kind == 'digits':
            cur = ''
            for ch in piece:
                if is_n(ch):
                    if cur: parts.append(cur)
                    parts.append(ch)
                    cur = ''
                else:
                    cur += ch
            if cur: parts.append(cur)
        else:
            last = 0
            for m in self.compiled[p].finditer(piece):
                if m.start() > last: parts.append(piece[last:m.start()])
                parts.append(m.group())
                last = m.end()
            if last < len(piece): parts.append(piece[last:])
        return [w for part in parts for w in self.split(part, k + 1)]

    def bpe(self, word):
        syms = [B2U[b] for b in word.encode('utf-8')]
        while len(syms) > 1:
            best = None
            for i in range(len(syms) - 1):
                r = self.ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best[0]): best = (r, i)
            if best is None: break
            i = best[1]
            syms[i:i + 2] = [syms[i] + syms[i + 1]]
        return [self.vocab[s] for s in syms]

    def pieces(self, text):
        """[(kind, text or id)] after the added tokens and the normalizer."""
        out, last = [], 0
        raw = self.find_added(text, self.pat[0])
        for s, e, i in raw + [(len(text), len(text), None)]:
            gap = self.normalize(text[last:s])
            g = 0
            for s2, e2, i2 in self.find_added(gap, self.pat[1]) + [(len(gap), len(gap), None)]:
                if s2 > g: out.append(('text', gap[g:s2]))
                if i2 is not None: out.append(('id', i2))
                g = e2
            if i is not None: out.append(('id', i))
            last = e
        return out

    def encode(self, text):
        ids = []
        for kind, v in self.pieces(text):
            if kind == 'id': ids.append(v)
            else:
                for w in self.split(v): ids += self.bpe(w)
        return ids

    def decode(self, ids):
        out = b''
        for i in ids:
            t = self.added_by_id.get(i, self.inv.get(i))
            if all(ch in U2B for ch in t): out += bytes(U2B[ch] for ch in t)
            else: out += t.encode('utf-8')
        return out


# ------------------------------------------------------- synthetic tokenizers
CORPUS = """Once upon a time, there was a little tokenizer that could. It's the one we'll test;
they've said it'd work. THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!  Numbers: 12345, 3.14159,
1,000,000 and 2024-06-01. def encode(self, text):\\n    return [ord(c) for c in text]  # ok
Le café était très épicé. Übermäßig schöne Grüße aus Köln. El niño comió piña. Ça va?
Ἐν ἀρχῇ ἦν ὁ λόγος. Привет, как дела? Всё хорошо. שָׁלוֹם עֲלֵיכֶם. مرحبا بالعالم ١٢٣.
नमस्ते दुनिया क़िला। 你好，世界！我们今天学习分词。東京は日本の首都です。がぎぐげご。
안녕하세요 세계. 한국어 문장입니다. Emoji 🙂👍🏽 and ZWJ 👩‍💻. Tabs\tand\tnewlines\r\n\n\n
“Quotes” — dashes… ½ ⅷ ² Ⅻ. ȘȚ ǅ ﬁ ｆｕｌｌ. Ω Å ệ ệ. <html><body>Hi</body></html>
"""


def train(tok, n_merges):
    words = {}
    for kind, v in tok.pieces(CORPUS):
        if kind != 'text': continue
        for w in tok.split(v):
            key = tuple(B2U[b] for b in w.encode('utf-8'))
            words[key] = words.get(key, 0) + 1
    merges = []
    words = {k: c for k, c in words.items()}
    for _ in range(n_merges):
        pairs = {}
        for w, c in words.items():
            for a, b in zip(w, w[1:]): pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs: break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        nw = {}
        for w, c in words.items():
            o, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    o.append(w[i] + w[i + 1])
                    i += 2
                else:
                    o.append(w[i])
                    i += 1
            nw[tuple(o)] = nw.get(tuple(o), 0) + c
        words = nw
    return merges


def make_json(structure):
    bl = lambda regex: {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': False,
                        'use_regex': regex}
    split = lambda k: {'type': 'Split', 'pattern': {'Regex': REGEX[k]}, 'behavior': 'Isolated',
                       'invert': False}
    pre = {
        'qwen': {'type': 'Sequence', 'pretokenizers': [split('qwen'), bl(False)]},
        'llama3': {'type': 'Sequence', 'pretokenizers': [split('llama3'), bl(False)]},
        'gpt2split': {'type': 'Sequence', 'pretokenizers': [split('gpt2'), bl(False)]},
        'smollm2': {'type': 'Sequence', 'pretokenizers': [
            {'type': 'Digits', 'individual_digits': True}, bl(True)]},
    }[structure]
    spec = {
        'version': '1.0', 'truncation': None, 'padding': None, 'added_tokens': [],
        'normalizer': {'type': 'NFC'} if structure in ('qwen', 'llama3') else None,
        'pre_tokenizer': pre,
        'post_processor': bl(False) if structure != 'smollm2' else None,
        'decoder': bl(False),
        'model': {'type': 'BPE', 'dropout': None, 'unk_token': None,
                  'continuing_subword_prefix': '', 'end_of_word_suffix': '', 'fuse_unk': False,
                  'byte_fallback': False, 'ignore_merges': False, 'vocab': {}, 'merges': []},
    }
    vocab = {B2U[b]: b for b in range(256)}
    spec['model']['vocab'] = vocab
    tok = Tokenizer(spec)
    merges = train(tok, 400)
    for a, b in merges: vocab.setdefault(a + b, len(vocab))
    spec['model']['merges'] = [[a, b] for a, b in merges]
    # added tokens: Qwen's specials, Qwen3's non-special ones, a prefix of
    # another (leftmost-longest), a token already in the vocab, and
    # normalized=true ones whose content NFC changes
    added = [('<|endoftext|>', True, False), ('<|im_start|>', True, False),
             ('<|im_end|>', True, False), ('<think>', False, False), ('</think>', False, False),
             ('<|im', False, False), ('<|fim_prefix|>', True, False),
             ('Cafe\u0301 au lait', False, True), ('<norm x>', False, True)]
    inv = {v: k for k, v in vocab.items()}
    in_vocab = next((k for k in vocab if len(k) > 3 and all(c.isalpha() and c.isascii()
                                                            for c in k)), None)
    if in_vocab: added.insert(3, (in_vocab, False, False))
    nid = len(vocab)
    for content, special, norm in added:
        if content in vocab: tid = vocab[content]
        else:
            tid = nid
            nid += 1
        spec['added_tokens'].append({'id': tid, 'content': content, 'single_word': False,
                                     'lstrip': False, 'rstrip': False, 'normalized': norm,
                                     'special': special})
    return spec


# ------------------------------------------------------------ random strings
# Code points assigned in Unicode <= 9.0 only (checked against DerivedAge.txt
# by `check`): every reading here agrees on them (see the module comment).
POOL = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
        (0x591, 0x5EE), (0x5F0, 0x5F4), (0x600, 0x61C), (0x61E, 0x6FF), (0x900, 0x97F),
        (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x1F00, 0x1FFE), (0x2000, 0x206F), (0x2100, 0x218B),
        (0x3000, 0x30FF), (0x4E00, 0x4F80), (0xAC00, 0xAD00), (0xF900, 0xFA2D), (0xFB1D, 0xFB4F),
        (0xFF01, 0xFF5E), (0x1D15E, 0x1D164), (0x1F300, 0x1F64F)]
FRAGMENTS = ["it's", "IT'S", "we'LL", "THEY'VE", "I'M", "'D", "'Re", "'\u017f", "\u017f's", "'",
             "''s", "don't", "12345", "3.14", " 42", "٣٤", "½", "Ⅻ", "  ", "   ", "\t", " \t ",
             "\n", "\r\n", "\n\n\n", " \n ", "\u00a0", "\u3000", "\u2028", "\u0085", "\x0b",
             "e\u0301", "A\u030a", "a\u0302\u0323", "a\u0323\u0302", "\u1100\u1161\u11a8",
             "\uac00\u11a8", "\u0958", "\u2126", "\u212b", "\u0344", "\u0f73", "\u0340",
             "\u304b\u3099", "\u30cf\u309a", "\u1e9b\u0323", "q\u0307\u0323",
             "\u05e9\u05c1\u05bc", "\u0627\u0653", "\U0001d15e", "\U0001d160", "\ufb1d",
             "\u00e9\u0301", "\u0301", "\u0301\u0301a", "<|endoftext|>", "<|im_start|>",
             "<|im_end|>", "<|im", "<|im_end", "<think>", "</think>", "<|fim_prefix|>",
             "Cafe\u0301 au lait", "Caf\u00e9 au lait", "<norm x>", "<norm", "👩‍💻", "🙂👍🏽",
             "Hello", " world", "WORLD", "$x", "?!", ".Hi", "\u4f60\u597d", "—", "…", "“q”",
             "ǅ", "ﬁ", "ｆｕｌｌ", "x" * 30, "\\n", "<>", "a1b2", "\u0660\u0661"]


def random_text(rng):
    pool = [(lo, hi) for lo, hi in POOL]
    out = []
    for _ in range(rng.randint(1, 14)):
        r = rng.random()
        if r < 0.55:
            out.append(rng.choice(FRAGMENTS))
        elif r < 0.85:
            lo, hi = rng.choice(pool)
            s = ''
            for _ in range(rng.randint(1, 6)):
                c = chr(rng.randint(lo, hi))
                if unicodedata.category(c) not in ('Cn', 'Cs', 'Co'): s += c
            out.append(s)
        else:
            out.append(rng.choice(CORPUS.split()))
    return ''.join(out)


EDGE = ["", " ", "  ", "\n", "\r\n", " \r\n ", "x  ", "  x", "\t\tx", "'s", "'S", "'\u017f",
        "'ll'LL'Ll", "''", "'", "a'", "'a", "e\u0301", "\u0301", "\u0301e", "<|im_end|>\u0301",
        "e<|im_end|>\u0301", "e\u0301<|im_end|>", "Cafe\u0301 au lait!", "Caf\u00e9 au lait",
        "Cafe\u0301 au lai", "<|im_start|>user\nhi<|im_end|>\n", "<|im<|im_end|>", "<|i",
        "<think>x</think>", "1234567", " 1 2 ", "a\u0302\u0323", "\u1100\u1161", "\uac00\u11a8",
        "\u0958\u093c", "\u2126\u212b", "\U0001d160\U0001d15e", "x\n\n\ny", "x \n\n y",
        "x\u00a0\u00a0y", "x\u3000y", "\u00a0", " \u00a0x", "$100", " $x", "\r", "a\rb",
        "?\n\n", " ?\r\n", "..\n", "<norm x><norm x>", "\u304b\u3099\u304b\u3099",
        "Hello World 12 it's 'Twas", "x" * 200, "\u4f60\u597d\u4e16\u754c" * 10]
# one text over 4 kB of repeated words: cis2 caches word ids on texts that long
EDGE.append(' '.join(FRAGMENTS) * 6 + CORPUS * 2)


def cases(path, seed, n):
    spec = json.load(open(path, encoding='utf-8'))
    tok = Tokenizer(spec)
    rng = random.Random(seed)
    texts = EDGE + [random_text(rng) for _ in range(n)]
    for t in texts:
        ids = tok.encode(t)
        print('%s\t%s\t%s' % (t.encode('utf-8').hex(), ','.join(map(str, ids)),
                              tok.decode(ids).hex()))


# ------------------------------------------------------------------ Oniguruma
def onig_splitter(pattern):
    import ctypes
    lib = ctypes.CDLL('libonig.so.5')

    class Region(ctypes.Structure):
        _fields_ = [('allocated', ctypes.c_int), ('num_regs', ctypes.c_int),
                    ('beg', ctypes.POINTER(ctypes.c_int)), ('end', ctypes.POINTER(ctypes.c_int))]

    enc = ctypes.addressof(ctypes.c_char.in_dll(lib, 'OnigEncodingUTF8'))
    syn = ctypes.addressof(ctypes.c_char.in_dll(lib, 'OnigSyntaxRuby'))  # the onig crate's default
    lib.onig_initialize((ctypes.c_void_p * 1)(enc), 1)
    lib.onig_region_new.restype = ctypes.POINTER(Region)
    vp = ctypes.c_void_p
    lib.onig_new.argtypes = [ctypes.POINTER(vp), vp, vp, ctypes.c_uint, vp, vp, vp]
    lib.onig_search.argtypes = [vp, vp, vp, vp, vp, ctypes.POINTER(Region), ctypes.c_uint]
    pb = pattern.encode('utf-8')
    pbuf = ctypes.create_string_buffer(pb, len(pb))
    reg = vp()
    a = ctypes.addressof(pbuf)
    assert lib.onig_new(ctypes.byref(reg), a, a + len(pb), 0, enc, syn, None) == 0
    region = lib.onig_region_new()
    lib.onig_version.restype = ctypes.c_char_p

    def split(s):
        b = s.encode('utf-8')
        buf = ctypes.create_string_buffer(b, len(b) + 1)
        a0, pos, parts, last = ctypes.addressof(buf), 0, [], 0
        while pos < len(b):
            if lib.onig_search(reg, a0, a0 + len(b), a0 + pos, a0 + len(b), region, 0) < 0: break
            st, en = region.contents.beg[0], region.contents.end[0]
            if st > last: parts.append(b[last:st].decode())
            parts.append(b[st:en].decode())
            last = pos = en if en > st else en + 1
        if last < len(b): parts.append(b[last:].decode())
        return parts

    return split, lib.onig_version().decode()


def check(path, seed, n):
    spec = json.load(open(path, encoding='utf-8'))
    tok = Tokenizer(spec)
    try:
        ages = {}
        for line in open('/usr/share/unicode/DerivedAge.txt', encoding='utf-8'):
            m = re.match(r'([0-9A-F]+)(?:\.\.([0-9A-F]+))?\s*;\s*([\d.]+)', line)
            if m:
                for c in range(int(m.group(1), 16), int(m.group(2) or m.group(1), 16) + 1):
                    ages[c] = float(m.group(3))
        late = [hex(c) for lo, hi in POOL for c in range(lo, hi + 1) if ages.get(c, 0) > 9.0
                and unicodedata.category(chr(c)) not in ('Cn', 'Cs', 'Co')]
        late += [hex(ord(c)) for t in EDGE + FRAGMENTS + CORPUS.split() for c in t
                 if ages.get(ord(c), 0) > 9.0]
        assert not late, 'POOL has code points newer than Unicode 9.0: %s' % late[:8]
        print('pool: every code point is Unicode <= 9.0 (DerivedAge.txt)')
    except OSError:
        print('pool: DerivedAge.txt not installed, age not checked')
    try:
        splitters = {p: onig_splitter(p) for k, p in tok.steps if k == 'split'}
    except OSError:
        print('SKIP-ONIG libonig.so.5 not installed')
        return 0
    rng = random.Random(seed)
    texts = EDGE + FRAGMENTS + [random_text(rng) for _ in range(n)]
    bad = total = 0
    for t in texts:
        for kind, v in tok.pieces(t):
            if kind != 'text': continue
            for p, (split, ver) in splitters.items():
                mine = [m.group() for m in tok.compiled[p].finditer(v)]
                theirs = split(v)
                total += 1
                if ''.join(mine) != v or mine != theirs:
                    bad += 1
                    if bad <= 5: print('MISMATCH %r: re %r onig %r' % (v, mine, theirs))
    print('onig %s: %d pieces split, %d mismatches' % (splitters and list(splitters.values())[0][1],
                                                       total, bad))
    return 1 if bad else 0


def splits(kind, seed, n):
    """Texts and the byte lengths of the pieces REGEX[kind] splits them into."""
    rx = translate(REGEX[kind])
    rng = random.Random(seed)
    for t in EDGE + FRAGMENTS + [random_text(rng) for _ in range(n)]:
        lens, last = [], 0
        for m in rx.finditer(t):
            assert m.start() == last  # these patterns leave no gaps
            lens.append(len(m.group().encode('utf-8')))
            last = m.end()
        assert last == len(t)
        yield '%s\t%s' % (t.encode('utf-8').hex(), ','.join(map(str, lens)))


# Everything tests/fixtures/tokenizer/ holds, and how it was made.
FIXTURES = [('qwen', 18, 600), ('llama3', 3, 200), ('gpt2split', 2, 200), ('smollm2', 1, 200)]


def fixtures(out):
    import contextlib, io, os
    os.makedirs(out, exist_ok=True)
    for name, seed, n in FIXTURES:
        path = os.path.join(out, name + '.json')
        main(['make-json', path, name])
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            cases(path, seed, n)
        open(os.path.join(out, name + '.cases'), 'w', encoding='utf-8').write(buf.getvalue())
    for kind in ('gpt2', 'qwen', 'llama3'):
        with open(os.path.join(out, 'splits-%s.txt' % kind), 'w', encoding='utf-8') as f:
            for line in splits(kind, 7, 400): f.write(line + '\n')


def main(argv):
    if len(argv) == 2 and argv[0] == 'fixtures':
        fixtures(argv[1])
        return 0
    if len(argv) >= 3 and argv[0] == 'make-json':
        spec = make_json(argv[2])
        with open(argv[1], 'w', encoding='utf-8') as f:
            json.dump(spec, f, ensure_ascii=False, indent=1)
            f.write('\n')
        return 0
    if len(argv) == 4 and argv[0] == 'cases':
        cases(argv[1], int(argv[2]), int(argv[3]))
        return 0
    if len(argv) == 3 and argv[0] == 'encode':
        tok = Tokenizer(json.load(open(argv[1], encoding='utf-8')))
        print(','.join(map(str, tok.encode(argv[2]))))
        return 0
    if len(argv) == 4 and argv[0] == 'check':
        return check(argv[1], int(argv[2]), int(argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
