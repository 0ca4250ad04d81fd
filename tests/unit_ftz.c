/* §1.3 in the flush-to-zero window, on whatever ISA this binary runs: every
 * operation and every kernel gives x86-64's bits (tininess after rounding)
 * where the exact result lies in [FLT_MIN - 2^-151, FLT_MIN) — where
 * aarch64's FPCR.FZ (tininess before rounding) alone would give 0. The
 * expected values come from an independent model of x86-64's MXCSR FTZ+DAZ
 * written here with integer arithmetic (x86_round), not from the code under
 * test; the reference kernels are checked against it too. */
#include "unit.h"
#include "core/fparith.h"
#include "engine/fast.h"
#include "kernels/kernels.h"
#include <math.h>

/* x86-64 FTZ of an exact value held in binary64: round to 24 bits with an
 * unbounded exponent (RNE), flush when that lies below FLT_MIN. */
static uint32_t x86_round(double e)
{
    uint64_t u;
    memcpy(&u, &e, 8);
    uint32_t sign = (uint32_t)(u >> 63) << 31;
    int E = (int)((u >> 52) & 0x7FF);
    if (E == 0x7FF) return sign | 0x7F800000u | (uint32_t)((u & 0xFFFFFFFFFFFFFull) != 0) << 22;
    if (E == 0) return sign;
    uint64_t m = (u & 0xFFFFFFFFFFFFFull) | (1ull << 52);
    uint64_t q = m >> 29, rem = m & ((1ull << 29) - 1), half = 1ull << 28;
    if (rem > half || (rem == half && (q & 1))) q++;
    int e2 = E - 1023;
    if (q == (1ull << 24)) {
        q >>= 1;
        e2++;
    }
    if (e2 < -126) return sign;
    if (e2 > 127) return sign | 0x7F800000u;
    return sign | (uint32_t)(e2 + 127) << 23 | ((uint32_t)q & 0x7FFFFFu);
}
static float daz_bits(float x)
{
    uint32_t b = cis2_f2u(x);
    return (b & 0x7F800000u) ? x : cis2_u2f(b & 0x80000000u);
}
/* A binary64 product of binary32 values is exact; a binary64 sum rounded
 * once more to 24 bits is the correctly rounded sum (53 >= 2*24 + 2). */
static float x86_mul(float a, float b)
{
    return cis2_u2f(x86_round((double)daz_bits(a) * (double)daz_bits(b)));
}
static float x86_add(float a, float b)
{
    return cis2_u2f(x86_round((double)daz_bits(a) + (double)daz_bits(b)));
}
static int in_window(float a, float b)
{
    double e = fabs((double)daz_bits(a) * (double)daz_bits(b));
    return e >= CIS2_FTZ_EDGE && e < 0x1p-126;
}

static int same(const float *a, const float *b, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (cis2_f2u(a[i]) != cis2_f2u(b[i])) {
            *at = i;
            return 0;
        }
    return 1;
}

/* Operands around the window: `base` a binary32 in [FLT_MIN, 2 FLT_MIN) (bf16:
 * 7 mantissa bits), and the floats within a few ulps of FLT_MIN / base, so
 * that their products straddle FLT_MIN in steps of about 2^-24 (relative). */
static float base_at(unsigned i, int bf16)
{
    return cis2_u2f(bf16 ? 0x00800000u + ((i * 37u) % 128u << 16)
                         : 0x00800000u + (i * 7919u) % 0x7FFFFFu);
}
static float inv_at(float base, int off)
{
    volatile double d = 0x1p-126 / (double)base; /* in (0.5, 1]: no flush issue */
    return cis2_u2f(cis2_f2u((float)d) + (uint32_t)off);
}

static void test_scalar_ops(void)
{
    int bad = 0, win = 0, n = 0;
    char why[160] = "";
    for (uint32_t ab = 0x3F7FFF00u; ab < 0x3F800040u; ab++)
        for (uint32_t bb = 0x00800000u; bb < 0x00800040u; bb++) {
            float a = cis2_u2f(ab ^ (bb & 1u) << 31), b = cis2_u2f(bb);
            volatile float va = a, vb = b;
            float got = cis2_fmul(va, vb), want = x86_mul(a, b);
            win += in_window(a, b);
            n++;
            if (cis2_f2u(got) != cis2_f2u(want)) {
                if (!bad)
                    snprintf(why, sizeof why, "0x%08X*0x%08X = 0x%08X, x86-64 0x%08X",
                             (unsigned)cis2_f2u(a), (unsigned)cis2_f2u(b), (unsigned)cis2_f2u(got),
                             (unsigned)cis2_f2u(want));
                bad++;
            }
        }
    char name[160];
    snprintf(name, sizeof name, "ftz-window cis2_fmul = x86-64 (%d products, %d in the window)", n,
             win);
    CHECK(name, bad == 0 && win > 30, "%d differ (%d in the window); first %s", bad, win, why);
    /* The smallest reproducer (docs/conformance.md): 0x3F7FFFFE * 0x00800001. */
    volatile float a = cis2_u2f(0x3F7FFFFEu), b = cis2_u2f(0x00800001u);
    CHECK("ftz-window 0x3F7FFFFE*0x00800001 = 0x00800000", cis2_f2u(cis2_fmul(a, b)) == 0x00800000u,
          "got 0x%08X", (unsigned)cis2_f2u(cis2_fmul(a, b)));
    /* Control: the bare hardware multiply. On aarch64 (FZ flushes before
     * rounding) it must differ here, or this test proves nothing there. */
    volatile float hw = a * b;
#if defined(__aarch64__)
    CHECK("ftz-window control: bare aarch64 fmul gives +0 there", cis2_f2u(hw) == 0u, "got 0x%08X",
          (unsigned)cis2_f2u(hw));
#else
    CHECK("ftz-window control: bare multiply = x86-64", cis2_f2u(hw) == 0x00800000u, "got 0x%08X",
          (unsigned)cis2_f2u(hw));
#endif
    /* Narrowing: binary64 values just below FLT_MIN, both sides of the edge. */
    bad = 0;
    int edge = 0;
    for (int i = -300; i <= 300; i++) {
        volatile double d = 0x1p-126 + (double)i * 0x1p-160;
        for (int s = 0; s < 2; s++, d = -d) {
            uint32_t got = cis2_f2u(cis2_f64_to_f32(d)), want = x86_round(d);
            edge += fabs(d) >= CIS2_FTZ_EDGE && fabs(d) < 0x1p-126;
            if (got != want) {
                if (!bad)
                    snprintf(why, sizeof why, "%a -> 0x%08X, x86-64 0x%08X", (double)d,
                             (unsigned)got, (unsigned)want);
                bad++;
            }
        }
    }
    CHECK("ftz-window cis2_f64_to_f32 = x86-64", bad == 0 && edge > 0, "%d differ; first %s", bad,
          why);
}

/* Every ISA path, from the registry (kernels/pick.c), in its order. */
#define ISAS(i) (fast_isas[i].name)

/* A weight matrix whose products with X land in, below and above the window
 * (and one row that overflows when an operand is doubled); f32 or bf16. */
enum { R = 37, K = 19, TMAX = 6 };
static float wv(int r, int k, int bf16)
{
    if (r == R - 1) return k == 3 ? 0.75f : 0.0f;
    uint32_t b = cis2_f2u(base_at((unsigned)k, bf16)) + (uint32_t)(r % 3) * (bf16 ? 0x10000u : 1u);
    return cis2_u2f(b | ((r + k) % 5 == 0 ? 0x80000000u : 0u));
}
static float xv(int t, int k, int bf16)
{
    if (k == 3 && t == 1) return cis2_u2f(0x7F400000u); /* 2x overflows; w*x = 0.75x does not */
    return inv_at(base_at((unsigned)k, bf16), t - 2);
}

static void test_matmul(void)
{
    for (int bf = 0; bf < 2; bf++) {
        size_t es = bf ? 2 : 4;
        uint8_t *raw = malloc((size_t)R * K * es);
        float *wf = malloc((size_t)R * K * sizeof(float));
        for (int r = 0; r < R; r++)
            for (int k = 0; k < K; k++) {
                float v = wv(r, k, bf);
                wf[r * K + k] = v;
                uint32_t u = cis2_f2u(v);
                if (bf) {
                    uint16_t h = (uint16_t)(u >> 16);
                    memcpy(raw + 2 * ((size_t)r * K + k), &h, 2);
                } else memcpy(raw + 4 * ((size_t)r * K + k), &u, 4);
            }
        cis2_dtype dt = bf ? CIS2_DT_BF16 : CIS2_DT_F32;
        cis2_weight p;
        void *tiles = aligned_alloc(64, cis2_weight_bytes(R, K, cis2_wfmt_of(dt)));
        char err[CIS2_ERR_LEN], name[200], why[200] = "";
        cis2_weight_pack(&p, tiles, raw, dt, R, K); /* the model's tile layout */
        float X[TMAX * K], want[TMAX * R], ref[TMAX * R], got[TMAX * R];
        int win = 0;
        for (int t = 0; t < TMAX; t++) {
            for (int k = 0; k < K; k++) X[t * K + k] = xv(t, k, bf);
            for (int r = 0; r < R; r++) {
                float acc = 0.0f;
                for (int k = 0; k < K; k++) {
                    acc = x86_add(acc, x86_mul(wf[r * K + k], X[t * K + k]));
                    win += in_window(wf[r * K + k], X[t * K + k]);
                }
                want[t * R + r] = acc;
            }
            ref_matvec(wf, R, K, X + t * K, ref + t * R);
        }
        size_t at = 0;
        snprintf(name, sizeof name,
                 "ftz-window ref_matvec %s = x86-64 model (%d products in the window)",
                 bf ? "bf16" : "f32", win);
        CHECK(name, same(ref, want, (size_t)TMAX * R, &at) && win > 50,
              "element %zu: 0x%08X, x86-64 0x%08X (%d in window)", at, (unsigned)cis2_f2u(ref[at]),
              (unsigned)cis2_f2u(want[at]), win);
        for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
            const fast_kernels *kt = fast_kernels_pick(ISAS(ii), err);
            if (!kt) continue;
            int bad = 0;
            for (int T = 1; T <= TMAX; T++) {
                memset(got, 0xA5, sizeof got);
                if (bf) kt->mm_bf16((const uint16_t *)p.tiles, K, p.ntiles, R, X, K, T, got, R);
                else kt->mm_f32((const float *)p.tiles, K, p.ntiles, R, X, K, T, got, R);
                if (!same(got, want, (size_t)T * R, &at) && !bad++)
                    snprintf(why, sizeof why, "T=%d element %zu: 0x%08X, x86-64 0x%08X", T, at,
                             (unsigned)cis2_f2u(got[at]), (unsigned)cis2_f2u(want[at]));
            }
            snprintf(name, sizeof name, "ftz-window matmul %s %s = x86-64 (T = 1..%d)", kt->name,
                     bf ? "bf16" : "f32", TMAX);
            CHECK(name, bad == 0, "%s", why);
        }
        free(tiles);
        free(raw);
        free(wf);
    }
}

/* Attention pieces: scores (q·k then * scale) and the V-mix with
 * probabilities a few ulps above FLT_MIN times values just below 1. */
static void test_attention_kernels(void)
{
    enum { N = 21, HD = 24 };
    static float q[HD], k[N * HD], kt[HD * 24], p[N], v[N * HD], want_s[N], want_o[HD];
    float scale = cis2_rsqrt((float)6); /* not a power of two */
    int win = 0;
    for (int d = 0; d < HD; d++) q[d] = base_at((unsigned)d, 0);
    for (int j = 0; j < N; j++) {
        p[j] = base_at((unsigned)j + 100u, 0);
        for (int d = 0; d < HD; d++) {
            k[j * HD + d] = inv_at(q[d], j % 5 - 2);
            v[j * HD + d] = inv_at(p[j], d % 5 - 2);
            if ((j * 7 + d) % 11 == 0) v[j * HD + d] = -v[j * HD + d];
            kt[d * 24 + j] = k[j * HD + d];
        }
    }
    for (int j = 0; j < N; j++) {
        float acc = 0.0f;
        for (int d = 0; d < HD; d++) {
            acc = x86_add(acc, x86_mul(q[d], k[j * HD + d]));
            win += in_window(q[d], k[j * HD + d]);
        }
        want_s[j] = x86_mul(acc, scale);
    }
    for (int d = 0; d < HD; d++) {
        float acc = 0.0f;
        for (int j = 0; j < N; j++) {
            acc = x86_add(acc, x86_mul(p[j], v[j * HD + d]));
            win += in_window(p[j], v[j * HD + d]);
        }
        want_o[d] = acc;
    }
    char err[CIS2_ERR_LEN], name[200];
    size_t at = 0;
    float sc[N], out[HD];
    /* The reference attention head computes its own softmax; check its pieces. */
    for (int j = 0; j < N; j++) sc[j] = cis2_fmul(cis2_dot_seq(q, k + j * HD, HD), scale);
    snprintf(name, sizeof name, "ftz-window reference scores = x86-64 model (%d in the window)",
             win);
    CHECK(name, same(sc, want_s, N, &at) && win > 50, "key %zu: 0x%08X, x86-64 0x%08X", at,
          (unsigned)cis2_f2u(sc[at]), (unsigned)cis2_f2u(want_s[at]));
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        const fast_kernels *kk = fast_kernels_pick(ISAS(ii), err);
        if (!kk) continue;
        kk->scores(q, k, HD, N, HD, scale, sc);
        snprintf(name, sizeof name, "ftz-window scores %s = x86-64", kk->name);
        CHECK(name, same(sc, want_s, N, &at), "key %zu: 0x%08X, x86-64 0x%08X", at,
              (unsigned)cis2_f2u(sc[at]), (unsigned)cis2_f2u(want_s[at]));
        if (kk->scores_t) {
            kk->scores_t(q, kt, 24, N, HD, scale, sc);
            snprintf(name, sizeof name, "ftz-window scores_t %s = x86-64", kk->name);
            CHECK(name, same(sc, want_s, N, &at), "key %zu", at);
        }
        kk->vmix(p, v, HD, N, HD, out);
        snprintf(name, sizeof name, "ftz-window vmix %s = x86-64", kk->name);
        CHECK(name, same(out, want_o, HD, &at), "dim %zu: 0x%08X, x86-64 0x%08X", at,
              (unsigned)cis2_f2u(out[at]), (unsigned)cis2_f2u(want_o[at]));
        if (kk->vmix_g) {
            kk->vmix_g(p, N, 1, v, HD, N, HD, out, HD);
            snprintf(name, sizeof name, "ftz-window vmix_g %s = x86-64", kk->name);
            CHECK(name, same(out, want_o, HD, &at), "dim %zu", at);
        }
    }
}

/* RMSNorm (§8): a square of a binary32 never lands in the window (its
 * significand squared is at most 1 - 2^-23 below a power of two), so the
 * window cases are the last loop's (x*inv)*w. Rows of one 1 and values
 * near FLT_MIN (their squares flush: the sum is 1, inv the same for every
 * row), weights placing each product within a few ulps of FLT_MIN. */
static void test_rmsnorm(void)
{
    enum { N = 24, M = 9 };
    static float x[M * N], w[N], want[M * N], got[M * N];
    const float eps = 1e-5f;
    float mean = cis2_fdiv(1.0f, (float)N), inv = cis2_rsqrt(cis2_fadd(mean, eps));
    int win = 0, badsum = 0;
    for (int r = 0; r < M; r++)
        for (int i = 0; i < N; i++) {
            float v = i == r % 3 ? 1.0f : base_at((unsigned)i, 0);
            x[r * N + i] = (i + r) % 4 == 1 ? -v : v;
        }
    for (int i = 0; i < N; i++) w[i] = inv_at(x86_mul(base_at((unsigned)i, 0), inv), i % 5 - 2);
    for (int r = 0; r < M; r++) {
        float ss = 0.0f;
        for (int i = 0; i < N; i++) ss = x86_add(ss, x86_mul(x[r * N + i], x[r * N + i]));
        badsum += cis2_f2u(ss) != 0x3F800000u; /* by design every row sums to 1 */
        for (int i = 0; i < N; i++) {
            float t = x86_mul(x[r * N + i], inv);
            win += in_window(t, w[i]);
            want[r * N + i] = x86_mul(t, w[i]);
        }
    }
    char err[CIS2_ERR_LEN], name[200];
    size_t at = 0;
    for (int r = 0; r < M; r++) ref_rmsnorm(x + r * N, w, N, eps, got + r * N);
    snprintf(name, sizeof name, "ftz-window ref_rmsnorm = x86-64 model (%d in the window)", win);
    CHECK(name, same(got, want, (size_t)M * N, &at) && win > 10 && !badsum,
          "element %zu: 0x%08X, x86-64 0x%08X (%d rows not summing to 1)", at,
          (unsigned)cis2_f2u(got[at]), (unsigned)cis2_f2u(want[at]), badsum);
    for (size_t ii = 0; ii < (size_t)FAST_N_ISAS; ii++) {
        const fast_kernels *kk = fast_kernels_pick(ISAS(ii), err);
        if (!kk || !kk->rmsnorm_rows) continue;
        memset(got, 0xA5, sizeof got);
        kk->rmsnorm_rows(x, N, w, N, eps, got, N, M);
        snprintf(name, sizeof name, "ftz-window rmsnorm_rows %s = x86-64 (%d rows)", kk->name, M);
        CHECK(name, same(got, want, (size_t)M * N, &at), "element %zu: 0x%08X, x86-64 0x%08X", at,
              (unsigned)cis2_f2u(got[at]), (unsigned)cis2_f2u(want[at]));
    }
}

int main(void)
{
    if (cis2_fpenv_pin()) {
        printf("FAIL fpenv pin\n");
        return 1;
    }
    test_scalar_ops();
    test_matmul();
    test_attention_kernels();
    test_rmsnorm();
    UNIT_END();
}
