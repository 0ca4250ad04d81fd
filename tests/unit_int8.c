/* The int8 kernels (docs/quantization.md): every exact int8 path (scalar,
 * SSE2, AVX2, AVX-512, NEON) bit-identical to the reference ref_matvec_i8
 * over many shapes (odd rows/cols, rows not a multiple of the 16-row tile,
 * T = 1..16, 25, 40; rows of 1535..1537, at and past the AVX-512 panel's
 * 1536), tile ranges and thread counts 1, 2, 3, 7; the reference itself
 * against a hand-derived value; and the approximate arm-D kernels
 * (approx_int8.c) within their derived error bound of the exact result. */
#include "unit.h"
#include "engine/fast.h"
#include "kernels/approx_int8.h"
#include "kernels/kernels.h"
#include "unit_rand.h"
#include <math.h>

/* int8 weights: the whole range, -128 included (others' checkpoints may hold it). */
static int8_t rq(void) { return (int8_t)(uint8_t)(rnd() >> 24); }

/* Every ISA path, from the registry (kernels/pick.c), in its order. */
#define ISAS(i) (fast_isas[i].name)
static const int THREADS[] = { 1, 2, 3, 7 };

/* One int8 linear, packed by the model loader's packer (cis2_weight_pack_i8,
 * the one quantized checkpoints go through): tiles and scales point into buf. */
typedef struct {
    int rows, cols, ntiles;
    int8_t *q;
    float *s;
    void *buf;
    const int8_t *tiles;
    const float *scales;
    int bad; /* cis2_weight_pack_i8's answer: -1, or the first NaN/Inf scale's row */
} lin8;

static void lin8_make(lin8 *w, int rows, int cols)
{
    w->rows = rows;
    w->cols = cols;
    w->ntiles = (rows + FAST_TILE - 1) / FAST_TILE;
    w->q = malloc((size_t)rows * cols + 1);
    w->s = malloc((size_t)rows * sizeof(float));
    for (size_t i = 0; i < (size_t)rows * cols; i++) w->q[i] = rq();
    for (int r = 0; r < rows; r++) w->s[r] = (rnd() % 11) ? fabsf(rval()) : 0.0f;
    w->buf = aligned_alloc(64, cis2_weight_bytes(rows, cols, CIS2_WF_I8));
    /* The scales as an F32 tensor's bytes (little-endian, as on every host
     * the suite runs on: x86-64, aarch64, wasm32). */
    cis2_weight cw;
    w->bad = cis2_weight_pack_i8(&cw, w->buf, (const uint8_t *)w->q, (const uint8_t *)w->s,
                                 CIS2_DT_F32, rows, cols);
    w->tiles = cw.tiles;
    w->scales = cw.scales;
}
static void lin8_free(lin8 *w)
{
    free(w->q);
    free(w->s);
    free(w->buf);
}

/* ------------------------------------------------------------ reference */
static void test_ref_by_hand(void)
{
    /* Row 0: 0 + 3*0.5 = 1.5; 1.5 + (-2)*0.25 = 1; 1 + 127*2^-20 = 1 + 127*2^-20
     * (exact: 24 bits); times s = 0.5 -> 0.5 + 127*2^-21. Row 1: the sum
     * 1 + 2^-24 rounds to 1 (ties to even), then + 2^-24 rounds to 1 again:
     * left to right gives 1, not 1 + 2^-23; times s = 3 -> 3. */
    const int8_t q[6] = { 3, -2, 127, 1, 1, 1 };
    const float s[2] = { 0.5f, 3.0f };
    const float x0[3] = { 0.5f, 0.25f, 0x1p-20f };
    float y[2];
    ref_matvec_i8(q, s, 1, 3, x0, y);
    CHECK("ref_matvec_i8 by hand: 0.5 * (3*0.5 + -2*0.25 + 127*2^-20)",
          cis2_f2u(y[0]) == cis2_f2u(0.5f + 127 * 0x1p-21f), "got %a", (double)y[0]);
    const float x1[3] = { 1.0f, 0x1p-24f, 0x1p-24f };
    ref_matvec_i8(q + 3, s + 1, 1, 3, x1, y + 1);
    CHECK("ref_matvec_i8 by hand: strictly left to right (1 + 2^-24 + 2^-24 = 1), then * 3",
          cis2_f2u(y[1]) == cis2_f2u(3.0f), "got %a", (double)y[1]);
    /* FTZ: a subnormal activation is read as zero (DAZ), a tiny sum flushes. */
    const int8_t q2[2] = { 1, -1 };
    const float s2[1] = { 1.0f }, x2[2] = { 0x1p-126f, 0x1.000002p-126f };
    ref_matvec_i8(q2, s2, 1, 2, x2, y);
    CHECK("ref_matvec_i8 by hand: FLT_MIN - (FLT_MIN + ulp) flushes to -0 (§1.3)",
          cis2_f2u(y[0]) == 0x80000000u, "got 0x%08X", (unsigned)cis2_f2u(y[0]));
}

/* --------------------------------------------------------------- fast C */
typedef struct {
    const fast_kernels *k;
    const lin8 *w;
    const float *X;
    float *Y;
    int T, tpt, kpt, nkc;
} job;

/* One task: tiles [t0, t0+tpt) x tokens [k0, k0+kpt), as the engine splits. */
static void task(void *ctx, int i, int tid)
{
    (void)tid;
    const job *j = ctx;
    const lin8 *w = j->w;
    int rg = i / j->nkc, tc = i % j->nkc;
    int t0 = rg * j->tpt, nt = w->ntiles - t0 < j->tpt ? w->ntiles - t0 : j->tpt;
    int k0 = tc * j->kpt, T = j->T - k0 < j->kpt ? j->T - k0 : j->kpt;
    size_t K = (size_t)w->cols;
    j->k->mm_i8(w->tiles + (size_t)t0 * K * FAST_TILE, w->scales + (size_t)t0 * FAST_TILE, (int)K,
                nt, w->rows - t0 * FAST_TILE, j->X + (size_t)k0 * K, (int)K, T,
                j->Y + (size_t)k0 * w->rows + (size_t)t0 * FAST_TILE, w->rows);
}

/* One weight shape against the reference: every T of TT, each split as the
 * engine makes them (tile ranges of 1, 3 and all tiles; token chunks of 5
 * and 48); *count and *bad counted, the first difference described in why. */
static void check_shape(const fast_kernels *k, tp_pool *pool, int rows, int cols, const int *TT,
                        int nt, int *count, int *bad, char *why, size_t whylen)
{
    lin8 w;
    lin8_make(&w, rows, cols);
    for (int tk = 0; tk < nt; tk++) {
        int T = TT[tk];
        size_t ny = (size_t)T * rows;
        float *X = malloc((size_t)T * cols * sizeof(float));
        float *Y0 = malloc(ny * sizeof(float)), *Y1 = malloc(ny * sizeof(float));
        for (int i = 0; i < T * cols; i++) X[i] = rval();
        for (int t = 0; t < T; t++)
            ref_matvec_i8(w.q, w.s, rows, cols, X + (size_t)t * cols, Y0 + (size_t)t * rows);
        static const int TPT[] = { 1, 3, 1000 }, KPT[] = { 5, 48 };
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 2; b++) {
                job j = { k, &w, X, Y1, T, TPT[a], KPT[b], (T + KPT[b] - 1) / KPT[b] };
                int ntask = ((w.ntiles + j.tpt - 1) / j.tpt) * j.nkc;
                memset(Y1, 0xA5, ny * sizeof(float));
                tp_run(pool, ntask, task, &j);
                size_t at;
                (*count)++;
                if (!same_bits(Y0, Y1, ny, &at)) {
                    if (!*bad)
                        snprintf(why, whylen,
                                 "rows=%d cols=%d T=%d split %d/%d: element %zu "
                                 "0x%08X vs ref 0x%08X",
                                 rows, cols, T, TPT[a], KPT[b], at, (unsigned)cis2_f2u(Y1[at]),
                                 (unsigned)cis2_f2u(Y0[at]));
                    (*bad)++;
                }
            }
        free(X);
        free(Y0);
        free(Y1);
    }
    lin8_free(&w);
}

static void test_fast_i8(void)
{
    static const int R[] = { 1, 5, 16, 17, 33, 100, 129, 200 };
    static const int C[] = { 1, 3, 8, 17, 64, 100 };
    /* every T a decode step of 1..16 sequences can have, then prefill sizes
     * (T > 16: the AVX-512 f32 panel) */
    static const int TT[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 25, 40 };
    /* Long rows: the AVX-512 panel holds 1536 columns (two tiles); a longer
     * row is summed a 1536-column range at a time, each range going on from
     * the last one's stored sums, and scaled after the last: one range, its
     * edge, two ranges, three (the last one column); 17 and 33 rows end in a
     * part tile, 33 in an odd tile alone in its pair. */
    static const int RL[] = { 17, 33 }, CL[] = { 1535, 1536, 1537, 3072, 3073 },
                     TL[] = { 1, 16, 17, 25 };
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        char err[CIS2_ERR_LEN], name[160];
        const fast_kernels *k = fast_kernels_pick(ISAS(ii), err);
        if (!k) {
            snprintf(name, sizeof name, "mm_i8 %s", ISAS(ii));
            SKIP(name, "%s", err);
            continue;
        }
        if (!k->mm_i8) {
            snprintf(name, sizeof name, "mm_i8 %s is in the kernel table", ISAS(ii));
            CHECK(name, 0, "NULL");
            continue;
        }
        for (size_t ti = 0; ti < sizeof THREADS / sizeof *THREADS; ti++) {
            tp_pool *pool = tp_new(THREADS[ti], err);
            if (!pool) {
                printf("FAIL tp_new: %s\n", err);
                unit_failed++;
                continue;
            }
            int bad = 0, count = 0;
            char why[200] = "";
            for (size_t ri = 0; ri < sizeof R / sizeof *R; ri++)
                for (size_t ci = 0; ci < sizeof C / sizeof *C; ci++)
                    check_shape(k, pool, R[ri], C[ci], TT, (int)(sizeof TT / sizeof *TT), &count,
                                &bad, why, sizeof why);
            for (size_t ri = 0; ri < sizeof RL / sizeof *RL; ri++)
                for (size_t ci = 0; ci < sizeof CL / sizeof *CL; ci++)
                    check_shape(k, pool, RL[ri], CL[ci], TL, (int)(sizeof TL / sizeof *TL), &count,
                                &bad, why, sizeof why);
            snprintf(name, sizeof name,
                     "mm_i8 %s threads=%d: %d shapes/splits bit-identical to ref", ISAS(ii),
                     THREADS[ti], count);
            CHECK(name, bad == 0, "%d of %d differ; first %s", bad, count, why);
            tp_free(pool);
        }
    }
}

/* The kernels read only the packed bytes: a weight changed after packing
 * changes nothing, one changed in the tiles changes exactly its row. */
static void test_pack_layout(void)
{
    lin8 w;
    lin8_make(&w, 37, 19);
    int ok = 1;
    for (int r = 0; r < 48 && ok; r++)
        for (int k = 0; k < 19 && ok; k++) {
            int8_t want = r < 37 ? w.q[(size_t)r * 19 + k] : 0;
            ok = w.tiles[((size_t)(r / 16) * 19 + k) * 16 + r % 16] == want;
        }
    for (int r = 0; r < 48 && ok; r++)
        ok = cis2_f2u(w.scales[r]) == (r < 37 ? cis2_f2u(w.s[r]) : 0u);
    CHECK("cis2_weight_pack_i8: data[(i*K + k)*16 + lane], scales[16i + lane], pad rows q = s = 0",
          ok && w.bad == -1, "layout differs, or the pack reported row %d", w.bad);
    lin8_free(&w);
}

/* ------------------------------------------------------------- arm D */
/* The bound of docs/quantization.md §6 on |D - C| for one output, in double:
 * activation rounding s_x*(1/2 + 2^-14) per unit of |q|, C's own rounding
 * (K+2)u of sum |q x| (u = 2^-24) plus K flushes, 4u of |D| for D's float
 * epilogue, and the flush terms. */
static double d_bound(const int8_t *q, float s, int K, const float *x, float yd)
{
    double ax = 0, sq = 0, sqx = 0;
    for (int k = 0; k < K; k++) ax = fmax(ax, fabs((double)x[k]));
    double sx = ax / 127.0;
    for (int k = 0; k < K; k++) {
        sq += fabs((double)q[k]);
        sqx += fabs((double)q[k] * (double)x[k]);
    }
    double u = 0x1p-24, tiny = 0x1p-126;
    double flush = ax < 127 * tiny ? ax * sq : 0; /* the activation scale flushed to zero */
    return fabs((double)s) * (sx * (0.5 + 0x1p-14) * sq + (K + 2) * u * sqx + K * tiny + flush) +
           4 * u * fabs((double)yd) + tiny;
}

static void test_approx(void)
{
    static const int R[] = { 1, 7, 16, 33, 100, 257 };
    static const int C[] = { 1, 3, 4, 17, 64, 576, 1536 };
    const char *paths[8];
    int np = approx_i8_paths(paths, 8);
    char name[200];
    snprintf(name, sizeof name, "approx int8 paths on this CPU: %d (first %s)", np,
             np ? paths[0] : "-");
    CHECK(name, np >= 1, "none");
    for (int pi = 0; pi < np; pi++) {
        const approx_i8_kernel *ak = approx_i8_pick(paths[pi]);
        int bad = 0, count = 0, differ = 0;
        double worst = 0, cos_min = 1;
        char why[200] = "";
        for (size_t ri = 0; ri < sizeof R / sizeof *R; ri++)
            for (size_t ci = 0; ci < sizeof C / sizeof *C; ci++) {
                int rows = R[ri], cols = C[ci];
                lin8 w;
                lin8_make(&w, rows, cols);
                for (int i = 0; i < rows * cols; i++)
                    if (w.q[i] == -128) w.q[i] = -127; /* symmetric weights (the quantizer's) */
                for (int r = 0; r < rows; r++)
                    w.s[r] = (float)(1 + rnd() % 1000) * 1e-5f; /* realistic */
                approx_i8_packed p;
                char err[CIS2_ERR_LEN];
                if (approx_i8_pack(w.q, w.s, rows, cols, &p, err)) {
                    bad++;
                    snprintf(why, sizeof why, "pack: %s", err);
                    lin8_free(&w);
                    continue;
                }
                for (int T = 1; T <= 5; T += 4) {
                    float *X = malloc((size_t)T * cols * 4), *Yc = malloc((size_t)T * rows * 4),
                          *Yd = malloc((size_t)T * rows * 4);
                    for (int i = 0; i < T * cols; i++) {
                        float u = (float)((rnd() >> 40) & 0xFFFFFF) / 16777216.0f - 0.5f;
                        X[i] = u * 4.0f;
                    }
                    for (int t = 0; t < T; t++)
                        ref_matvec_i8(w.q, w.s, rows, cols, X + (size_t)t * cols,
                                      Yc + (size_t)t * rows);
                    approx_i8_scratch sc = { 0 };
                    if (approx_i8_matmul(ak, &p, X, T, NULL, Yd, &sc, err)) {
                        bad++;
                        snprintf(why, sizeof why, "matmul: %s", err);
                    }
                    approx_i8_scratch_free(&sc);
                    for (int t = 0; t < T; t++) {
                        double dot = 0, na = 0, nb = 0;
                        for (int r = 0; r < rows; r++) {
                            size_t o = (size_t)t * rows + r;
                            double bnd = d_bound(w.q + (size_t)r * cols, w.s[r], cols,
                                                 X + (size_t)t * cols, Yd[o]);
                            double e = fabs((double)Yd[o] - (double)Yc[o]);
                            count++;
                            if (cis2_f2u(Yd[o]) != cis2_f2u(Yc[o])) differ++;
                            if (bnd > 0 && e / bnd > worst) worst = e / bnd;
                            if (!(e <= bnd)) {
                                if (!bad)
                                    snprintf(why, sizeof why,
                                             "rows=%d cols=%d T=%d out %zu: |D-C| = %g > bound %g",
                                             rows, cols, T, o, e, bnd);
                                bad++;
                            }
                            dot += (double)Yd[o] * Yc[o];
                            na += (double)Yd[o] * Yd[o];
                            nb += (double)Yc[o] * Yc[o];
                        }
                        if (na > 0 && nb > 0 && cols >= 64 && rows >= 16) {
                            double c = dot / sqrt(na * nb);
                            if (c < cos_min) cos_min = c;
                        }
                    }
                    free(X);
                    free(Yc);
                    free(Yd);
                }
                approx_i8_packed_free(&p);
                lin8_free(&w);
            }
        snprintf(name, sizeof name,
                 "approx int8 %s: %d outputs within the derived bound (worst %.3f of it, %d "
                 "differ from exact C, min cos %.6f at K >= 64, rows >= 16)",
                 paths[pi], count, worst, differ, cos_min);
        /* the bound must hold, and the arm must really be approximate (not C) */
        CHECK(name, bad == 0 && differ > count / 4, "%d violations; first %s; %d differ", bad, why,
              differ);
    }
    /* every path computes the same integer sums: identical outputs across paths */
    if (np > 1) {
        lin8 w;
        lin8_make(&w, 67, 333);
        for (int i = 0; i < 67 * 333; i++)
            if (w.q[i] == -128) w.q[i] = -127;
        float X[3 * 333], Y0[3 * 67], Y1[3 * 67], B[67];
        for (int i = 0; i < 3 * 333; i++) X[i] = rval();
        for (int i = 0; i < 67; i++) B[i] = rval();
        approx_i8_packed p;
        char err[CIS2_ERR_LEN];
        int same = approx_i8_pack(w.q, w.s, 67, 333, &p, err) == 0;
        approx_i8_scratch sc = { 0 };
        same = same && !approx_i8_matmul(approx_i8_pick(paths[0]), &p, X, 3, B, Y0, &sc, err);
        for (int pi = 1; pi < np && same; pi++) {
            size_t at;
            same = !approx_i8_matmul(approx_i8_pick(paths[pi]), &p, X, 3, B, Y1, &sc, err) &&
                   same_bits(Y0, Y1, 3 * 67, &at);
        }
        approx_i8_scratch_free(&sc);
        approx_i8_packed_free(&p);
        lin8_free(&w);
        CHECK("approx int8: every path gives the same bits, fused bias too (exact integer sums)",
              same, "paths differ");
    }
    /* negative control: the bound catches one corrupted weight */
    {
        lin8 w;
        lin8_make(&w, 16, 256);
        for (int i = 0; i < 16 * 256; i++) w.q[i] = (int8_t)(w.q[i] / 8);
        for (int r = 0; r < 16; r++) w.s[r] = 0.01f;
        float X[256], Yc[16], Yd[16];
        for (int i = 0; i < 256; i++) X[i] = 1.0f + (float)(i % 7) * 0.125f;
        ref_matvec_i8(w.q, w.s, 16, 256, X, Yc);
        w.q[5 * 256 + 100] = (int8_t)(w.q[5 * 256 + 100] + 100); /* the fault */
        approx_i8_packed p;
        char err[CIS2_ERR_LEN];
        approx_i8_scratch sc = { 0 };
        int ok = !approx_i8_pack(w.q, w.s, 16, 256, &p, err) &&
                 !approx_i8_matmul(approx_i8_pick(paths[0]), &p, X, 1, NULL, Yd, &sc, err);
        int caught = 0;
        for (int r = 0; r < 16 && ok; r++) {
            double e = fabs((double)Yd[r] - Yc[r]);
            if (e > d_bound(w.q + r * 256, w.s[r], 256, X, Yd[r])) caught += r == 5 ? 1 : 100;
        }
        approx_i8_scratch_free(&sc);
        approx_i8_packed_free(&p);
        lin8_free(&w);
        CHECK("approx int8 bound: a corrupted weight (+100 at row 5) is caught, only there",
              ok && caught == 1, "caught=%d", caught);
    }
}

int main(void)
{
    if (cis2_fpenv_pin()) {
        printf("FAIL fpenv pin\n");
        return 1;
    }
    rs = 0x5EED1234; /* this file's own stream */
    test_ref_by_hand();
    test_pack_layout();
    test_fast_i8();
    test_approx();
    UNIT_END();
}
