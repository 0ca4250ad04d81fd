/* Every fast kernel path is bit-identical to the scalar reference.
 * Matmul over many shapes (odd sizes, rows not a multiple of the 16-row
 * tile, T = 1..16 and 25, 40, bf16/f32/f16 weights), attention (head_dim 6/24/64/128,
 * GQA groups 1-7, long contexts to 8192), softmax on adversarial rows —
 * for every ISA path this CPU has and thread counts 1, 2, 3, 7. */
#include "unit.h"
#include "engine/fast.h"
#include "kernels/kernels.h"
#include "unit_rand.h"

/* Every ISA path, from the registry (kernels/pick.c), in its order. */
#define ISAS(i) (fast_isas[i].name)
static const int THREADS[] = { 1, 2, 3, 7 };

/* A weight of the given dtype with random stored bytes, packed into the
 * model's tiles (model/weights.h); f32 = the exact row-major widening the
 * reference kernels read. */
typedef struct {
    cis2_weight w;
    uint8_t *raw; /* allocation; the stored bytes start at raw + 1 */
    void *tiles;
    float *f32;
} tweight;

static void make_weight(tweight *t, int rows, int cols, cis2_dtype dt)
{
    size_t n = (size_t)rows * cols, es = cis2_dtype_size(dt);
    t->raw = malloc(n * es + 1);
    uint8_t *r = t->raw + 1; /* deliberately unaligned, like a safetensors payload */
    for (size_t i = 0; i < n; i++) {
        float v = rval();
        if (dt == CIS2_DT_F32) memcpy(r + 4 * i, &v, 4);
        else {
            uint16_t h = (uint16_t)(rnd() >> 17);
            if (dt == CIS2_DT_F16 && ((h >> 10) & 0x1F) == 0x1F) h &= 0x7BFF; /* finite */
            if (dt == CIS2_DT_BF16 && ((h >> 7) & 0xFF) == 0xFF) h &= 0xBFFF;
            memcpy(r + 2 * i, &h, 2);
        }
    }
    t->f32 = malloc(n * sizeof(float) + 4);
    cis2_dtype_to_f32(dt, r, n, t->f32);
    t->tiles = aligned_alloc(64, cis2_weight_bytes(rows, cols, cis2_wfmt_of(dt)));
    cis2_weight_pack(&t->w, t->tiles, r, dt, rows, cols);
    t->w.id = 0;
    t->w.layer = -1;
}

static void free_weight(tweight *t)
{
    free(t->raw);
    free(t->tiles);
    free(t->f32);
}

/* b's attention as the engine calls it: T = 1 runs twice, without and with
 * the key-blocked keys (engine/backend.h; positions past n in the last block
 * and a spare block hold NaN, which must never be read), and the second
 * result goes to out; where the two differ, out's first differing element
 * becomes a signalling NaN, so the caller's bit comparison with the
 * reference fails unless both paths match it. kb_swap: the key-blocked copy
 * with blocks 0 and 1 swapped (the negative control). */
static void attention_kb(cis2_backend *b, const float *q, const float *kc, const float *vc, int T,
                         int pos0, int nh, int nkv, int hd, float scale, float *out, int kb_swap)
{
    int n = pos0 + T, qd = nh * hd;
    char err[CIS2_ERR_LEN];
    if (b->reserve(b, T, n, nh, nkv, hd, err)) { /* then attention allocates nothing */
        printf("FAIL attention reserve: %s\n", err);
        unit_failed++;
        return;
    }
    b->attention(b, q, kc, vc, NULL, 0, T, pos0, nh, nkv, hd, scale, out);
    if (T != 1 || !b->wants_kb) return;
    int cap = (n + CIS2_KB - 1) / CIS2_KB * CIS2_KB + (n % 3 ? CIS2_KB : 0);
    size_t len = (size_t)cap * nkv * hd;
    float *kb = malloc(len * 4), *o2 = malloc((size_t)qd * 4);
    for (size_t i = 0; i < len; i++) kb[i] = cis2_u2f(0x7FC00000u);
    for (int p = 0; p < n; p++) {
        int pb = kb_swap && p < 2 * CIS2_KB ? (p + CIS2_KB) % (2 * CIS2_KB) : p;
        cis2_kb_put(kb, cap, nkv, hd, pb, kc + (size_t)p * nkv * hd);
    }
    b->attention(b, q, kc, vc, kb, cap, T, pos0, nh, nkv, hd, scale, o2);
    for (int i = 0; i < qd; i++)
        if (cis2_f2u(o2[i]) != cis2_f2u(out[i])) {
            o2[i] = cis2_u2f(0x7FBADBADu); /* a signalling NaN no kernel writes */
            break;
        }
    memcpy(out, o2, (size_t)qd * 4);
    free(kb);
    free(o2);
}

/* One matmul shape on backend b against ref_matvec, every T in TT. */
static void check_matmul(cis2_backend *b, int rows, int cols, cis2_dtype dt, const int *TT, int nT,
                         int *count, int *bad, char *why, size_t why_len)
{
    tweight tw;
    make_weight(&tw, rows, cols, dt);
    for (int k = 0; k < nT; k++) {
        int T = TT[k];
        float *X = malloc((size_t)T * cols * sizeof(float));
        float *Y0 = malloc((size_t)T * rows * sizeof(float)),
              *Y1 = malloc((size_t)T * rows * sizeof(float));
        for (int i = 0; i < T * cols; i++) X[i] = rval();
        for (int t = 0; t < T; t++)
            ref_matvec(tw.f32, rows, cols, X + (size_t)t * cols, Y0 + (size_t)t * rows);
        memset(Y1, 0xA5, (size_t)T * rows * sizeof(float));
        b->matmul(b, &tw.w, X, T, Y1);
        size_t at;
        (*count)++;
        if (!same_bits(Y0, Y1, (size_t)T * rows, &at)) {
            if (!*bad)
                snprintf(why, why_len, "rows=%d cols=%d T=%d: element %zu 0x%08X vs ref 0x%08X",
                         rows, cols, T, at, (unsigned)cis2_f2u(Y1[at]), (unsigned)cis2_f2u(Y0[at]));
            (*bad)++;
        }
        free(X);
        free(Y0);
        free(Y1);
    }
    free_weight(&tw);
}

static void test_matmul(void)
{
    /* 600 rows (38 tiles): T = 1 splits into several near-equal tasks per thread */
    static const int R[] = { 1, 5, 16, 17, 33, 100, 129, 200, 600 };
    static const int C[] = { 1, 3, 8, 17, 64, 100 };
    /* every T a decode step of 1..16 sequences can have, then prefill sizes */
    static const int TT[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 25, 40 };
    /* Long rows (prefill, T > 16): the AVX-512 panel holds 1536 columns, a
     * longer row is summed a 1536-column range at a time, each range going on
     * from the last one's stored sums: one range, its edge, two ranges, three
     * (the last one column), odd and even K; 17 and 33 rows end in a part
     * tile, 33 in an odd tile alone in its pair. */
    static const int RL[] = { 17, 33 }, CL[] = { 1535, 1536, 1537, 3072, 3073 },
                     TL[] = { 16, 17, 25, 40 };
    static const cis2_dtype DT[] = { CIS2_DT_BF16, CIS2_DT_F32, CIS2_DT_F16 };
    static const char *DTN[] = { "bf16", "f32", "f16" };
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[128];
        if (!fast_kernels_pick(ISAS(ii), err)) {
            snprintf(name, sizeof name, "matmul %s", ISAS(ii));
            SKIP(name, "%s", err);
            continue;
        }
        for (size_t ti = 0; ti < sizeof THREADS / sizeof *THREADS; ti++) {
            cis2_backend *b;
            if (cis2_backend_fast_create(&b, ISAS(ii), THREADS[ti], err)) {
                printf("FAIL create: %s\n", err);
                unit_failed++;
                continue;
            }
            for (int d = 0; d < 3; d++) {
                int bad = 0, count = 0;
                char why[200] = "";
                for (size_t ri = 0; ri < sizeof R / sizeof *R; ri++)
                    for (size_t ci = 0; ci < sizeof C / sizeof *C; ci++)
                        check_matmul(b, R[ri], C[ci], DT[d], TT, (int)(sizeof TT / sizeof *TT),
                                     &count, &bad, why, sizeof why);
                for (size_t ri = 0; ri < sizeof RL / sizeof *RL; ri++)
                    for (size_t ci = 0; ci < sizeof CL / sizeof *CL; ci++)
                        check_matmul(b, RL[ri], CL[ci], DT[d], TL, (int)(sizeof TL / sizeof *TL),
                                     &count, &bad, why, sizeof why);
                snprintf(name, sizeof name, "matmul %s threads=%d %s: %d shapes bit-identical",
                         ISAS(ii), THREADS[ti], DTN[d], count);
                CHECK(name, bad == 0, "%d of %d differ; first %s", bad, count, why);
            }
            b->destroy(b);
        }
    }
}

static void test_attention(void)
{
    static const int HD[] = { 6, 24, 64, 128 };
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[160];
        if (!fast_kernels_pick(ISAS(ii), err)) {
            snprintf(name, sizeof name, "attention %s", ISAS(ii));
            SKIP(name, "%s", err);
            continue;
        }
        for (size_t ti = 0; ti < sizeof THREADS / sizeof *THREADS; ti++) {
            cis2_backend *b;
            if (cis2_backend_fast_create(&b, ISAS(ii), THREADS[ti], err)) {
                printf("FAIL create: %s\n", err);
                unit_failed++;
                continue;
            }
            int bad = 0, count = 0;
            char why[200] = "";
            for (size_t hi = 0; hi < sizeof HD / sizeof *HD; hi++)
                for (int group = 1; group <= 7; group++) {
                    int hd = HD[hi], nkv = group > 4 ? 1 : 2, nh = nkv * group;
                    int cases[3][2] = { { 0, 1 }, { 0, 23 }, { 57, 3 } }; /* pos0, T */
                    for (int c = 0; c < 3; c++) {
                        int pos0 = cases[c][0], T = cases[c][1], n = pos0 + T;
                        int qd = nh * hd, kvd = nkv * hd;
                        float *q = malloc((size_t)T * qd * 4), *kc = malloc((size_t)n * kvd * 4),
                              *vc = malloc((size_t)n * kvd * 4);
                        float *o0 = malloc((size_t)T * qd * 4), *o1 = malloc((size_t)T * qd * 4),
                              *sc = malloc((size_t)n * 4);
                        for (int i = 0; i < T * qd; i++) q[i] = rval();
                        for (int i = 0; i < n * kvd; i++) {
                            kc[i] = rval();
                            vc[i] = rval();
                        }
                        float scale = cis2_rsqrt((float)hd);
                        cis2_ref_attention(q, kc, vc, T, pos0, nh, nkv, hd, scale, o0, sc);
                        attention_kb(b, q, kc, vc, T, pos0, nh, nkv, hd, scale, o1, 0);
                        size_t at;
                        count++;
                        if (!same_bits(o0, o1, (size_t)T * qd, &at)) {
                            if (!bad)
                                snprintf(why, sizeof why,
                                         "hd=%d group=%d pos0=%d T=%d: element %zu", hd, group,
                                         pos0, T, at);
                            bad++;
                        }
                        free(q);
                        free(kc);
                        free(vc);
                        free(o0);
                        free(o1);
                        free(sc);
                    }
                }
            snprintf(name, sizeof name,
                     "attention %s threads=%d: %d cases (head_dim 6/24/64/128, groups 1-7) "
                     "bit-identical",
                     ISAS(ii), THREADS[ti], count);
            CHECK(name, bad == 0, "%d of %d differ; first %s", bad, count, why);
            /* long context: one decode step at position 8191 and a short prefill ending at 3000 */
            if (THREADS[ti] == 2 || THREADS[ti] == 3) {
                int lc[2][2] = { { 8191, 1 }, { 2990, 10 } };
                for (int c = 0; c < 2; c++) {
                    int hd = 64, nh = 9, nkv = 3, pos0 = lc[c][0], T = lc[c][1], n = pos0 + T,
                        qd = nh * hd, kvd = nkv * hd;
                    float *q = malloc((size_t)T * qd * 4), *kc = malloc((size_t)n * kvd * 4),
                          *vc = malloc((size_t)n * kvd * 4);
                    float *o0 = malloc((size_t)T * qd * 4), *o1 = malloc((size_t)T * qd * 4),
                          *sc = malloc((size_t)n * 4);
                    /* the decode step with moderate values (a spread softmax: every
                     * key counts), the prefill with rval's edge cases */
                    float (*gen)(void) = c == 0 ? rmod : rval;
                    for (int i = 0; i < T * qd; i++) q[i] = gen() * 8.0f;
                    for (int i = 0; i < n * kvd; i++) {
                        kc[i] = gen();
                        vc[i] = gen();
                    }
                    cis2_ref_attention(q, kc, vc, T, pos0, nh, nkv, hd, 0.125f, o0, sc);
                    attention_kb(b, q, kc, vc, T, pos0, nh, nkv, hd, 0.125f, o1, 0);
                    size_t at;
                    snprintf(name, sizeof name, "attention %s threads=%d long context %d positions",
                             ISAS(ii), THREADS[ti], n);
                    CHECK(name, same_bits(o0, o1, (size_t)T * qd, &at), "element %zu differs", at);
                    free(q);
                    free(kc);
                    free(vc);
                    free(o0);
                    free(o1);
                    free(sc);
                }
            }
            /* decode with the group-shared key-range path: contexts 257..3000,
             * head_dim 24/64/128, GQA groups 1-7 */
            if (THREADS[ti] != 7) {
                static const int HDL[] = { 24, 64, 128 };
                static const int NL[] = { 257, 512, 513, 1000, 1777, 3000 };
                int lbad = 0, lcount = 0;
                char lwhy[200] = "";
                for (size_t hi = 0; hi < sizeof HDL / sizeof *HDL; hi++)
                    for (int group = 1; group <= 7; group++)
                        for (size_t ni = 0; ni < sizeof NL / sizeof *NL; ni++) {
                            if ((group + (int)ni + (int)hi) % 2) continue; /* half the grid: time */
                            int hd = HDL[hi], nkv = group > 4 ? 1 : (group == 1 ? 3 : 2),
                                nh = nkv * group;
                            int n = NL[ni], pos0 = n - 1, T = 1, qd = nh * hd, kvd = nkv * hd;
                            float *q = malloc((size_t)T * qd * 4),
                                  *kc = malloc((size_t)n * kvd * 4),
                                  *vc = malloc((size_t)n * kvd * 4);
                            float *o0 = malloc((size_t)T * qd * 4),
                                  *o1 = malloc((size_t)T * qd * 4), *sc = malloc((size_t)n * 4);
                            /* every other case moderate values (a spread softmax,
                             * so each key changes the result), the rest rval's */
                            float (*gen)(void) = lcount % 2 ? rmod : rval;
                            for (int i = 0; i < T * qd; i++) q[i] = gen() * 4.0f;
                            for (int i = 0; i < n * kvd; i++) {
                                kc[i] = gen();
                                vc[i] = gen();
                            }
                            float scale = cis2_rsqrt((float)hd);
                            cis2_ref_attention(q, kc, vc, T, pos0, nh, nkv, hd, scale, o0, sc);
                            attention_kb(b, q, kc, vc, T, pos0, nh, nkv, hd, scale, o1, 0);
                            size_t at;
                            lcount++;
                            if (!same_bits(o0, o1, (size_t)T * qd, &at)) {
                                if (!lbad)
                                    snprintf(lwhy, sizeof lwhy, "hd=%d group=%d n=%d: element %zu",
                                             hd, group, n, at);
                                lbad++;
                            }
                            free(q);
                            free(kc);
                            free(vc);
                            free(o0);
                            free(o1);
                            free(sc);
                        }
                snprintf(name, sizeof name,
                         "attention %s threads=%d decode group-shared: %d cases (contexts "
                         "257-3000) bit-identical",
                         ISAS(ii), THREADS[ti], lcount);
                CHECK(name, lbad == 0, "%d of %d differ; first %s", lbad, lcount, lwhy);
            }
            b->destroy(b);
        }
    }
}

/* The 16-lane exp_pinned against the scalar routine, bit for bit: every
 * 61st bit pattern of all 2^32, plus every pattern in the windows where the
 * special cases meet — subnormal inputs (DAZ), results near the flush and
 * overflow edges (|x| in [86, 88.5]), and around +-0 — and +-inf and NaNs. */
static void test_exp16(void)
{
    char err[CIS2_ERR_LEN];
    if (!fast_kernels_pick("avx512", err)) {
        SKIP("exp_pinned 16 lanes", "%s", err);
        return;
    }
#if defined(__x86_64__)
    enum { B = 4096 };
    static float x[B], y[B];
    static const uint32_t WIN[][2] = {
        { 0x00000000u, 0x00800000u }, { 0x80000000u, 0x80800000u }, /* subnormals, +-0 */
        { 0x42AC0000u, 0x42B10000u }, { 0xC2AC0000u, 0xC2B10000u }, /* |x| in [86, 88.5] */
        { 0x7F800000u, 0x7F800100u }, { 0xFF800000u, 0xFF800100u }, /* +-inf, NaNs */
        { 0x7FBFFF00u, 0x7FC00100u }, { 0xFFFFFF00u, 0x00000000u }, /* sNaN/qNaN edges */
        { 0x00000000u, 0xFFFFFFFFu },                               /* every 251st */
    };
    uint64_t count = 0, bad = 0;
    uint32_t first = 0;
    for (size_t w = 0; w < sizeof WIN / sizeof *WIN; w++) {
        uint64_t lo = WIN[w][0], hi = WIN[w][1] ? WIN[w][1] : 0x100000000ull,
                 step = w + 1 == sizeof WIN / sizeof *WIN ? 251 : 1;
        for (uint64_t u = lo; u < hi;) {
            int n = 0;
            for (; n < B - 3 && u < hi; u += step) x[n++] = cis2_u2f((uint32_t)u);
            memcpy(y, x, sizeof(float) * (size_t)n);
            fast_avx512_exp_pinned_n(y, n);
            for (int i = 0; i < n; i++) {
                uint32_t want = cis2_f2u(cis2_exp_pinned(x[i]));
                if (cis2_f2u(y[i]) != want && !bad++) first = cis2_f2u(x[i]);
            }
            count += (uint64_t)n;
        }
    }
    CHECK("exp_pinned 16 lanes: bit-identical to cis2_exp_pinned over a dense sweep", bad == 0,
          "%llu of %llu differ; first x = 0x%08x", (unsigned long long)bad,
          (unsigned long long)count, first);
#endif
}

static void test_softmax(void)
{
    enum { N = 301 };
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[128];
        const fast_kernels *k = fast_kernels_pick(ISAS(ii), err);
        if (!k) continue;
        int bad = 0, rows = 0;
        for (int row = 0; row < 40; row++)
            for (int n = 1; n <= N; n += (n < 40 ? 1 : 37)) {
                float a[N], b2[N];
                for (int j = 0; j < n; j++) {
                    uint64_t r = rnd();
                    switch (row % 8) {
                    case 0: a[j] = rval(); break;
                    case 1: a[j] = rval() * 300.0f; break;        /* many exps flush to 0 */
                    case 2: a[j] = (r & 1) ? 0.0f : -0.0f; break; /* +-0 max */
                    case 3:
                        a[j] = cis2_u2f((uint32_t)(r >> 9) & 0x807FFFFFu);
                        break;                                          /* subnormals */
                    case 4: a[j] = (float)(int)(r % 5) - 100.0f; break; /* ties */
                    case 5: a[j] = (r % 7 == 0) ? cis2_u2f(0xFF800000u) : rval(); break; /* -inf */
                    case 6: a[j] = rval() * 1e30f; break;
                    default: a[j] = (r % 11 == 0) ? cis2_u2f(0x7FC00000u) : rval(); break; /* NaN */
                    }
                }
                memcpy(b2, a, sizeof(float) * (size_t)n);
                ref_softmax(a, n);
                k->softmax(b2, n);
                size_t at;
                rows++;
                if (!same_bits(a, b2, (size_t)n, &at)) bad++;
            }
        snprintf(name, sizeof name, "softmax %s: %d adversarial rows bit-identical to ref_softmax",
                 ISAS(ii), rows);
        CHECK(name, bad == 0, "%d rows differ", bad);
        if (!k->softmax_rows) continue;
        /* Tiles of m rows, row i with n0 + i*step entries (short rows, NaN
         * rows and rows past 8 mixed in), each row against ref_softmax. */
        static const int M[] = { 1, 3, 8, 11 }, N0[] = { 1, 9, 16, 17, 40, 150 },
                         ST[] = { 0, 1, 5 };
        enum { LD = 220 };
        static float ta[11 * LD], tb[11 * LD];
        bad = 0, rows = 0;
        for (size_t mi = 0; mi < sizeof M / sizeof *M; mi++)
            for (size_t ni = 0; ni < sizeof N0 / sizeof *N0; ni++)
                for (size_t si = 0; si < sizeof ST / sizeof *ST; si++) {
                    int m = M[mi], n0 = N0[ni], step = ST[si];
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < LD; j++) {
                            uint64_t r = rnd();
                            float v = (i % 4 == 1) ? rval() * 300.0f : rval();
                            if (i % 5 == 3 && r % 13 == 0) v = cis2_u2f(0x7FC00000u); /* NaN */
                            if (i % 3 == 2 && r % 7 == 0) v = cis2_u2f(0xFF800000u);  /* -inf */
                            ta[i * LD + j] = tb[i * LD + j] = v;
                        }
                    for (int i = 0; i < m; i++) ref_softmax(ta + i * LD, n0 + i * step);
                    k->softmax_rows(tb, LD, m, n0, step);
                    size_t at;
                    rows += m;
                    if (!same_bits(ta, tb, (size_t)m * LD, &at)) bad++;
                }
        snprintf(name, sizeof name,
                 "softmax_rows %s: %d rows in tiles bit-identical to ref_softmax (pad untouched)",
                 ISAS(ii), rows);
        CHECK(name, bad == 0, "%d tiles differ", bad);
    }
}

/* cis2_weight_pack (SIMD transposes for full bf16 tiles) against the layout
 * spelled out element by element: tiles[(tile*K + k)*16 + lane] for f32,
 * column pairs for bf16 (tiles[(tile*K + 2p)*16 + 2*lane + (k&1)], an odd
 * last column plain), pad rows and the tail zero, every byte written; and the
 * readers of the tiles (row lookup, row-major widening, F32 re-tiling)
 * against the stored bytes. */
static void test_pack(void)
{
    static const int R[] = { 1, 15, 16, 17, 33, 100 }, C[] = { 1, 7, 8, 9, 16, 24, 63, 576 };
    static const cis2_dtype D[] = { CIS2_DT_BF16, CIS2_DT_F32, CIS2_DT_F16 };
    int bad = 0, count = 0;
    for (size_t di = 0; di < 3; di++)
        for (size_t ri = 0; ri < sizeof R / sizeof *R; ri++)
            for (size_t ci = 0; ci < sizeof C / sizeof *C; ci++) {
                tweight tw;
                make_weight(&tw, R[ri], C[ci], D[di]);
                const cis2_weight *w = &tw.w;
                size_t K = (size_t)w->cols, nb = cis2_weight_bytes(w->rows, w->cols, w->fmt);
                /* again over memory full of 0xA5: every byte must be written */
                uint8_t *t2 = aligned_alloc(64, nb);
                memset(t2, 0xA5, nb);
                cis2_weight w2;
                cis2_weight_pack(&w2, t2, tw.raw + 1, D[di], w->rows, w->cols);
                int ok = w->fmt == (D[di] == CIS2_DT_BF16 ? CIS2_WF_BF16 : CIS2_WF_F32) &&
                         memcmp(t2, tw.tiles, nb) == 0;
                /* the loader's slices (cis2_weight_pack_tiles, one and two tiles at a
                 * time, each from its own first row) write the same bytes */
                for (int step = 1; ok && step <= 2; step++) {
                    memset(t2, 0xA5, nb);
                    size_t es0 = cis2_dtype_size(D[di]);
                    for (int t0 = 0; t0 < w->ntiles; t0 += step) {
                        int t1 = t0 + step < w->ntiles ? t0 + step : w->ntiles;
                        cis2_weight_pack_tiles(&w2, t2,
                                               tw.raw + 1 + (size_t)t0 * CIS2_TILE * K * es0, D[di],
                                               w->rows, w->cols, t0, t1);
                    }
                    ok = memcmp(t2, tw.tiles, nb) == 0 && w2.rows == w->rows &&
                         w2.ntiles == w->ntiles && w2.fmt == w->fmt;
                }
                size_t es = cis2_wfmt_size(w->fmt), used = (size_t)w->ntiles * CIS2_TILE * K * es;
                for (size_t i = used; ok && i < nb; i++) ok = t2[i] == 0;
                for (int t = 0; ok && t < w->ntiles; t++)
                    for (size_t k = 0; ok && k < K; k++)
                        for (int l = 0; ok && l < CIS2_TILE; l++) {
                            int row = t * CIS2_TILE + l;
                            size_t at = ((size_t)t * K + k) * CIS2_TILE + (size_t)l;
                            if (w->fmt == CIS2_WF_BF16) {
                                if (k + 1 < K || K % 2 == 0) /* in a column pair */
                                    at = ((size_t)t * K + k / 2 * 2) * CIS2_TILE + 2 * (size_t)l +
                                         k % 2;
                                uint16_t want = 0, have = ((const uint16_t *)w->tiles)[at];
                                if (row < w->rows)
                                    memcpy(&want, tw.raw + 1 + ((size_t)row * K + k) * 2, 2);
                                ok = have == want;
                            } else {
                                float want = row < w->rows ? tw.f32[(size_t)row * K + k] : 0.0f;
                                ok = cis2_f2u(((const float *)w->tiles)[at]) == cis2_f2u(want);
                            }
                        }
                float *wide = malloc((size_t)w->rows * K * sizeof(float) + 4),
                      *row = malloc(K * sizeof(float));
                cis2_weight_widen(w, wide);
                ok = ok && memcmp(wide, tw.f32, (size_t)w->rows * K * sizeof(float)) == 0;
                for (int r = 0; ok && r < w->rows; r++) {
                    cis2_weight_row(w, r, row);
                    ok = memcmp(row, tw.f32 + (size_t)r * K, K * sizeof(float)) == 0;
                }
                void *t3 = aligned_alloc(64, cis2_weight_bytes(w->rows, w->cols, CIS2_WF_F32));
                cis2_weight w3;
                cis2_weight_to_f32_tiles(w, &w3, t3);
                for (int r = 0; ok && r < w->rows; r++)
                    for (size_t k = 0; ok && k < K; k++)
                        ok = cis2_f2u(*cis2_weight_f32_at(&w3, t3, r, (int)k)) ==
                             cis2_f2u(tw.f32[(size_t)r * K + k]);
                count++;
                if (!ok) bad++;
                free(t3);
                free(wide);
                free(row);
                free(t2);
                free_weight(&tw);
            }
    CHECK("pack: the model's tile layout, element by element, and its readers (bf16/f32/f16, "
          "odd shapes)",
          bad == 0, "%d of %d shapes differ", bad, count);
}

/* The vectorized SwiGLU (silu via a lane-wise exp_pinned) against ref_swiglu
 * on adversarial rows: +-0, subnormals, +-inf, NaN, |x| around the exp
 * cut-offs (+-88), huge magnitudes, ties of sign. */
static void test_swiglu(void)
{
    enum { N = 203 };
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[160];
        const fast_kernels *k = fast_kernels_pick(ISAS(ii), err);
        if (!k || !k->swiglu) continue;
        int bad = 0, rows = 0;
        for (int row = 0; row < 48; row++)
            for (int n = 1; n <= N; n += (n < 40 ? 1 : 27)) {
                float g[N], u[N], a[N], b2[N];
                for (int j = 0; j < n; j++) {
                    uint64_t r = rnd();
                    u[j] = rval();
                    switch (row % 12) {
                    case 0: g[j] = rval(); break;
                    case 1: g[j] = rval() * 300.0f; break;
                    case 2: g[j] = (r & 1) ? 0.0f : -0.0f; break;
                    case 3:
                        g[j] = cis2_u2f((uint32_t)(r >> 9) & 0x807FFFFFu);
                        u[j] = cis2_u2f((uint32_t)(r >> 20) & 0x807FFFFFu);
                        break;
                    case 4:
                        g[j] = ((r & 1) ? 88.0f : -88.0f) + (float)((int)(r % 9) - 4) * 0.25f;
                        break;
                    case 5:
                        g[j] = cis2_u2f(0x42B00000u + (uint32_t)(r % 64) - 32u) *
                               ((r >> 8) & 1 ? 1.0f : -1.0f);
                        break;
                    case 6:
                        g[j] = rval() * 1e30f;
                        u[j] = (r >> 3) & 1 ? 0.0f : rval() * 1e30f;
                        break;
                    case 7:
                        g[j] = (r % 5 == 0) ? cis2_u2f((r >> 4) & 1 ? 0x7F800000u : 0xFF800000u)
                                            : rval();
                        break;
                    case 8:
                        g[j] = (r % 7 == 0) ? cis2_u2f(0x7FC00000u | (uint32_t)(r >> 45)) : rval();
                        break;
                    case 9:
                        g[j] = rval();
                        u[j] = (r % 6 == 0) ? cis2_u2f(0xFFC00001u)
                                            : cis2_u2f((r >> 5) & 1 ? 0x7F800000u : 0xFF800000u);
                        break;
                    case 10: g[j] = (float)((int)(r % 41) - 20); break;
                    default:
                        g[j] = cis2_u2f((uint32_t)(r >> 32));
                        u[j] = cis2_u2f((uint32_t)r);
                        break; /* any bits */
                    }
                }
                ref_swiglu(g, u, a, n);
                k->swiglu(g, u, b2, n);
                size_t at;
                rows++;
                if (!same_bits(a, b2, (size_t)n, &at)) bad++;
            }
        snprintf(name, sizeof name, "swiglu %s: %d adversarial rows bit-identical to ref_swiglu",
                 ISAS(ii), rows);
        CHECK(name, bad == 0, "%d rows differ", bad);
    }
}

/* One adversarial element for the add and scan tests: kind 0 plain values,
 * 1 +-0, 2 subnormals, 3 +-inf, 4 NaNs among values, 5 any bits, 6 few
 * distinct values (ties), 7 huge magnitudes. */
static float adversarial(int kind)
{
    uint64_t r = rnd();
    switch (kind) {
    case 0: return rval();
    case 1: return (r & 1) ? 0.0f : -0.0f;
    case 2: return cis2_u2f((uint32_t)(r >> 9) & 0x807FFFFFu);
    case 3: return (r % 3 == 0) ? cis2_u2f((r >> 4) & 1 ? 0x7F800000u : 0xFF800000u) : rval();
    case 4: return (r % 17 == 0) ? cis2_u2f(0x7FC00000u | (uint32_t)(r >> 43)) : rval();
    case 5: return cis2_u2f((uint32_t)(r >> 32));
    case 6: return (float)((int)(r % 5) - 2);
    default: return rval() * 1e38f;
    }
}

/* The vectorized residual add against ref_add, lengths 1..203, adversarial
 * elements in either operand. */
static void test_add(void)
{
    enum { N = 203 };
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[160];
        const fast_kernels *k = fast_kernels_pick(ISAS(ii), err);
        if (!k || !k->add) continue;
        int bad = 0, rows = 0;
        for (int row = 0; row < 64; row++)
            for (int n = 1; n <= N; n += (n < 40 ? 1 : 27)) {
                float h0[N], h1[N], x[N];
                for (int j = 0; j < n; j++) {
                    h0[j] = h1[j] = adversarial(row % 8);
                    x[j] = adversarial(row / 8 % 8);
                }
                ref_add(h0, x, n);
                k->add(h1, x, n);
                size_t at;
                rows++;
                if (!same_bits(h0, h1, (size_t)n, &at)) bad++;
            }
        snprintf(name, sizeof name, "add %s: %d adversarial rows bit-identical to ref_add",
                 ISAS(ii), rows);
        CHECK(name, bad == 0, "%d rows differ", bad);
    }
}

/* rmsnorm_rows against ref_rmsnorm row by row: 1..17 rows (groups of 8
 * and their tails), lengths 1..203 and 576, each row of one adversarial
 * kind (zeros and subnormals give a zero sum, 1e38 an infinite one, NaNs
 * and infs go to ref_rmsnorm), weights plain or adversarial, eps 1e-5 or 0
 * (a zero sum then has an infinite inv); outputs strided with their pads
 * untouched, and once in place (out == x). */
static void test_rmsnorm_rows(void)
{
    enum { MAXM = 17, LD = 600 };
    static const int M[] = { 1, 2, 3, 4, 5, 8, 9, 13, 17 }, N[] = { 1, 2, 7, 16, 33, 203, 576 };
    static float x[MAXM * LD], o0[MAXM * LD], o1[MAXM * LD], w[LD];
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[160];
        const fast_kernels *k = fast_kernels_pick(ISAS(ii), err);
        if (!k || !k->rmsnorm_rows) continue;
        int bad = 0, rows = 0;
        char first[160] = "";
        for (int trial = 0; trial < 12; trial++)
            for (size_t mi = 0; mi < sizeof M / sizeof *M; mi++)
                for (size_t ni = 0; ni < sizeof N / sizeof *N; ni++) {
                    int m = M[mi], n = N[ni], inplace = trial == 11;
                    float eps = trial % 3 == 2 ? 0.0f : 1e-5f;
                    for (int j = 0; j < n; j++) w[j] = adversarial(trial < 6 ? 0 : trial % 8);
                    for (int r = 0; r < m; r++)
                        for (int j = 0; j < LD; j++)
                            x[r * LD + j] = j < n ? adversarial((r + trial) % 8) : 7.0f;
                    for (int j = 0; j < m * LD; j++) o0[j] = o1[j] = -3.0f;
                    for (int r = 0; r < m; r++) ref_rmsnorm(x + r * LD, w, n, eps, o0 + r * LD);
                    if (inplace) {
                        memcpy(o1, x, sizeof(float) * (size_t)m * LD);
                        k->rmsnorm_rows(o1, LD, w, n, eps, o1, LD, m);
                        for (int r = 0; r < m; r++)
                            for (int j = n; j < LD; j++) o1[r * LD + j] = -3.0f; /* x's pad */
                    } else k->rmsnorm_rows(x, LD, w, n, eps, o1, LD, m);
                    size_t at;
                    rows += m;
                    if (!same_bits(o0, o1, (size_t)m * LD, &at) && bad++ == 0)
                        snprintf(first, sizeof first,
                                 "; first: trial %d, m %d, n %d, row %zu col %zu: %08x, "
                                 "ref_rmsnorm %08x",
                                 trial, m, n, at / LD, at % LD, cis2_f2u(o1[at]), cis2_f2u(o0[at]));
                }
        snprintf(name, sizeof name,
                 "rmsnorm_rows %s: %d adversarial rows bit-identical to ref_rmsnorm (pads "
                 "untouched, in place too)",
                 ISAS(ii), rows);
        CHECK(name, bad == 0, "%d row groups differ%s", bad, first);
    }
}

/* The vectorized RoPE against ref_rope_rotate head by head: head sizes
 * whose halves are and are not whole vectors, 1..12 heads, adversarial
 * values (NaN heads go to the reference), tables of a real position and of
 * adversarial values. */
static void test_rope(void)
{
    static const int HD[] = { 64, 32, 128, 48, 2 };
    enum { MAXH = 12, MAXD = 128 };
    static float a[MAXH * MAXD], b[MAXH * MAXD], cv[MAXD / 2], sv[MAXD / 2], inv[MAXD / 2];
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[160];
        const fast_kernels *k = fast_kernels_pick(ISAS(ii), err);
        if (!k || !k->rope) continue;
        int bad = 0, heads = 0;
        for (int trial = 0; trial < 24; trial++)
            for (size_t di = 0; di < sizeof HD / sizeof *HD; di++) {
                int hd = HD[di], half = hd / 2, nh = 1 + trial % MAXH;
                for (int i = 0; i < half; i++) inv[i] = 1.0f / (float)(1 + 3 * i);
                ref_rope_table(inv, half, 17 + 1000 * trial, cv, sv);
                if (trial % 4 == 3)
                    for (int i = 0; i < half; i++) {
                        cv[i] = adversarial(trial % 8);
                        sv[i] = adversarial((trial + 3) % 8);
                    }
                for (int j = 0; j < nh * hd; j++) a[j] = b[j] = adversarial((j / hd + trial) % 8);
                for (int h = 0; h < nh; h++) ref_rope_rotate(a + h * hd, hd, cv, sv);
                k->rope(b, nh, hd, cv, sv);
                size_t at;
                heads += nh;
                if (!same_bits(a, b, (size_t)nh * hd, &at)) bad++;
            }
        snprintf(name, sizeof name,
                 "rope %s: %d adversarial heads bit-identical to ref_rope_rotate", ISAS(ii), heads);
        CHECK(name, bad == 0, "%d head groups differ", bad);
    }
}

/* The vectorized logits scan against cis2_argmax and a scalar NaN search:
 * lengths 1..203 and a vocabulary's 49152, adversarial rows (ties, +-0,
 * +-inf, NaNs including a leading NaN, all NaN), and the maximum planted at
 * the first and last index. */
static void test_scan(void)
{
    enum { N = 49152 };
    static float x[N];
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[160];
        const fast_kernels *k = fast_kernels_pick(ISAS(ii), err);
        if (!k || !k->scan) continue;
        int bad = 0, rows = 0;
        for (int row = 0; row < 96; row++)
            for (int n = 1; n <= N; n = n < 40 ? n + 1 : n < 203 ? n + 27 : n < N ? N : N + 1) {
                for (int j = 0; j < n; j++) x[j] = adversarial(row % 8);
                if (row % 12 == 8) x[0] = cis2_u2f(0x7FC00000u); /* leading NaN */
                if (row % 12 == 9)
                    for (int j = 0; j < n; j++) x[j] = cis2_u2f(0xFFC00000u | (uint32_t)j);
                if (row % 12 == 10) x[n - 1] = 3e38f;
                if (row % 12 == 11) x[0] = 3e38f;
                int want_nan = -1, got_nan = -2;
                for (int j = 0; j < n && want_nan < 0; j++)
                    if ((cis2_f2u(x[j]) & 0x7FFFFFFFu) > 0x7F800000u) want_nan = j;
                int32_t want = cis2_argmax(x, n), got = k->scan(x, n, &got_nan);
                rows++;
                if (want != got || want_nan != got_nan) bad++;
            }
        snprintf(name, sizeof name,
                 "scan %s: argmax and first NaN of %d adversarial rows equal the scalar loops",
                 ISAS(ii), rows);
        CHECK(name, bad == 0, "%d rows differ", bad);
    }
}

/* matmul_swiglu (gate, up and SwiGLU of T tokens in one dispatch) against
 * ref_matvec and ref_swiglu on backend b; rows 5..1536 (1 to 96 tiles: one
 * to four tasks a thread, partial last tiles), T = 1..16 (a decode step's
 * sequences) and 40 (token chunks). perturb: the reference is computed with
 * the last token's input doubled (the negative control: every case must
 * then differ). Returns the cases that differ. */
static int matmul_swiglu_bad(cis2_backend *b, int perturb, int *count)
{
    static const int R[] = { 5, 100, 600, 1536 }, TT[] = { 1, 2, 3, 5, 8, 13, 16, 40 };
    const int C = 72;
    int bad = 0;
    for (size_t ri = 0; ri < sizeof R / sizeof *R; ri++)
        for (size_t ti = 0; ti < sizeof TT / sizeof *TT; ti++) {
            int n = R[ri], T = TT[ti];
            size_t nt = (size_t)T * n;
            tweight g, u;
            make_weight(&g, n, C, CIS2_DT_BF16);
            make_weight(&u, n, C, CIS2_DT_BF16);
            float *x = malloc((size_t)T * C * sizeof(float)), *y = malloc(6 * nt * sizeof(float));
            for (int i = 0; i < T * C; i++) x[i] = 4.0f * rval(); /* sums reach silu's tails */
            float *g0 = y, *u0 = y + nt, *a0 = y + 2 * nt, *g1 = y + 3 * nt, *u1 = y + 4 * nt,
                  *a1 = y + 5 * nt;
            b->matmul_swiglu(b, &g.w, &u.w, x, T, g1, u1, a1);
            for (int i = 0; perturb && i < C; i++) x[(size_t)(T - 1) * C + i] *= 2.0f;
            for (int t = 0; t < T; t++) {
                size_t o = (size_t)t * n;
                ref_matvec(g.f32, n, C, x + (size_t)t * C, g0 + o);
                ref_matvec(u.f32, n, C, x + (size_t)t * C, u0 + o);
                ref_swiglu(g0 + o, u0 + o, a0 + o, n);
            }
            size_t at;
            (*count)++;
            /* g0, u0, a0 and g1, u1, a1 are each one run of 3 * nt floats */
            if (!same_bits(g0, g1, 3 * nt, &at)) bad++;
            free(x);
            free(y);
            free_weight(&g);
            free_weight(&u);
        }
    return bad;
}

/* matmul_multi (q/k/v, gate/up in one dispatch) and parallel_for: three
 * linears of different shapes over one input, every ISA x threads, against
 * ref_matvec; parallel_for visits every index exactly once. */
static int pf_hits[1000];
static void pf_mark(void *ctx, int i)
{
    (void)ctx;
    pf_hits[i]++;
}
static void test_matmul_multi(void)
{
    static const int R[3] = { 100, 33, 17 }, TT[] = { 1, 2, 5, 13, 40, 97 };
    const int C = 64;
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[160];
        if (!fast_kernels_pick(ISAS(ii), err)) continue;
        for (size_t ti = 0; ti < sizeof THREADS / sizeof *THREADS; ti++) {
            cis2_backend *b;
            if (cis2_backend_fast_create(&b, ISAS(ii), THREADS[ti], err)) {
                printf("FAIL create: %s\n", err);
                unit_failed++;
                continue;
            }
            tweight w[3];
            for (int i = 0; i < 3; i++)
                make_weight(&w[i], R[i], C, i == 1 ? CIS2_DT_F32 : CIS2_DT_BF16);
            int bad = 0, count = 0;
            for (size_t k = 0; k < sizeof TT / sizeof *TT; k++) {
                int T = TT[k];
                float *X = malloc((size_t)T * C * sizeof(float)), *Y0[3], *Y1[3];
                for (int i = 0; i < T * C; i++) X[i] = rval();
                for (int i = 0; i < 3; i++) {
                    Y0[i] = malloc((size_t)T * R[i] * sizeof(float));
                    Y1[i] = malloc((size_t)T * R[i] * sizeof(float));
                    memset(Y1[i], 0xA5, (size_t)T * R[i] * sizeof(float));
                    for (int t = 0; t < T; t++)
                        ref_matvec(w[i].f32, R[i], C, X + (size_t)t * C, Y0[i] + (size_t)t * R[i]);
                }
                const cis2_weight *wp[3] = { &w[0].w, &w[1].w, &w[2].w };
                float *const yp[3] = { Y1[0], Y1[1], Y1[2] };
                b->matmul_multi(b, 3, wp, X, T, yp);
                for (int i = 0; i < 3; i++) {
                    size_t at;
                    count++;
                    if (!same_bits(Y0[i], Y1[i], (size_t)T * R[i], &at)) bad++;
                    free(Y0[i]);
                    free(Y1[i]);
                }
                free(X);
            }
            int pf_bad = 0;
            for (int n = 1; n <= 1000; n += 111) {
                memset(pf_hits, 0, sizeof pf_hits);
                b->parallel_for(b, n, pf_mark, NULL);
                for (int i = 0; i < 1000; i++)
                    if (pf_hits[i] != (i < n)) pf_bad++;
            }
            snprintf(name, sizeof name,
                     "matmul_multi %s threads=%d: %d outputs bit-identical; parallel_for covers "
                     "each index once",
                     ISAS(ii), THREADS[ti], count);
            CHECK(name, bad == 0 && pf_bad == 0, "%d of %d differ, parallel_for %d wrong", bad,
                  count, pf_bad);
            int sw_count = 0, sw_bad = matmul_swiglu_bad(b, 0, &sw_count);
            snprintf(name, sizeof name,
                     "matmul_swiglu %s threads=%d: %d shapes x T, gate, up and act bit-identical",
                     ISAS(ii), THREADS[ti], sw_count);
            CHECK(name, sw_bad == 0, "%d of %d differ", sw_bad, sw_count);
            int neg_count = 0, neg_bad = matmul_swiglu_bad(b, 1, &neg_count);
            snprintf(name, sizeof name,
                     "matmul_swiglu %s threads=%d: negative control, %d cases with the last "
                     "token's input doubled all caught",
                     ISAS(ii), THREADS[ti], neg_count);
            CHECK(name, neg_bad == neg_count, "%d of %d caught", neg_bad, neg_count);
            for (int i = 0; i < 3; i++) free_weight(&w[i]);
            b->destroy(b);
        }
    }
}

/* A fast backend, or NULL after reporting the failure. */
static cis2_backend *fast_or_fail(const char *isa, int threads)
{
    char err[CIS2_ERR_LEN];
    cis2_backend *b;
    if (!cis2_backend_fast_create(&b, isa, threads, err)) return b;
    printf("FAIL create: %s\n", err);
    unit_failed++;
    return NULL;
}

/* One attention case, fast vs cis2_ref_attention (the oracle); 0 = same
 * bits. mode 1: adversarial values (-0.0 in a fifth of the keys and a third
 * of the queries, one NaN key element, one +inf); mode 2: key-blocked
 * blocks 0 and 1 swapped (must differ). */
static int attn_case_m(cis2_backend *b, int hd, int nh, int nkv, int pos0, int T, size_t *at,
                       int mode)
{
    int n = pos0 + T, qd = nh * hd, kvd = nkv * hd;
    float *q = malloc((size_t)T * qd * 4), *kc = malloc((size_t)n * kvd * 4),
          *vc = malloc((size_t)n * kvd * 4), *o0 = malloc((size_t)T * qd * 4),
          *o1 = malloc((size_t)T * qd * 4), *sc = malloc((size_t)n * 4);
    /* mode 2: moderate values in [-0.5, 0.5) (rval's +-1e8 make one key
     * take a whole softmax row), so that every key's weight shows */
    for (int i = 0; i < T * qd; i++)
        q[i] = mode == 1 && i % 3 == 0 ? -0.0f : mode == 2 ? rmod() * 0.5f : rval() * 4.0f;
    for (int i = 0; i < n * kvd; i++) {
        kc[i] = mode == 1 && i % 5 == 0 ? -0.0f : mode == 2 ? rmod() * 0.5f : rval();
        vc[i] = rval();
    }
    /* a NaN key in KV head 0, a +inf one in the last (not both in one
     * head: a row of scores holding NaN and +inf is left to unit tests of
     * softmax) */
    if (mode == 1 && (nkv > 1 || n % 2)) kc[(size_t)(n / 2) * kvd + 3] = cis2_u2f(0x7FC00000u);
    if (mode == 1 && (nkv > 1 || !(n % 2))) kc[(size_t)n * kvd - 1] = cis2_u2f(0x7F800000u);
    float scale = cis2_rsqrt((float)hd);
    cis2_ref_attention(q, kc, vc, T, pos0, nh, nkv, hd, scale, o0, sc);
    attention_kb(b, q, kc, vc, T, pos0, nh, nkv, hd, scale, o1, mode == 2);
    int bad = !same_bits(o0, o1, (size_t)T * qd, at);
    free(q);
    free(kc);
    free(vc);
    free(o0);
    free(o1);
    free(sc);
    return bad;
}

static int attn_case(cis2_backend *b, int hd, int nh, int nkv, int pos0, int T, size_t *at)
{
    return attn_case_m(b, hd, nh, nkv, pos0, T, at, 0);
}

/* Decode over the key-blocked keys (engine/backend.h) at contexts on both
 * sides of the 16-key blocks and of the T = 1 paths' switches, GQA
 * groups 1/3/9, head_dim 16/64, threads 1 and 2, every ISA; random and
 * adversarial values (mode 1); the negative control: blocks swapped in the
 * copy the fast path reads must change the result. */
static void test_attention_kb(void)
{
    static const int N[] = { 1, 15, 16, 17, 31, 33, 255, 256, 257, 511, 512, 513 };
    static const int GR[][2] = { { 1, 2 }, { 3, 3 }, { 9, 1 } }; /* group, n_kv */
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[200];
        if (!fast_kernels_pick(ISAS(ii), err)) continue; /* skipped in test_attention */
        for (int th = 1; th <= 2; th++) {
            cis2_backend *b = fast_or_fail(ISAS(ii), th);
            if (!b) continue;
            int bad = 0, count = 0, ctl = 0, nctl = 0;
            char why[200] = "";
            for (int hd = 16; hd <= 64; hd *= 4)
                for (size_t gi = 0; gi < sizeof GR / sizeof *GR; gi++)
                    for (size_t c = 0; c < sizeof N / sizeof *N; c++)
                        for (int mode = 0; mode < 3; mode++) {
                            int nkv = GR[gi][1], nh = GR[gi][0] * nkv;
                            size_t at;
                            if (mode == 2 && N[c] <= CIS2_KB) continue;
                            int r = attn_case_m(b, hd, nh, nkv, N[c] - 1, 1, &at, mode);
                            if (mode == 2) {
                                nctl++;
                                ctl += r;
                                continue;
                            }
                            count++;
                            if (r && !bad)
                                snprintf(why, sizeof why, "hd=%d nh=%d nkv=%d n=%d mode=%d: %zu",
                                         hd, nh, nkv, N[c], mode, at);
                            bad += r;
                        }
            snprintf(name, sizeof name,
                     "attention key-blocked %s threads=%d: %d decode cases bit-identical", ISAS(ii),
                     th, count);
            CHECK(name, b->wants_kb && bad == 0, "%d of %d differ; first %s", bad, count, why);
            snprintf(name, sizeof name,
                     "attention key-blocked %s threads=%d: negative control, %d cases with "
                     "swapped blocks all differ",
                     ISAS(ii), th, nctl);
            CHECK(name, ctl == nctl, "only %d of %d differ", ctl, nctl);
            b->destroy(b);
        }
    }
}

/* The register-blocked attention: prefill tiles of 8 query tokens x 32 keys
 * and 4 tokens x 64 dims, decode key blocks of 64 scored for a whole GQA
 * group. Token counts and positions that cross every tile edge (1, 15-17,
 * 31-33, 63-65 ...), head_dim 16/40/64/96 and the GQA ratios 1/3/4/9, thread
 * counts 1 and 2, every ISA; and a prefill whose last token is at 8191. */
static void test_attention_tiles(void)
{
    static const int HD[] = { 16, 40, 64, 96 };
    static const int GR[][2] = { { 1, 2 }, { 3, 3 }, { 4, 1 }, { 9, 1 } }; /* group, n_kv */
    static const int PF[][2] = { { 0, 1 },   { 0, 2 },  { 0, 9 },   { 0, 17 },   { 3, 30 },
                                 { 15, 33 }, { 31, 1 }, { 40, 24 }, { 100, 65 }, { 200, 7 } };
    static const int DEC[] = { 512, 513, 527, 528, 575, 576, 577, 1087, 1153 };
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[200];
        if (!fast_kernels_pick(ISAS(ii), err)) continue; /* skipped in test_attention */
        for (int th = 1; th <= 2; th++) {
            cis2_backend *b = fast_or_fail(ISAS(ii), th);
            if (!b) continue;
            int bad = 0, count = 0;
            char why[200] = "";
            for (size_t hi = 0; hi < sizeof HD / sizeof *HD; hi++)
                for (size_t gi = 0; gi < sizeof GR / sizeof *GR; gi++) {
                    int hd = HD[hi], nkv = GR[gi][1], nh = GR[gi][0] * nkv;
                    for (size_t c = 0; c < sizeof PF / sizeof *PF + sizeof DEC / sizeof *DEC; c++) {
                        int pf = c < sizeof PF / sizeof *PF, di = (int)(c - sizeof PF / sizeof *PF);
                        if (!pf && (int)(c + hi + gi) % 3) continue; /* a third: time */
                        int pos0 = pf ? PF[c][0] : DEC[di] - 1, T = pf ? PF[c][1] : 1;
                        size_t at;
                        count++;
                        if (attn_case(b, hd, nh, nkv, pos0, T, &at)) {
                            if (!bad)
                                snprintf(why, sizeof why, "hd=%d nh=%d nkv=%d pos0=%d T=%d: %zu",
                                         hd, nh, nkv, pos0, T, at);
                            bad++;
                        }
                    }
                }
            snprintf(name, sizeof name,
                     "attention tiles %s threads=%d: %d cases (prefill and decode across tile "
                     "edges) bit-identical",
                     ISAS(ii), th, count);
            CHECK(name, bad == 0, "%d of %d differ; first %s", bad, count, why);
            if (th == 2) {
                size_t at;
                snprintf(name, sizeof name,
                         "attention tiles %s threads=2: prefill of 21 tokens ending at 8191",
                         ISAS(ii));
                CHECK(name, !attn_case(b, 64, 9, 3, 8171, 21, &at), "element %zu differs", at);
            }
            b->destroy(b);
        }
    }
}

int main(void)
{
    if (cis2_fpenv_pin()) {
        printf("FAIL fpenv pin\n");
        return 1;
    }
    test_matmul_multi();
    test_swiglu();
    test_add();
    test_rmsnorm_rows();
    test_rope();
    test_scan();
    test_pack();
    test_exp16();
    test_softmax();
    test_matmul();
    test_attention();
    test_attention_tiles();
    test_attention_kb();
    UNIT_END();
}
