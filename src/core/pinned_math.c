/* §5 reduction primitives and §6 pinned transcendentals. Every line is the
 * spec's own sequence of separately rounded binary32 operations; the build
 * uses -ffp-contract=off so nothing fuses (§1.4). No libm on this path. */
/* Hand-aligned, one spec operation per line: kept as written. */
/* clang-format off */
#include "core/core.h"
/* cis2_fadd & co: plain operators natively, §1.3 in software on wasm32 */
#include "core/fparith.h"

/* ---- §6.2 / §6.3 / §6.5 pinned constants (bit patterns) ---- */
#define EXP_LOG2E 0x3FB8AA3Bu
#define EXP_C1    0x3F318000u
#define EXP_C2    0xB95E8083u
static const uint32_t EXP_P[6] = { 0x39506967u, 0x3AB743CEu, 0x3C088908u,
                                   0x3D2AA9C1u, 0x3E2AAAAAu, 0x3F000000u };
#define PI_2_F64  0x3FF921FB54442D18ull
#define SIN_C0 0xBE2AAAA3u
#define SIN_C1 0x3C08839Eu
#define SIN_C2 0xB94CA1F9u
#define COS_C0 0x3D2AAAA5u
#define COS_C1 0xBAB6061Au
#define COS_C2 0x37CCF5CEu
#define LOG_SQRTHF 0x3F3504F3u
#define LOG_Q1     0xB95E8083u
#define LOG_Q2     0x3F318000u
static const uint32_t LOG_P[9] = { 0x3D9021BBu, 0xBDEBD1B8u, 0x3DEF251Bu, 0xBDFE5D4Fu, 0x3E11E9BFu,
                                   0xBE2AAE50u, 0x3E4CCEADu, 0xBE7FFFFCu, 0x3EAAAAAAu };

static double u2d(uint64_t u) { union { double d; uint64_t u; } c; c.u = u; return c.d; }
static uint64_t d2u(double d) { union { double d; uint64_t u; } c; c.d = d; return c.u; }
#define F(u) cis2_u2f(u)

float cis2_dot_seq(const float *a, const float *b, size_t n)
{
    float acc = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float p = cis2_fmul(a[i], b[i]);   /* separate multiply */
        acc = cis2_fadd(acc, p);           /* separate add, strictly left to right */
    }
    return acc;
}

float cis2_sum_seq(const float *a, size_t n)
{
    float acc = 0.0f;
    for (size_t i = 0; i < n; i++) acc = cis2_fadd(acc, a[i]);
    return acc;
}

float cis2_ldexp_exact(float x, int k)
{
    uint32_t bits = cis2_f2u(x);
    if ((bits & 0x7FFFFFFFu) == 0) return x;             /* x == 0.0 */
    int32_t new_exp = (int32_t)((bits >> 23) & 0xFF) + k;
    if (new_exp <= 0) return 0.0f;
    if (new_exp >= 0xFF) return (bits >> 31) ? F(0xFF800000u) : F(0x7F800000u);
    return F((bits & ~(0xFFu << 23)) | ((uint32_t)new_exp << 23));
}

float cis2_frexp_exact(float x, int *e)
{
    uint32_t bits = cis2_f2u(x);
    int32_t exp_bits = (int32_t)((bits >> 23) & 0xFF);
    *e = exp_bits - 126;
    return F((bits & 0x807FFFFFu) | (126u << 23));
}

/* floor() of a finite float known to lie well inside int range. */
static float floor_small(float z)
{
    int32_t i = (int32_t)z;          /* truncates toward zero, exact */
    float fi = (float)i;
    if (fi > z) fi = cis2_fsub(fi, 1.0f);   /* negative non-integers */
    return fi;
}

/* DAZ applied by bit pattern, so the result does not depend on how an ISA
 * treats subnormal operands of a comparison (§1.3). */
static float daz(float x)
{
    uint32_t b = cis2_f2u(x);
    return cis2_f32_is_subnormal(b) ? F(b & 0x80000000u) : x;
}

float cis2_exp_pinned(float x)
{
    x = daz(x);
    if (x != x) return x;
    if (x > 88.0f) return F(0x7F800000u);
    if (x < -88.0f) return 0.0f;
    float t = cis2_fmul(x, F(EXP_LOG2E));
    float z0 = cis2_fadd(t, 0.5f);
    float k = floor_small(z0);
    float kc1 = cis2_fmul(k, F(EXP_C1));
    float r0 = cis2_fsub(x, kc1);
    float kc2 = cis2_fmul(k, F(EXP_C2));
    float r = cis2_fsub(r0, kc2);
    float r2 = cis2_fmul(r, r);
    float poly = F(EXP_P[0]);
    for (int i = 1; i <= 5; i++) {
        float pr = cis2_fmul(poly, r);
        poly = cis2_fadd(pr, F(EXP_P[i]));
    }
    float m1 = cis2_fmul(poly, r2);
    float poly2 = cis2_fadd(m1, r);
    float result = cis2_fadd(poly2, 1.0f);
    return cis2_ldexp_exact(result, (int)k);
}

float cis2_ln_pinned(float x)
{
    x = daz(x);
    uint32_t bits = cis2_f2u(x);
    if (x != x || ((bits >> 31) && (bits & 0x7FFFFFFFu))) return F(0x7FC00000u);
    if ((bits & 0x7FFFFFFFu) == 0) return F(0xFF800000u);
    if (bits == 0x7F800000u) return x;                   /* ln(+inf) = +inf */
    int e;
    float m = cis2_frexp_exact(x, &e);
    if (m < F(LOG_SQRTHF)) {
        e = e - 1;
        float mm = cis2_fadd(m, m);
        m = cis2_fsub(mm, 1.0f);
    } else {
        m = cis2_fsub(m, 1.0f);
    }
    float z = cis2_fmul(m, m);
    float poly = F(LOG_P[0]);
    for (int i = 1; i <= 8; i++) {
        float pm = cis2_fmul(poly, m);
        poly = cis2_fadd(pm, F(LOG_P[i]));
    }
    float y = cis2_fmul(poly, m);
    y = cis2_fmul(y, z);
    float fe = (float)e;
    float t1 = cis2_fmul(fe, F(LOG_Q1));
    y = cis2_fadd(y, t1);
    float half_z = cis2_fmul(0.5f, z);
    y = cis2_fsub(y, half_z);
    float result = cis2_fadd(m, y);
    float t2 = cis2_fmul(fe, F(LOG_Q2));
    result = cis2_fadd(result, t2);
    return result;
}

/* f64::round(): nearest integer, ties away from zero, by bit-exact steps. */
static double round_half_away(double v)
{
    double a = v < 0 ? -v : v;
    if (!(a < 4503599627370496.0)) return v;             /* >= 2^52: already integral */
    double t = (double)(int64_t)a;                       /* trunc, exact */
    double frac = a - t;                                 /* exact */
    if (frac >= 0.5) t = t + 1.0;
    return v < 0 ? -t : t;
}

void cis2_sincos_pinned(float x, float *s_out, float *c_out)
{
    x = daz(x);
    uint32_t bits = cis2_f2u(x);
    if ((bits & 0x7F800000u) == 0x7F800000u) {           /* inf or NaN */
        *s_out = *c_out = F(0x7FC00000u);
        return;
    }
    double xd = (double)x;                               /* exact widening */
    double q = xd / u2d(PI_2_F64);
    double k = round_half_away(q);
    double khi = k * u2d(PI_2_F64);
    double r64 = xd - khi;
    float r = cis2_f64_to_f32(r64);                      /* one RNE narrowing */
    double ak = k < 0 ? -k : k;
    int quadrant = 0;                                    /* |k| >= 2^62: k % 4 == 0 */
    if (ak < 4611686018427387904.0) quadrant = (int)((((int64_t)k) % 4 + 4) % 4);

    float r2 = cis2_fmul(r, r);
    float inner = F(SIN_C2);
    inner = cis2_fmul(inner, r2); inner = cis2_fadd(inner, F(SIN_C1));
    inner = cis2_fmul(inner, r2); inner = cis2_fadd(inner, F(SIN_C0));
    float r3 = cis2_fmul(r2, r);
    float term = cis2_fmul(inner, r3);
    float sin_r = cis2_fadd(r, term);

    float cin = F(COS_C2);
    cin = cis2_fmul(cin, r2); cin = cis2_fadd(cin, F(COS_C1));
    cin = cis2_fmul(cin, r2); cin = cis2_fadd(cin, F(COS_C0));
    float r4 = cis2_fmul(r2, r2);
    float cterm = cis2_fmul(cin, r4);
    float half_r2 = cis2_fmul(0.5f, r2);
    float step1 = cis2_fsub(1.0f, half_r2);
    float cos_r = cis2_fadd(step1, cterm);

    switch (quadrant) {
    case 0: *s_out = sin_r;  *c_out = cos_r;  break;
    case 1: *s_out = cos_r;  *c_out = -sin_r; break;
    case 2: *s_out = -sin_r; *c_out = -cos_r; break;
    default: *s_out = -cos_r; *c_out = sin_r; break;
    }
}

float cis2_sin_pinned(float x) { float s, c; cis2_sincos_pinned(x, &s, &c); return s; }
float cis2_cos_pinned(float x) { float s, c; cis2_sincos_pinned(x, &s, &c); return c; }

float cis2_silu(float x)
{
    float neg = -x;
    float e = cis2_exp_pinned(neg);
    float denom = cis2_fadd(1.0f, e);
    return cis2_fdiv(x, denom);  /* one correctly rounded division (§6.4) */
}

float cis2_rsqrt(float x)
{
    /* §6.1: IEEE sqrt then IEEE divide; -fno-math-errno keeps this the sqrt
     * instruction, never a reciprocal estimate. */
    return cis2_fdiv(1.0f, cis2_fsqrt(x));
}

void cis2_table_digest(uint8_t out[32])
{
    cis2_sha256 s;
    cis2_sha256_init(&s);
    cis2_sha256_update_u32(&s, EXP_LOG2E);
    cis2_sha256_update_u32(&s, EXP_C1);
    cis2_sha256_update_u32(&s, EXP_C2);
    for (int i = 0; i < 6; i++) cis2_sha256_update_u32(&s, EXP_P[i]);
    uint64_t pi2 = d2u(u2d(PI_2_F64));
    for (int i = 0; i < 8; i++) {
        uint8_t b = (uint8_t)(pi2 >> (8 * i));
        cis2_sha256_update(&s, &b, 1);
    }
    cis2_sha256_update_u32(&s, SIN_C0);
    cis2_sha256_update_u32(&s, SIN_C1);
    cis2_sha256_update_u32(&s, SIN_C2);
    cis2_sha256_update_u32(&s, COS_C0);
    cis2_sha256_update_u32(&s, COS_C1);
    cis2_sha256_update_u32(&s, COS_C2);
    cis2_sha256_update_u32(&s, LOG_SQRTHF);
    cis2_sha256_update_u32(&s, LOG_Q1);
    cis2_sha256_update_u32(&s, LOG_Q2);
    for (int i = 0; i < 9; i++) cis2_sha256_update_u32(&s, LOG_P[i]);
    cis2_sha256_final(&s, out);
}

void cis2_inv_freq(int head_dim, float rope_theta, float *inv_freq)
{
    float ln_theta = cis2_ln_pinned(rope_theta);
    for (int i = 0; i < head_dim / 2; i++) {
        float frac = cis2_fdiv((float)(2 * i), (float)head_dim);
        float prod = cis2_fmul(frac, ln_theta);
        float neg_arg = -prod;
        inv_freq[i] = cis2_exp_pinned(neg_arg);
    }
}

/* docs/rope_scaling.md: Hugging Face's _compute_llama3_parameters as the
 * binary32 operations it performs on a CPU (a Python scalar becomes one RNE
 * binary32 operand, `scalar / tensor` is reciprocal() then a multiply), in
 * that order, each one separately rounded. Binary64 only where Python does
 * the arithmetic on the config's own numbers (the two wavelength bounds and
 * high - low), each then narrowed once. */
#define TWO_PI_F32 0x40C90FDBu /* (float)(2 * math.pi) */
void cis2_inv_freq_llama3(float *inv_freq, int n, double factor, double low, double high,
                          int old_ctx)
{
    float f = cis2_f64_to_f32(factor);
    float lo = cis2_f64_to_f32(low);
    float ctx = (float)old_ctx;                               /* exact: old_ctx <= 2^20 */
    float low_wl = cis2_f64_to_f32((double)old_ctx / low);    /* old_ctx / low_freq_factor */
    float high_wl = cis2_f64_to_f32((double)old_ctx / high);  /* old_ctx / high_freq_factor */
    float span = cis2_f64_to_f32(high - low);
    for (int i = 0; i < n; i++) {
        float v = inv_freq[i];
        float rv = cis2_fdiv(1.0f, v);
        float wl = cis2_fmul(rv, F(TWO_PI_F32));                /* wavelen = 2*pi / inv_freq */
        if (wl > low_wl) {                                    /* low frequency: divided */
            inv_freq[i] = cis2_fdiv(v, f);
        } else if (!(wl < high_wl)) {                         /* medium: smoothed */
            float rw = cis2_fdiv(1.0f, wl);
            float r = cis2_fmul(rw, ctx);                     /* old_ctx / wavelen */
            float rl = cis2_fsub(r, lo);
            float s = cis2_fdiv(rl, span);                    /* smooth_factor */
            float a = cis2_fsub(1.0f, s);
            float b = cis2_fmul(a, v);
            float c = cis2_fdiv(b, f);
            float e = cis2_fmul(s, v);
            inv_freq[i] = cis2_fadd(c, e);
        }                                                     /* high frequency: unchanged */
    }
}

void cis2_f32_digest(const float *v, size_t n, uint8_t out[32])
{
    cis2_sha256 s;
    cis2_sha256_init(&s);
    for (size_t i = 0; i < n; i++) cis2_sha256_update_u32(&s, cis2_f2u(v[i]));
    cis2_sha256_final(&s, out);
}
