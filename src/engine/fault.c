/* Fault injection (docs/divergence.md, debug only): the documented bugs of
 * engine/fault.h. The hooks on the normal path (forward.c, backend_ref.c)
 * are single predictable branches on the engine's fault kind. */
#include "engine/fault.h"
#include <stdlib.h>
#include <string.h>

static int fault_uint(const char *s, long hi, long *out)
{
    if (!s || !*s || (s[0] == '0' && s[1]) || s[0] < '0' || s[0] > '9') return 1;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > hi) return 1;
    *out = v;
    return 0;
}

/* weight-bit NAME:INDEX:BIT on the engine's own copy of that tensor. */
static int weight_bit(cis2_fault *f, const char *a, const cis2_config *c, cis2_weights *w,
                      char *err)
{
    const char *c2 = a ? strrchr(a, ':') : NULL, *c1 = NULL;
    if (c2)
        for (const char *p = c2 - 1; p >= a; p--)
            if (*p == ':') {
                c1 = p;
                break;
            }
    char name[200];
    if (!c1 || (size_t)(c1 - a) >= sizeof name) {
        snprintf(err, CIS2_ERR_LEN,
                 "fault weight-bit needs a fault argument TENSOR:INDEX:BIT, e.g. "
                 "model.layers.0.mlp.up_proj.weight:123:22");
        return 1;
    }
    memcpy(name, a, (size_t)(c1 - a));
    name[c1 - a] = 0;
    char idxs[32];
    size_t il = (size_t)(c2 - c1 - 1);
    if (il >= sizeof idxs) il = sizeof idxs - 1;
    memcpy(idxs, c1 + 1, il);
    idxs[il] = 0;
    const cis2_tensor_def *d;
    int layer;
    void *slot = NULL;
    if (!cis2_tensor_lookup(name, c->n_layers, &d, &layer)) slot = cis2_tensor_slot(w, d, layer);
    /* present in this checkpoint: a vector with data, a linear with tiles */
    if (slot &&
        (d->kind == CIS2_TK_VECTOR ? !*(const float **)slot : !((cis2_weight *)slot)->tiles))
        slot = NULL;
    if (!slot) {
        snprintf(err, CIS2_ERR_LEN,
                 "fault argument: no weight tensor \"%.150s\" in this model (with an f32 copy)",
                 name);
        return 1;
    }
    size_t n = (size_t)cis2_tensor_dim(c, d->rows) * (size_t)cis2_tensor_dim(c, d->cols);
    long idx, bit;
    if (fault_uint(idxs, (long)n - 1, &idx)) {
        snprintf(err, CIS2_ERR_LEN, "fault argument: index '%s' is not in [0, %zu) for \"%.150s\"",
                 idxs, n, name);
        return 1;
    }
    if (fault_uint(c2 + 1, 31, &bit)) {
        snprintf(err, CIS2_ERR_LEN, "fault argument: bit '%.20s' is not in [0, 31]", c2 + 1);
        return 1;
    }
    float *word;
    if (d->kind == CIS2_TK_VECTOR) {
        float *v = malloc(n * sizeof(float));
        if (!v) goto oom;
        memcpy(v, *(const float **)slot, n * sizeof(float));
        *(const float **)slot = v;
        f->copy = v;
        word = v + idx;
    } else {
        cis2_weight *lw = slot;
        if (lw->fmt == CIS2_WF_I8) { /* int8: one bit of one q (docs/quantization.md §2) */
            if (bit > 7) {
                snprintf(err, CIS2_ERR_LEN,
                         "fault argument: bit %ld is not in [0, 7] for the int8 tensor \"%.150s\"",
                         bit, name);
                return 1;
            }
            void *t = aligned_alloc(64, cis2_weight_bytes(lw->rows, lw->cols, lw->fmt));
            if (!t) goto oom;
            cis2_weight_copy(lw, lw, t);
            f->copy = t;
            int8_t *q = cis2_weight_i8_at(lw, t, (int)(idx / lw->cols), (int)(idx % lw->cols));
            *q = (int8_t)((uint8_t)*q ^ (1u << bit));
            return 0;
        }
        /* F32 tiles hold every bit of the f32 the fault flips (§4.1 widening is exact). */
        void *t = aligned_alloc(64, cis2_weight_bytes(lw->rows, lw->cols, CIS2_WF_F32));
        if (!t) goto oom;
        cis2_weight_to_f32_tiles(lw, lw, t);
        f->copy = t;
        word = cis2_weight_f32_at(lw, t, (int)(idx / lw->cols), (int)(idx % lw->cols));
    }
    *word = cis2_u2f(cis2_f2u(*word) ^ ((uint32_t)1 << bit));
    return 0;
oom:
    snprintf(err, CIS2_ERR_LEN, "out of memory");
    return 1;
}

int cis2_fault_setup(cis2_fault *f, const char *name, const char *a, const char *backend,
                     const cis2_config *c, cis2_weights *w, char *err)
{
    static const char *names[] = { "weight-bit",  "fma",      "rmsnorm-assoc",
                                   "rope-offset", "kv-stale", "no-ftz" };
    memset(f, 0, sizeof *f);
    int k = 0;
    for (int i = 0; i < 6; i++)
        if (!strcmp(name, names[i])) k = i + 1;
    if (!k) {
        snprintf(err, CIS2_ERR_LEN,
                 "unknown fault \"%.40s\" (known: weight-bit, fma, rmsnorm-assoc, rope-offset, "
                 "kv-stale, no-ftz)",
                 name);
        return 1;
    }
    if (strcmp(backend, "ref") != 0) {
        snprintf(err, CIS2_ERR_LEN,
                 "fault %s needs the reference backend (the fault hooks live there)", name);
        return 1;
    }
    long v = 0;
    if (k == CIS2_FAULT_WEIGHT_BIT) {
        if (weight_bit(f, a, c, w, err)) return 1;
    } else if (k == CIS2_FAULT_FMA) {
        if (a && fault_uint(a, c->n_layers - 1, &v)) {
            snprintf(err, CIS2_ERR_LEN,
                     "fault fma: the fault argument must be a layer in [0, %d], got '%.40s'",
                     c->n_layers - 1, a);
            return 1;
        }
        f->layer = (int)v;
    } else if (k == CIS2_FAULT_KV_STALE) {
        v = 1;
        if (a && fault_uint(a, c->max_pos - 1, &v)) {
            snprintf(
                err, CIS2_ERR_LEN,
                "fault kv-stale: the fault argument must be a position in [0, %d], got '%.40s'",
                c->max_pos - 1, a);
            return 1;
        }
        f->pos = (int)v;
    } else if (a) {
        snprintf(err, CIS2_ERR_LEN, "fault %s takes no fault argument", name);
        return 1;
    }
    f->kind = (cis2_fault_kind)k;
    return 0;
}

void cis2_fault_free(cis2_fault *f)
{
    free(f->copy);
    memset(f, 0, sizeof *f);
}

void cis2_fault_rmsnorm_assoc(const float *x, const float *w, int n, float eps, float *out)
{
    float ss = 0.0f;
    for (int i = 0; i < n; i++) {
        float sq = x[i] * x[i];
        ss = ss + sq;
    }
    float inv = cis2_rsqrt(ss / (float)n + eps);
    for (int i = 0; i < n; i++) {
        float iw = inv * w[i];
        out[i] = x[i] * iw;
    }
}

/* A fused multiply-add emulated in software (the binary must hold no FMA
 * instruction, §1.4): the exact product joins the accumulator in double and
 * is rounded once to float (double rounding aside), instead of §5.1's
 * separately rounded mul + add. */
void cis2_fault_fma_matvec(const float *w, int rows, int cols, const float *x, float *y)
{
    for (int o = 0; o < rows; o++) {
        const float *wr = w + (size_t)o * cols;
        float acc = 0.0f;
        for (int i = 0; i < cols; i++) acc = (float)((double)wr[i] * (double)x[i] + (double)acc);
        y[o] = acc;
    }
}

void cis2_fault_fma_matvec_i8(const int8_t *q, const float *s, int rows, int cols, const float *x,
                              float *y)
{
    for (int o = 0; o < rows; o++) {
        const int8_t *qr = q + (size_t)o * cols;
        float acc = 0.0f;
        for (int i = 0; i < cols; i++) acc = (float)((double)qr[i] * (double)x[i] + (double)acc);
        y[o] = acc * s[o];
    }
}
