/* Scalar reference kernels (§5, §7–§11). These stay forever as the oracle
 * every fast path is proven bit-identical against. */
#ifndef CIS2_KERNELS_H
#define CIS2_KERNELS_H
#include "core/core.h"

/* §5.2: y[o] = dot_seq(w[o,:], x) */
void ref_matvec(const float *w, int rows, int cols, const float *x, float *y);
/* int8 linear (docs/quantization.md §2): y[o] = s[o] * dot_seq((float)q[o,:], x),
 * q [rows, cols] row-major int8, s [rows] f32. */
void ref_matvec_i8(const int8_t *q, const float *s, int rows, int cols, const float *x, float *y);
/* §8: out[i] = (x[i]*inv)*w[i]; `out` may alias `x`. */
void ref_rmsnorm(const float *x, const float *w, int n, float eps, float *out);
/* §9.3 in place: strict-> max, exp_pinned(v-max), sum_seq, divide. */
void ref_softmax(float *s, int n);
/* §7.3: cos/sin tables at `pos` for half = head_dim/2 frequencies. */
void ref_rope_table(const float *inv_freq, int half, int pos, float *cos_v, float *sin_v);
/* §7.4 rotate-half, in place on one head. */
void ref_rope_rotate(float *head, int head_dim, const float *cos_v, const float *sin_v);
/* §9.2: scores[j] = dot_seq(q, k row j) * scale for one query head over
 * n_ctx cached positions; k row j is at k + j*stride (head_dim values). */
void ref_attention_scores(const float *q, const float *k, size_t stride, int n_ctx, int head_dim,
                          float scale, float *scores);
/* §9.4: out[d] = sum over j in order of probs[j] * v[j*stride + d]. */
void ref_attention_mix(const float *probs, const float *v, size_t stride, int n_ctx, int head_dim,
                       float *out);
/* §9.2–§9.4 for one query head over n_ctx cached positions: k/v row j is at
 * k + j*stride (head_dim values). `scores` is scratch of n_ctx floats and
 * holds the probabilities on return. */
void ref_attention_head(const float *q, const float *k, const float *v, size_t stride, int n_ctx,
                        int head_dim, float scale, float *scores, float *out);
/* §10: out[i] = silu(gate[i]) * up[i] */
void ref_swiglu(const float *gate, const float *up, float *out, int n);
/* §5.4: h[i] = h[i] + x[i] */
void ref_add(float *h, const float *x, int n);
#endif
