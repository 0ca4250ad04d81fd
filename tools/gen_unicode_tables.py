#!/usr/bin/env python3
"""Generate src/model/unicode_tables.c: the Unicode data the tokenizer needs,
from the Unicode Character Database (never from the host's locale or Python's
own unicodedata).

Pre-tokenizer classes (spec §3.1.4):
  L  = general category Lu/Ll/Lt/Lm/Lo     (regex \\p{L})
  N  = general category Nd/Nl/No           (regex \\p{N}; Digits' char::is_numeric)
  WS = the White_Space property (25 code points; regex \\s)

NFC normalizer (Qwen2/Qwen3 tokenizer.json, UAX #15):
  ccc      Canonical_Combining_Class, ranges of the non-zero values
  decomp   canonical decomposition mappings, one level (Hangul is arithmetic)
  comp     primary composites: every two-code-point canonical decomposition
           whose composite is not Full_Composition_Exclusion (the
           exclusions file, singletons and non-starter decompositions)
  active   code points after which/at which NFC may change the text: ccc != 0
           or NFC_Quick_Check != Yes. Every other code point is a boundary:
           NFC(x + y) = NFC(x) + NFC(y) when y starts with one (checked below).

Inputs: UnicodeData.txt, PropList.txt, CompositionExclusions.txt and, as a
cross-check of what is derived here, DerivedNormalizationProps.txt (Debian:
`apt-get install unicode-data`, /usr/share/unicode/, UCD 15.0.0). The target
is UCD 15.1.0. What 15.1 adds over 15.0 is 627 code points: CJK Unified
Ideographs Extension I U+2EBF0..U+2EE5D (622, Lo), the ideographic
description characters U+2FFC..U+2FFF and U+31EF (So). None is White_Space
or numeric, none has a decomposition or a non-zero combining class, and the
stability policy forbids changing those properties of assigned characters;
so 15.1 = 15.0 + Extension I as letters (added below). NFC is unaffected.

Usage: tools/gen_unicode_tables.py [UCD_DIR] | clang-format --assume-filename=x.c \\
           > src/model/unicode_tables.c
"""
import os, re, sys

UCD = sys.argv[1] if len(sys.argv) > 1 else '/usr/share/unicode'
OTHER, L, N, WS = 0, 1, 2, 3
NAMES = {L: 'CIS2_UC_L', N: 'CIS2_UC_N', WS: 'CIS2_UC_WS'}
SBASE, LBASE, VBASE, TBASE, LCOUNT, VCOUNT, TCOUNT = 0xAC00, 0x1100, 0x1161, 0x11A7, 19, 21, 28
SCOUNT = LCOUNT * VCOUNT * TCOUNT


def ucd(name):
    return open(os.path.join(UCD, name), encoding='utf-8')


def ranges_of(path, prop):
    """Code points listed for `prop` in a PropList-style file."""
    out = set()
    with ucd(path) as f:
        for line in f:
            m = re.match(r'([0-9A-F]+)(?:\.\.([0-9A-F]+))?\s*;\s*([A-Za-z_]+)\s*(?:;\s*(\w+))?',
                         line)
            if not m or m.group(3) != prop.split(':')[0]: continue
            if ':' in prop and m.group(4) != prop.split(':')[1]: continue
            lo = int(m.group(1), 16)
            out.update(range(lo, int(m.group(2) or m.group(1), 16) + 1))
    return out


def main():
    with ucd('DerivedAge.txt') as f:
        assert 'DerivedAge-15.0.0.txt' in f.readline(), 'expected UCD 15.0.0 (Debian bookworm)'
    cls, ccc, dec = {}, {}, {}
    first = None
    with ucd('UnicodeData.txt') as f:
        for line in f:
            fld = line.split(';')
            cp, name, gc = int(fld[0], 16), fld[1], fld[2]
            c = L if gc in ('Lu', 'Ll', 'Lt', 'Lm', 'Lo') else N if gc in ('Nd', 'Nl', 'No') else OTHER
            if name.endswith(', First>'):
                first = cp
                continue
            if name.endswith(', Last>'):
                for x in range(first, cp + 1): cls[x] = c
                first = None
                continue
            cls[cp] = c
            if int(fld[3]): ccc[cp] = int(fld[3])
            if fld[5] and not fld[5].startswith('<'):
                dec[cp] = [int(x, 16) for x in fld[5].split()]
    # UCD 15.1.0: CJK Unified Ideographs Extension I (Lo).
    for x in range(0x2EBF0, 0x2EE5D + 1):
        assert cls.get(x, OTHER) == OTHER and x not in dec and x not in ccc
        cls[x] = L
    nws = 0
    for x in sorted(ranges_of('PropList.txt', 'White_Space')):
        assert cls.get(x, OTHER) == OTHER
        cls[x] = WS
        nws += 1
    assert nws == 25, nws

    # ---- normalization (UAX #15 §3, §5, §9)
    excl = set()
    with ucd('CompositionExclusions.txt') as f:
        for line in f:
            m = re.match(r'([0-9A-F]+)', line)
            if m: excl.add(int(m.group(1), 16))
    fce = set(excl)
    for cp, d in dec.items():
        if len(d) == 1 or ccc.get(cp, 0) or ccc.get(d[0], 0): fce.add(cp)
    assert fce == ranges_of('DerivedNormalizationProps.txt', 'Full_Composition_Exclusion')
    comp = {}
    for cp, d in dec.items():
        if len(d) == 2 and cp not in fce: comp[(d[0], d[1])] = cp
    second = {b for (_, b) in comp}
    second.update(range(VBASE, VBASE + VCOUNT))          # Hangul L+V
    second.update(range(TBASE + 1, TBASE + TCOUNT))      # Hangul LV+T
    qc_no, qc_maybe = fce, second
    assert qc_no == ranges_of('DerivedNormalizationProps.txt', 'NFC_QC:N')
    assert qc_maybe == ranges_of('DerivedNormalizationProps.txt', 'NFC_QC:M')

    def full(cp):
        if SBASE <= cp < SBASE + SCOUNT:
            s = cp - SBASE
            t = [LBASE + s // (VCOUNT * TCOUNT), VBASE + (s % (VCOUNT * TCOUNT)) // TCOUNT]
            return t + ([TBASE + s % TCOUNT] if s % TCOUNT else [])
        if cp not in dec: return [cp]
        return [y for x in dec[cp] for y in full(x)]

    active = set(ccc) | qc_no | qc_maybe
    for cp in dec:  # a boundary's decomposition must start with a boundary
        if cp not in active:
            f0 = full(cp)[0]
            assert f0 not in active, hex(cp)
    assert all(cp >= 0x300 for cp in active)  # UTF-8 lead bytes < 0xCC are never active
    # unicode.c skips the lookup for CJK U+3400..U+9FFF and Hangul syllables
    assert not any(0x3400 <= x < 0xA000 or SBASE <= x < SBASE + SCOUNT for x in active)

    latin1 = [cls.get(x, OTHER) for x in range(256)]
    ranges = []
    for x in range(256, 0x110000):
        c = cls.get(x, OTHER)
        if c == OTHER: continue
        if ranges and ranges[-1][1] == x - 1 and ranges[-1][2] == c:
            ranges[-1][1] = x
        else:
            ranges.append([x, x, c])

    def spans(points, value=lambda x: 0):
        out = []
        for x in sorted(points):
            if out and out[-1][1] == x - 1 and out[-1][2] == value(x): out[-1][1] = x
            else: out.append([x, x, value(x)])
        return out

    o = []
    o.append('/* GENERATED by tools/gen_unicode_tables.py from the Unicode Character Database')
    o.append(' * 15.0.0 (UnicodeData.txt, PropList.txt, CompositionExclusions.txt) plus CJK')
    o.append(' * Extension I U+2EBF0..U+2EE5D (Lo), i.e. UCD 15.1.0. Do not edit; rerun the')
    o.append(' * script. Spec §3.1.4: \\p{L}, \\p{N}, \\s classes; UAX #15: NFC data. */')
    o.append('#include "model/unicode_tables.h"')
    o.append('')
    o.append('const uint8_t cis2_uc_latin1[256] = {')
    for i in range(0, 256, 32):
        o.append('    ' + ','.join(str(v) for v in latin1[i:i + 32]) + ',')
    o.append('};')
    o.append('')
    o.append('const cis2_uc_range cis2_uc_ranges[] = {')
    for lo, hi, c in ranges:
        o.append('    {0x%05X, 0x%05X, %s},' % (lo, hi, NAMES[c]))
    o.append('};')
    o.append('const size_t cis2_uc_nranges = sizeof cis2_uc_ranges / sizeof cis2_uc_ranges[0];')
    o.append('')
    o.append('/* Canonical_Combining_Class != 0, as ranges of equal values. */')
    o.append('const cis2_uc_range cis2_uc_ccc[] = {')
    for lo, hi, v in spans(ccc, lambda x: ccc[x]):
        o.append('    {0x%05X, 0x%05X, %d},' % (lo, hi, v))
    o.append('};')
    o.append('const size_t cis2_uc_nccc = sizeof cis2_uc_ccc / sizeof cis2_uc_ccc[0];')
    o.append('')
    o.append('/* Canonical decompositions, one level, by code point (second 0: a singleton). */')
    o.append('const cis2_uc_triple cis2_uc_decomp[] = {')
    for cp in sorted(dec):
        d = dec[cp] + [0]
        o.append('    {0x%05X, 0x%05X, 0x%05X},' % (cp, d[0], d[1]))
    o.append('};')
    o.append('const size_t cis2_uc_ndecomp = sizeof cis2_uc_decomp / sizeof cis2_uc_decomp[0];')
    o.append('')
    o.append('/* Primary composites {first, second, composite}, by (first, second). */')
    o.append('const cis2_uc_triple cis2_uc_comp[] = {')
    for a, b in sorted(comp):
        o.append('    {0x%05X, 0x%05X, 0x%05X},' % (a, b, comp[(a, b)]))
    o.append('};')
    o.append('const size_t cis2_uc_ncomp = sizeof cis2_uc_comp / sizeof cis2_uc_comp[0];')
    o.append('')
    o.append('/* NFC-active code points: ccc != 0 or NFC_Quick_Check No/Maybe. */')
    o.append('const cis2_uc_range cis2_uc_nfc_active[] = {')
    for lo, hi, _ in spans(active):
        o.append('    {0x%05X, 0x%05X, 1},' % (lo, hi))
    o.append('};')
    o.append('const size_t cis2_uc_nnfc_active = '
             'sizeof cis2_uc_nfc_active / sizeof cis2_uc_nfc_active[0];')
    print('\n'.join(o))


main()
