/* Arm D in the engine (docs/quantization.md §6): the fast backend with its
 * int8 linears replaced by approximate int8 dot products over per-token
 * dynamically quantized activations (src/kernels/approx_int8.c). NOT CIS-2:
 * the results are not the exact int8 semantics of §2 and depend on the
 * path, so the CLI gives these runs no receipt and no CIS2_REF. Float
 * weights (an LM head left in float) and everything else (attention, the
 * elementwise steps) are the exact fast backend's. */
#include "engine/fast.h"
#include "kernels/approx_int8.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    cis2_backend *fast; /* attention, elementwise work, float weights */
    const approx_i8_kernel *k;
    approx_i8_packed *packed; /* per weight id; rows = 0 for float weights */
    int n;
    int8_t *xq; /* the activations quantized once per matmul */
    float *sx;
    size_t cap_xq, cap_sx;
    char name[48];
} armd_state;

typedef struct {
    const armd_state *s;
    const approx_i8_packed *p;
    float *Y;
    int T, per;
} armd_job;

/* Tiles [task*per, ...) of one linear: rows are independent outputs. */
static void armd_task(void *ctx, int task)
{
    const armd_job *j = ctx;
    const approx_i8_packed *p = j->p;
    int t0 = task * j->per, nt = p->ntiles - t0 < j->per ? p->ntiles - t0 : j->per;
    size_t tile = (size_t)p->k4 * FAST_TILE * 4;
    j->s->k->mm(p->w + (size_t)t0 * tile, p->s + (size_t)t0 * FAST_TILE,
                p->wsum + (size_t)t0 * FAST_TILE, NULL, p->k4, nt, p->rows - t0 * FAST_TILE,
                j->s->xq, j->s->sx, j->T, j->Y + (size_t)t0 * FAST_TILE, p->rows);
}

static void armd_mm(cis2_backend *b, const cis2_weight *w, const float *X, int T, float *Y)
{
    armd_state *s = b->impl;
    const approx_i8_packed *p = &s->packed[w->id];
    if (w->fmt != CIS2_WF_I8 || !p->rows) {
        s->fast->matmul(s->fast, w, X, T, Y);
        return;
    }
    /* xq and sx hold T tokens (armd_reserve) */
    approx_i8_quantize_act(X, T, p->cols, p->k4, s->xq, s->sx);
    armd_job j = { s, p, Y, T, 4 };
    int ntasks = (p->ntiles + j.per - 1) / j.per;
    s->fast->parallel_for(s->fast, ntasks, armd_task, &j);
}

static void armd_attn(cis2_backend *b, const float *q, const float *kc, const float *vc,
                      const float *kb, int kb_cap, int T, int pos0, int n_heads, int n_kv, int hd,
                      float scale, float *out)
{
    armd_state *s = b->impl;
    s->fast->attention(s->fast, q, kc, vc, kb, kb_cap, T, pos0, n_heads, n_kv, hd, scale, out);
}

/* The activations quantized for `rows` tokens of the widest linear, and
 * the fast backend's attention scratch. */
static int armd_reserve(cis2_backend *b, int rows, int positions, int n_heads, int n_kv, int hd,
                        char *err)
{
    armd_state *s = b->impl;
    size_t k4 = 0;
    for (int i = 0; i < s->n; i++)
        if (s->packed[i].rows && (size_t)s->packed[i].k4 > k4) k4 = (size_t)s->packed[i].k4;
    size_t nxq = (size_t)rows * 4 * k4;
    if (nxq > s->cap_xq) {
        int8_t *a = realloc(s->xq, nxq);
        if (!a) goto oom;
        s->xq = a, s->cap_xq = nxq;
    }
    if ((size_t)rows > s->cap_sx) {
        float *c = realloc(s->sx, (size_t)rows * sizeof(float));
        if (!c) goto oom;
        s->sx = c, s->cap_sx = (size_t)rows;
    }
    return s->fast->reserve(s->fast, rows, positions, n_heads, n_kv, hd, err);
oom:
    snprintf(err, CIS2_ERR_LEN, "arm D: out of memory for %d quantized tokens", rows);
    return 1;
}

static void armd_pf(cis2_backend *b, int n, void (*fn)(void *ctx, int i), void *ctx)
{
    armd_state *s = b->impl;
    s->fast->parallel_for(s->fast, n, fn, ctx);
}

static void armd_destroy(cis2_backend *b)
{
    armd_state *s = b->impl;
    if (s) {
        for (int i = 0; s->packed && i < s->n; i++) approx_i8_packed_free(&s->packed[i]);
        free(s->packed);
        free(s->xq);
        free(s->sx);
        if (s->fast) s->fast->destroy(s->fast);
        free(s);
    }
    free(b);
}

int cis2_backend_armd_new(cis2_backend **out, const cis2_engine_opts *o, const cis2_weights *w,
                          char *err)
{
    *out = NULL;
    cis2_backend *b = calloc(1, sizeof *b);
    armd_state *s = calloc(1, sizeof *s);
    const cis2_weight **all = calloc((size_t)w->n_linear + 1, sizeof *all);
    int8_t *q = NULL;
    float *sc = NULL;
    if (!b || !s || !all) {
        free(b), free(s), free((void *)all);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    b->impl = s;
    b->destroy = armd_destroy;
    if (cis2_backend_fast_new(&s->fast, o, err)) goto fail;
    if (!(s->k = approx_i8_pick(NULL))) {
        snprintf(err, CIS2_ERR_LEN, "backend approx: no arm-D kernel for this CPU");
        goto fail;
    }
    s->n = w->n_linear;
    if (!(s->packed = calloc((size_t)s->n + 1, sizeof *s->packed))) goto oom;
    cis2_weights_linears(w, all);
    int n8 = 0;
    for (int i = 0; i < s->n; i++) {
        const cis2_weight *x = all[i];
        if (!x || x->fmt != CIS2_WF_I8) continue;
        size_t nq = (size_t)x->rows * (size_t)x->cols;
        free(q), free(sc);
        q = malloc(nq ? nq : 1);
        sc = malloc((size_t)x->rows * sizeof *sc);
        if (!q || !sc) goto oom;
        cis2_weight_i8_rows(x, q, sc);
        if (approx_i8_pack(q, sc, x->rows, x->cols, &s->packed[i], err)) goto fail;
        n8++;
    }
    if (!n8) {
        snprintf(err, CIS2_ERR_LEN,
                 "backend approx (arm D) needs an int8 checkpoint (cis2 quantize); this one has "
                 "no int8 linears");
        goto fail;
    }
    free(q), free(sc), free((void *)all);
    snprintf(s->name, sizeof s->name, "approx/%s+%s", s->k->name, s->fast->name + 5);
    b->name = s->name;
    b->matmul = armd_mm;
    b->attention = armd_attn;
    b->reserve = armd_reserve;
    b->wants_kb = 1; /* the fast backend's attention reads them */
    b->parallel_for = armd_pf;
    b->swiglu = s->fast->swiglu;
    *out = b;
    return 0;
oom:
    snprintf(err, CIS2_ERR_LEN, "out of memory packing the arm-D weights");
fail:
    free(q), free(sc), free((void *)all);
    armd_destroy(b);
    return 1;
}
