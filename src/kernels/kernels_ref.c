/* Scalar reference kernels: the spec's loops written out, nothing more. */
/* Hand-aligned, one spec operation per line: kept as written. */
/* clang-format off */
#include "kernels/kernels.h"
/* cis2_fadd & co: plain operators natively, §1.3 in software on wasm32 */
#include "core/fparith.h"

void ref_matvec(const float *w, int rows, int cols, const float *x, float *y)
{
    for (int o = 0; o < rows; o++) y[o] = cis2_dot_seq(w + (size_t)o * cols, x, (size_t)cols);
}

void ref_matvec_i8(const int8_t *q, const float *s, int rows, int cols, const float *x, float *y)
{
    for (int o = 0; o < rows; o++) {
        const int8_t *row = q + (size_t)o * cols;
        float acc = 0.0f;
        for (int k = 0; k < cols; k++) {
            float w = (float)row[k];             /* exact: |q| <= 128 (quantization.md §2) */
            float p = cis2_fmul(w, x[k]);        /* separate multiply */
            acc = cis2_fadd(acc, p);             /* §5.1: strictly left to right */
        }
        y[o] = cis2_fmul(acc, s[o]);             /* one multiply by the row scale, after the sum */
    }
}

void ref_rmsnorm(const float *x, const float *w, int n, float eps, float *out)
{
    float ss = 0.0f;
    for (int i = 0; i < n; i++) {
        float sq = cis2_fmul(x[i], x[i]);
        ss = cis2_fadd(ss, sq);                  /* §5.3 over sq[], fused in one pass: same order */
    }
    float mean = cis2_fdiv(ss, (float)n);
    float inv = cis2_rsqrt(cis2_fadd(mean, eps));
    for (int i = 0; i < n; i++) {
        float scaled = cis2_fmul(x[i], inv);
        out[i] = cis2_fmul(scaled, w[i]);          /* §8: (x*inv)*w, not x*(inv*w) */
    }
}

void ref_softmax(float *s, int n)
{
    float max_v = s[0];
    for (int j = 1; j < n; j++)
        if (s[j] > max_v) max_v = s[j];  /* strict >: first max wins */
    for (int j = 0; j < n; j++) s[j] = cis2_exp_pinned(cis2_fsub(s[j], max_v));
    float denom = cis2_sum_seq(s, (size_t)n);
    for (int j = 0; j < n; j++) s[j] = cis2_fdiv(s[j], denom);   /* divide, not times 1/denom */
}

void ref_rope_table(const float *inv_freq, int half, int pos, float *cos_v, float *sin_v)
{
    float p = (float)pos;                /* exact for pos < 2^24 */
    for (int i = 0; i < half; i++) {
        float angle = cis2_fmul(p, inv_freq[i]);
        cis2_sincos_pinned(angle, &sin_v[i], &cos_v[i]);
    }
}

void ref_rope_rotate(float *head, int head_dim, const float *cos_v, const float *sin_v)
{
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        float x1 = head[i], x2 = head[i + half];
        float t1 = cis2_fmul(x1, cos_v[i]);
        float t2 = cis2_fmul(-x2, sin_v[i]);
        float t3 = cis2_fmul(x2, cos_v[i]);
        float t4 = cis2_fmul(x1, sin_v[i]);
        head[i] = cis2_fadd(t1, t2);               /* both outputs use the old x1, x2 */
        head[i + half] = cis2_fadd(t3, t4);
    }
}

void ref_attention_scores(const float *q, const float *k, size_t stride, int n_ctx,
                          int head_dim, float scale, float *scores)
{
    for (int j = 0; j < n_ctx; j++) {
        float d = cis2_dot_seq(q, k + (size_t)j * stride, (size_t)head_dim);
        scores[j] = cis2_fmul(d, scale);           /* §9.2: scale applied after the dot */
    }
}

void ref_attention_mix(const float *probs, const float *v, size_t stride, int n_ctx,
                       int head_dim, float *out)
{
    for (int d = 0; d < head_dim; d++) {
        float acc = 0.0f;
        for (int j = 0; j < n_ctx; j++) {
            float p = cis2_fmul(probs[j], v[(size_t)j * stride + d]);
            acc = cis2_fadd(acc, p);               /* §9.4: over keys, in order */
        }
        out[d] = acc;
    }
}

void ref_attention_head(const float *q, const float *k, const float *v, size_t stride,
                        int n_ctx, int head_dim, float scale, float *scores, float *out)
{
    ref_attention_scores(q, k, stride, n_ctx, head_dim, scale, scores);
    ref_softmax(scores, n_ctx);
    ref_attention_mix(scores, v, stride, n_ctx, head_dim, out);
}

void ref_swiglu(const float *gate, const float *up, float *out, int n)
{
    for (int i = 0; i < n; i++) {
        float s = cis2_silu(gate[i]);
        out[i] = cis2_fmul(s, up[i]);
    }
}

void ref_add(float *h, const float *x, int n)
{
    for (int i = 0; i < n; i++) h[i] = cis2_fadd(h[i], x[i]);
}
