/* The sampler, docs/sampling.md: temperature, top-k, top-p, min-p over one
 * step's logits, a counter-based generator keyed by (seed, step), and the
 * pick. Scalar and pinned (core/fparith.h: DAZ/FTZ as §1.3 on every ISA,
 * no contraction), so it gives the same id wherever the logits are the same. */
#include "engine/sample.h"
#include "core/fparith.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float l;
    int32_t id;
} cand;

uint64_t smp_splitmix64(uint64_t seed, uint64_t step)
{
    uint64_t z = seed + (step + 1) * 0x9E3779B97F4A7C15ull; /* mod 2^64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float smp_uniform(uint64_t seed, uint64_t step)
{
    /* a 24-bit integer converts exactly; times 2^-24 is exact */
    return cis2_fmul((float)(uint32_t)(smp_splitmix64(seed, step) >> 40), 0x1p-24f);
}

size_t smp_scratch_bytes(int n)
{
    return (size_t)(n > 0 ? n : 1) * (2 * sizeof(cand) + 2 * sizeof(float));
}

/* §2.2's order as one unsigned key, ascending = logit descending: the
 * binary32 bits mapped to their numeric order (-0 as +0), inverted. */
static uint32_t order_key(float l)
{
    uint32_t b = l == 0.0f ? 0u : cis2_f2u(l);
    uint32_t u = (b & 0x80000000u) ? ~b : b | 0x80000000u;
    return ~u;
}

/* §2.2: a stable LSD radix sort on order_key (11 + 11 + 10 bits). The
 * candidates come in ascending id order, and a stable sort keeps it among
 * equal logits: the lower id first. No comparison sort's tie-breaking is
 * involved, and it costs three passes where qsort's comparisons took ~15x
 * longer at a 49152-id vocabulary. */
static cand *sort_cands(cand *a, cand *tmp, int n)
{
    static const int shift[3] = { 0, 11, 22 };
    for (int p = 0; p < 3; p++) {
        size_t cnt[2049] = { 0 };
        const int sh = shift[p];
        for (int i = 0; i < n; i++) cnt[((order_key(a[i].l) >> sh) & 2047u) + 1]++;
        for (int d = 0; d < 2048; d++) cnt[d + 1] += cnt[d];
        for (int i = 0; i < n; i++) tmp[cnt[(order_key(a[i].l) >> sh) & 2047u]++] = a[i];
        cand *t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

static int is_nan(float v) { return (cis2_f2u(v) & 0x7FFFFFFFu) > 0x7F800000u; }

/* §2.2: logits are compared with a subnormal read as a zero of its sign
 * (§1.3 DAZ), by bit pattern, so no ISA's compare decides it. */
static float daz(float v)
{
    uint32_t b = cis2_f2u(v);
    return (b & 0x7F800000u) == 0 ? cis2_u2f(b & 0x80000000u) : v;
}

int32_t smp_pick(const cis2_sampler *s, uint64_t step, const float *logits, int n, void *scratch)
{
    const float T = s->temperature;
    /* §2.1: the largest non-NaN logit (all NaN: the §11.2 argmax's id) */
    int top = -1;
    float lmax = 0.0f;
    for (int i = 0; i < n; i++)
        if (!is_nan(logits[i]) && (top < 0 || daz(logits[i]) > lmax)) {
            top = i;
            lmax = daz(logits[i]);
        }
    if (top < 0) return cis2_argmax(logits, n);
    const float s0 = cis2_fdiv(lmax, T);
    const int inf0 = (cis2_f2u(s0) & 0x7FFFFFFFu) == 0x7F800000u;
    /* Only candidates whose weight can be nonzero are sorted: s_i - s_0 is
     * non-decreasing in l_i, so they are a prefix of §2.2's order, and the
     * rest (weight exactly 0, §2.4) change no sum, no cut and no pick. */
    cand *c = scratch, *tmp = c + n;
    float *w = (float *)(tmp + n), *cum = w + n;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (is_nan(logits[i])) continue;
        float si = cis2_fdiv(logits[i], T);
        int keep = inf0 ? si == s0 : !(cis2_fsub(si, s0) < -88.0f);
        if (keep) c[m++] = (cand){ daz(logits[i]), i };
    }
    c = sort_cands(c, tmp, m);
    if (s->top_k > 0 && s->top_k < m) m = s->top_k; /* §2.3 */
    float sum = 0.0f;
    for (int i = 0; i < m; i++) { /* §2.4: weights, left-to-right sums */
        w[i] = inf0 ? 1.0f : cis2_exp_pinned(cis2_fsub(cis2_fdiv(c[i].l, T), s0));
        sum = i ? cis2_fadd(sum, w[i]) : w[i];
        cum[i] = sum;
    }
    if (s->top_p < 1.0f) { /* §2.5 */
        float thr = cis2_fmul(s->top_p, cum[m - 1]);
        for (int i = 0; i < m; i++)
            if (cum[i] >= thr) {
                m = i + 1;
                break;
            }
    }
    if (s->min_p > 0.0f) { /* §2.6 */
        float thr = cis2_fmul(s->min_p, w[0]);
        for (int i = 1; i < m; i++)
            if (w[i] < thr) {
                m = i;
                break;
            }
    }
    float x = cis2_fmul(smp_uniform(s->seed, step), cum[m - 1]); /* §2.7 */
    for (int i = 0; i < m; i++)
        if (cum[i] > x) return c[i].id;
    for (int i = m - 1; i > 0; i--)
        if (w[i] > 0.0f) return c[i].id;
    return c[0].id;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void smp_record(const cis2_sampler *s, uint8_t out[40])
{
    memcpy(out, "CIS-2-SAMPLER-v1", 16);
    put32(out + 16, cis2_f2u(s->temperature));
    put32(out + 20, (uint32_t)s->top_k);
    put32(out + 24, cis2_f2u(s->top_p));
    put32(out + 28, cis2_f2u(s->min_p));
    put32(out + 32, (uint32_t)s->seed);
    put32(out + 36, (uint32_t)(s->seed >> 32));
}

/* The shortest "%.Ng" that reads back (strtof) to v's bits. */
void smp_format_num(float v, char *out, size_t cap)
{
    for (int p = 1; p <= 9; p++) {
        snprintf(out, cap, "%.*g", p, (double)v);
        if (cis2_f2u(strtof(out, NULL)) == cis2_f2u(v)) return;
    }
}

void smp_format(const cis2_sampler *s, char *out, size_t cap)
{
    char t[32], p[32], m[32];
    smp_format_num(s->temperature, t, sizeof t);
    smp_format_num(s->top_p, p, sizeof p);
    smp_format_num(s->min_p, m, sizeof m);
    snprintf(out, cap, "temperature=%s top-k=%d top-p=%s min-p=%s", t, s->top_k, p, m);
}

/* [0-9]*(.[0-9]+)?([eE][+-]?[0-9]+)? with at least one digit before the
 * exponent, read by strtof (round to nearest); finite only. */
int smp_parse_num(const char *txt, float *v)
{
    const char *p = txt;
    int digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return 1;
        while (*p >= '0' && *p <= '9') p++, digits++;
    }
    if (!digits) return 1;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return 1;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p || p - txt > 64) return 1;
    errno = 0;
    float f = strtof(txt, NULL);
    if ((cis2_f2u(f) & 0x7F800000u) == 0x7F800000u) return 1;
    *v = f;
    return 0;
}

int smp_parse_seed(const char *txt, uint64_t *v)
{
    if (!(*txt >= '0' && *txt <= '9') || (txt[0] == '0' && txt[1])) return 1;
    uint64_t r = 0;
    for (const char *p = txt; *p; p++) {
        if (!(*p >= '0' && *p <= '9')) return 1;
        unsigned d = (unsigned)(*p - '0');
        if (r > (UINT64_MAX - d) / 10) return 1;
        r = r * 10 + d;
    }
    *v = r;
    return 0;
}

/* 0 or a normal binary32 (a subnormal reads as 0 under DAZ, §1.3). */
static int zero_or_normal(float v)
{
    uint32_t b = cis2_f2u(v);
    return b == 0 || ((b & 0x7F800000u) != 0 && (b & 0x7F800000u) != 0x7F800000u && !(b >> 31));
}

int cis2_sampler_check(const cis2_sampler *s, char *err)
{
    if (!s) {
        snprintf(err, CIS2_ERR_LEN, "the sampler is NULL");
        return 1;
    }
    if (!zero_or_normal(s->temperature)) {
        snprintf(err, CIS2_ERR_LEN, "temperature must be 0 or a normal number above 0");
        return 1;
    }
    if (s->top_k < 0) {
        snprintf(err, CIS2_ERR_LEN, "top-k must be 0 (off) or above");
        return 1;
    }
    if (!zero_or_normal(s->top_p) || s->top_p > 1.0f) {
        snprintf(err, CIS2_ERR_LEN, "top-p must be in [0, 1] (1 = off)");
        return 1;
    }
    if (!zero_or_normal(s->min_p) || s->min_p > 1.0f) {
        snprintf(err, CIS2_ERR_LEN, "min-p must be in [0, 1] (0 = off)");
        return 1;
    }
    return 0;
}

int32_t cis2_sample(const cis2_sampler *s, uint64_t step, const float *logits, int n)
{
    char err[CIS2_ERR_LEN];
    if (n < 1 || !logits || cis2_sampler_check(s, err)) return -1;
    if (s->temperature == 0.0f) return cis2_argmax(logits, n);
    void *scratch = malloc(smp_scratch_bytes(n));
    if (!scratch) return -1;
    uint64_t saved;
    int32_t id = -1;
    if (!cis2_fpenv_enter(&saved, err)) {
        id = smp_pick(s, step, logits, n, scratch);
        cis2_fpenv_write(saved);
    }
    free(scratch);
    return id;
}
