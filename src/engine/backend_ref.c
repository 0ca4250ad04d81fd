/* The reference backend: the scalar kernels of kernels_ref.c over row-major
 * f32 copies of the weights, widened exactly (§4.2) by this backend from the
 * model's tiles — int8 weights as row-major q and their row scales for
 * ref_matvec_i8 (docs/quantization.md §2). Slow, obvious, and the oracle
 * for all others. */
#include "engine/backend.h"
#include "kernels/kernels.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    float **f32; /* per weight id: [rows][cols], in `arena` (int8: the row scales) */
    int8_t **i8; /* per weight id: int8 q [rows][cols] in `arena`, NULL for float weights */
    void *arena;
    size_t arena_len;
    float *scores;
    int cap;
    int fma_layer; /* FAULT INJECTION fma (docs/divergence.md): -1 = none */
} ref_state;

static void ref_mm(cis2_backend *b, const cis2_weight *w, const float *X, int T, float *Y)
{
    ref_state *s = b->impl;
    const float *W = s->f32[w->id];
    const int8_t *Q = s->i8[w->id];
    int fma = __builtin_expect(s->fma_layer >= 0 && w->layer == s->fma_layer, 0); /* FAULT */
    for (int t = 0; t < T; t++) {
        const float *x = X + (size_t)t * w->cols;
        float *y = Y + (size_t)t * w->rows;
        if (Q) { /* the weight's dtype decides the kernel */
            if (fma) cis2_fault_fma_matvec_i8(Q, W, w->rows, w->cols, x, y);
            else ref_matvec_i8(Q, W, w->rows, w->cols, x, y);
        } else if (fma) cis2_fault_fma_matvec(W, w->rows, w->cols, x, y);
        else ref_matvec(W, w->rows, w->cols, x, y);
    }
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

static void ref_attn(cis2_backend *b, const float *q, const float *kc, const float *vc,
                     const float *kb, int kb_cap, int T, int pos0, int n_heads, int n_kv, int hd,
                     float scale, float *out)
{
    (void)kb; /* the row-major keys only: wants_kb stays 0 */
    (void)kb_cap;
    ref_state *s = b->impl; /* s->scores holds pos0 + T keys (ref_reserve) */
    cis2_ref_attention(q, kc, vc, T, pos0, n_heads, n_kv, hd, scale, out, s->scores);
}

/* One head's scores over `positions` keys (the rows need nothing). */
static int ref_reserve(cis2_backend *b, int rows, int positions, int n_heads, int n_kv, int hd,
                       char *err)
{
    (void)rows, (void)n_heads, (void)n_kv, (void)hd;
    ref_state *s = b->impl;
    if (positions <= s->cap) return 0;
    float *p = malloc((size_t)positions * sizeof(float));
    if (!p) {
        snprintf(err, CIS2_ERR_LEN, "out of memory for attention scores over %d positions",
                 positions);
        return 1;
    }
    free(s->scores);
    s->scores = p;
    s->cap = positions;
    return 0;
}

static void ref_destroy(cis2_backend *b)
{
    ref_state *s = b->impl;
    if (s) {
        cis2_big_free(s->arena, s->arena_len);
        free(s->f32);
        free(s->i8);
        free(s->scores);
        free(s);
    }
    free(b);
}

/* A row-major f32 copy of w, rounded up to 64 bytes (int8: q, then the scales). */
static size_t f32_bytes(const cis2_weight *w)
{
    size_t n = (size_t)w->rows * (size_t)w->cols;
    if (w->fmt == CIS2_WF_I8)
        return cis2_align64(n) + cis2_align64((size_t)w->rows * sizeof(float));
    return cis2_align64(n * sizeof(float));
}

int cis2_backend_ref_new(cis2_backend **out, const cis2_weights *w, const cis2_fault *f, char *err)
{
    *out = NULL;
    cis2_backend *b = calloc(1, sizeof *b);
    ref_state *s = calloc(1, sizeof *s);
    if (!b || !s) {
        free(b);
        free(s);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    b->name = "ref";
    b->impl = s;
    b->matmul = ref_mm;
    b->attention = ref_attn;
    b->reserve = ref_reserve;
    b->destroy = ref_destroy;
    s->fma_layer = f && f->kind == CIS2_FAULT_FMA ? f->layer : -1;
    const cis2_weight **all = NULL;
    if (w) {
        all = calloc((size_t)w->n_linear + 1, sizeof *all);
        s->f32 = calloc((size_t)w->n_linear + 1, sizeof *s->f32);
        s->i8 = calloc((size_t)w->n_linear + 1, sizeof *s->i8);
        if (!all || !s->f32 || !s->i8) goto oom;
        cis2_weights_linears(w, all);
        size_t total = 0;
        for (int i = 0; i < w->n_linear; i++) total += f32_bytes(all[i]);
        if (!(s->arena = cis2_big_alloc(total, &s->arena_len))) goto oom;
        char *at = s->arena;
        for (int i = 0; i < w->n_linear; i++) {
            /* §4.2: widened once, exactly, into this backend's own memory. */
            if (all[i]->fmt == CIS2_WF_I8) {
                s->i8[i] = (int8_t *)at;
                s->f32[i] =
                    (float *)(at + cis2_align64((size_t)all[i]->rows * (size_t)all[i]->cols));
                cis2_weight_i8_rows(all[i], s->i8[i], s->f32[i]);
            } else {
                s->f32[i] = (float *)at;
                cis2_weight_widen(all[i], s->f32[i]);
            }
            at += f32_bytes(all[i]);
        }
        free((void *)all);
    }
    *out = b;
    return 0;
oom:
    free((void *)all);
    ref_destroy(b);
    snprintf(err, CIS2_ERR_LEN, "out of memory widening the weights to f32 (§4.2)");
    return 1;
}
