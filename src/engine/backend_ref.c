/* The reference backend: the scalar kernels of kernels_ref.c over the
 * widened f32 weights (§4.2). Slow, obvious, and the oracle for all others. */
#include "engine/backend.h"
#include "kernels/kernels.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *scores;
    int cap;
    const cis2_layer *fma_layer; /* FAULT INJECTION (docs/divergence.md): NULL = none */
} ref_state;

/* ---- FAULT INJECTION (docs/divergence.md), --fault fma: a fused multiply-add emulated
 * in software (the binary must hold no FMA instruction, §1.4): the exact
 * product joins the accumulator in double and is rounded once to float
 * (double rounding aside), instead of §5.1's separately rounded mul + add. */
static void fault_fma_mm(const cis2_linear *w, const float *X, int T, float *Y)
{
    for (int t = 0; t < T; t++)
        for (int o = 0; o < w->rows; o++) {
            const float *wr = w->f32 + (size_t)o * w->cols, *x = X + (size_t)t * w->cols;
            float acc = 0.0f;
            for (int i = 0; i < w->cols; i++)
                acc = (float)((double)wr[i] * (double)x[i] + (double)acc);
            Y[(size_t)t * w->rows + o] = acc;
        }
}

static int fault_in_layer(const cis2_layer *y, const cis2_linear *w)
{
    return w == &y->q || w == &y->k || w == &y->v || w == &y->o || w == &y->gate || w == &y->up ||
           w == &y->down;
}
/* ---- end FAULT INJECTION ---- */

static void ref_mm(cis2_backend *b, const cis2_linear *w, const float *X, int T, float *Y)
{
    ref_state *s = b->impl;
    if (__builtin_expect(s->fma_layer != NULL, 0) && fault_in_layer(s->fma_layer, w)) {
        fault_fma_mm(w, X, T, Y);
        return;
    } /* FAULT */
    for (int t = 0; t < T; t++)
        ref_matvec(w->f32, w->rows, w->cols, X + (size_t)t * w->cols, Y + (size_t)t * w->rows);
}

void cis2_ref_attention(const float *q, const float *kc, const float *vc, int T, int pos0,
                        int n_heads, int n_kv, int hd, float scale, float *out, float *scores)
{
    int group = n_heads / n_kv, qd = n_heads * hd, kvd = n_kv * hd;
    for (int t = 0; t < T; t++) {
        int n_ctx = pos0 + t + 1; /* causal: exactly positions 0..pos (§9.2) */
        for (int h = 0; h < n_heads; h++) {
            int kvh = h / group;
            ref_attention_head(q + (size_t)t * qd + (size_t)h * hd, kc + (size_t)kvh * hd,
                               vc + (size_t)kvh * hd, (size_t)kvd, n_ctx, hd, scale, scores,
                               out + (size_t)t * qd + (size_t)h * hd);
        }
    }
}

static void ref_attn(cis2_backend *b, const float *q, const float *kc, const float *vc, int T,
                     int pos0, int n_heads, int n_kv, int hd, float scale, float *out)
{
    ref_state *s = b->impl;
    if (s->cap < pos0 + T) {
        free(s->scores);
        s->cap = pos0 + T;
        s->scores = malloc((size_t)s->cap * sizeof(float));
        if (!s->scores) abort(); /* sized with the KV cache, which was allocated first */
    }
    cis2_ref_attention(q, kc, vc, T, pos0, n_heads, n_kv, hd, scale, out, s->scores);
}

static void ref_destroy(cis2_backend *b)
{
    ref_state *s = b->impl;
    free(s->scores);
    free(s);
    free(b);
}

int cis2_backend_ref_new(cis2_backend **out, cis2_model *m, const cis2_engine_opts *o, char *err)
{
    (void)o;
    if (!m->embed.f32 || !m->layers[0].q.f32) {
        snprintf(err, CIS2_ERR_LEN, "backend ref needs the model loaded with widened f32 weights");
        return 1;
    }
    cis2_backend *b = calloc(1, sizeof *b);
    ref_state *s = calloc(1, sizeof *s);
    if (!b || !s) {
        free(b);
        free(s);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    if (o && o->fault && !strcmp(o->fault, "fma")) /* FAULT: layer validated by decode.c */
        s->fma_layer = &m->layers[o->fault_arg ? atoi(o->fault_arg) : 0];
    b->name = "ref";
    b->impl = s;
    b->matmul = ref_mm;
    b->attention = ref_attn;
    b->destroy = ref_destroy;
    *out = b;
    return 0;
}
