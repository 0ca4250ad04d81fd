/* The engine layer's internal interface. Compute backends: the engine
 * (engine.c, forward.c) owns the model walk, the KV cache and every
 * elementwise step; a backend supplies the two heavy kernels.
 * Contract: each output element is the same sequence of separately rounded
 * operations as the scalar reference (§5.1, §9.2–§9.4) — parallelism only
 * across rows, heads and tokens, never inside a sum. */
#ifndef CIS2_BACKEND_H
#define CIS2_BACKEND_H
#include "engine/fault.h"

typedef struct cis2_backend cis2_backend;
struct cis2_backend {
    const char *name; /* "ref", "fast/avx2", ... */
    void *impl;
    /* Y[t*w->rows + o] = dot_seq(W[o,:], X[t*w->cols ...]) for o < rows, t < T. */
    void (*matmul)(cis2_backend *b, const cis2_weight *w, const float *X, int T, float *Y);
    /* Causal GQA attention for T query tokens at positions pos0..pos0+T-1.
     * q: [T][n_heads*hd] post-RoPE; kc/vc: [pos][n_kv*hd] holding 0..pos0+T-1;
     * out: [T][n_heads*hd]. Query head h reads KV head h / (n_heads/n_kv).
     * kb: the same keys key-blocked (CIS2_KB_INDEX, kb_cap positions per KV
     * head), or NULL (then kb_cap is unused). */
    void (*attention)(cis2_backend *b, const float *q, const float *kc, const float *vc,
                      const float *kb, int kb_cap, int T, int pos0, int n_heads, int n_kv, int hd,
                      float scale, float *out);
    /* Optional: one query token for each of n sequences in one parallel
     * step; sequence i at position pos[i], its KV cache kc[i]/vc[i] holding
     * 0..pos[i]; q, out: [n][n_heads*hd]. For each sequence bit for bit
     * attention(q_i, kc[i], vc[i], kb[i], kb_cap[i], 1, pos[i], ...); kb
     * NULL = no key-blocked copies. pre (may be NULL): pre(pre_ctx, i) runs
     * once for each sequence i, before anything reads its q row or cache
     * (it writes them), on any thread; those writes touch sequence i's only.
     * NULL = one call each. */
    void (*attention_decode)(cis2_backend *b, int n, const float *q, const float *const *kc,
                             const float *const *vc, const float *const *kb, const int *kb_cap,
                             const int *pos, int n_heads, int n_kv, int hd, float scale, float *out,
                             void (*pre)(void *ctx, int i), void *pre_ctx);
    /* Set by a backend whose attention reads key-blocked keys: the engine
     * then keeps them (CIS2_KB_INDEX) beside the row-major cache and passes
     * them; otherwise it allocates nothing and passes NULL. */
    int wants_kb;
    /* The backend's scratch memory, allocated ahead so that no matmul or
     * attention call allocates (they cannot fail): after it returns 0,
     * matmul over up to `rows` tokens and attention (and attention_decode)
     * over up to `positions` keys of heads of this shape allocate nothing.
     * Capacities only grow (0 asks for none). 1 with err when memory ran
     * out; what was reserved before stays. Callers reserve before they
     * compute: the engine for its activation rows (eng_ensure_rows) and
     * for every KV cache it allocates (eng_ensure_positions). NULL = the
     * backend needs no scratch. */
    int (*reserve)(cis2_backend *b, int rows, int positions, int n_heads, int n_kv, int hd,
                   char *err);
    void (*destroy)(cis2_backend *b);
    /* Optional (NULL = the engine loops itself): run fn(ctx, i) for every
     * i < n, in any order and on any of the backend's threads (each pinned
     * FTZ/DAZ). The engine uses it for per-token elementwise work, whose
     * tokens are independent. */
    void (*parallel_for)(cis2_backend *b, int n, void (*fn)(void *ctx, int i), void *ctx);
    /* Optional: matmul(w[i], X, T, Y[i]) for i < n (same X), in one parallel
     * step. NULL = the engine calls matmul n times. */
    void (*matmul_multi)(cis2_backend *b, int n, const cis2_weight *const *w, const float *X, int T,
                         float *const *Y);
    /* Optional, wg and wu of one shape: gate = matmul(wg, X, T),
     * up = matmul(wu, X, T) and act = swiglu(gate, up) over all T rows
     * (§10, ref_swiglu bit for bit) in one parallel step. NULL =
     * matmul_multi, then swiglu. */
    void (*matmul_swiglu)(cis2_backend *b, const cis2_weight *wg, const cis2_weight *wu,
                          const float *X, int T, float *gate, float *up, float *act);
    /* Optional hint: w[0..n) are the next matmuls' weights in the order
     * they will be read; idle threads may pull their first bytes toward
     * cache (changes no value). NULL = no hint. */
    void (*prefetch)(cis2_backend *b, int n, const cis2_weight *const *w);
    /* Optional (NULL = the engine runs fn itself, at once): fn(ctx) on a
     * thread that would otherwise wait, beside the engine's next calls,
     * which must not touch what fn touches until side_wait has returned. */
    void (*side)(cis2_backend *b, void (*fn)(void *ctx), void *ctx);
    void (*side_wait)(cis2_backend *b);
    /* Optional: ref_swiglu bit for bit (§10), vectorized. NULL = ref_swiglu. */
    void (*swiglu)(const float *gate, const float *up, float *out, int n);
    /* Optional: ref_add bit for bit, vectorized. NULL = ref_add. */
    void (*add)(float *h, const float *x, int n);
    /* Optional: cis2_argmax(x, n) and the first NaN's index (or -1) in
     * *first_nan, vectorized. NULL = the scalar loops. */
    int32_t (*scan)(const float *x, int n, int *first_nan);
    /* Optional: ref_rmsnorm (§8) on m rows, row r at x + r*ldx, its output
     * at out + r*ldo — each row bit for bit, the rows' sums side by side.
     * NULL = row by row. */
    void (*rmsnorm_rows)(const float *x, size_t ldx, const float *w, int n, float eps, float *out,
                         size_t ldo, int m);
    /* Optional: ref_rope_rotate (§7.4) on nh consecutive heads of hd values,
     * each bit for bit, vectorized. NULL = head by head. */
    void (*rope)(float *x, int nh, int hd, const float *cos_v, const float *sin_v);
};

/* Key-blocked keys: per layer, per KV head kvh, blocks of CIS2_KB
 * positions, each block [hd][CIS2_KB]; kb_cap (a multiple of CIS2_KB)
 * positions per KV head. That is a 16-row weight tile of the fast kernels
 * with K = hd (model/weights.h), so a head's scores are one mm_f32, each
 * score dot_seq(k_p, q) (§5.1) before its §9.2 scale. Positions past those
 * written are never read. */
#define CIS2_KB 16
#define CIS2_KB_INDEX(kb_cap, hd, kvh, p, d)                                                       \
    (((size_t)(kvh) * (size_t)(kb_cap) + (size_t)(p) / CIS2_KB * CIS2_KB) * (size_t)(hd) +         \
     (size_t)(d)*CIS2_KB + (size_t)(p) % CIS2_KB)
/* Writes key row k (n_kv*hd values, position p) into kb. */
static inline void cis2_kb_put(float *kb, int kb_cap, int n_kv, int hd, int p, const float *k)
{
    for (int h = 0; h < n_kv; h++)
        for (int d = 0; d < hd; d++) kb[CIS2_KB_INDEX(kb_cap, hd, h, p, d)] = k[h * hd + d];
}

/* A backend owns everything it prepares; the weights it is given (the
 * engine's view of the model's) are only read, and may be shared.
 * The reference backend widens its own row-major f32 copies of w's linears
 * (§4.2); w = NULL gives a backend for attention only. f (may be NULL):
 * the engine's fault injection (fma). */
int cis2_backend_ref_new(cis2_backend **b, const cis2_weights *w, const cis2_fault *f, char *err);
/* The fast backend reads the weights' tiles as they are: nothing to prepare. */
int cis2_backend_fast_new(cis2_backend **b, const cis2_engine_opts *o, char *err);

/* Arm D (backend_armd.c): the fast backend with approximate int8 linears
 * (docs/quantization.md §6); refused for a checkpoint without int8 linears. */
int cis2_backend_armd_new(cis2_backend **b, const cis2_engine_opts *o, const cis2_weights *w,
                          char *err);

/* The reference attention, shared by the ref backend and by traced runs. */
void cis2_ref_attention(const float *q, const float *kc, const float *vc, int T, int pos0,
                        int n_heads, int n_kv, int hd, float scale, float *out,
                        float *scores_scratch);

/* Run tokens[0..n) at positions pos0.. of the engine's solo sequence,
 * appending to its KV cache (tracing, teacher forcing, tests). When `logits`
 * is non-NULL it receives the vocab logits of the last token only (§3.4). */
int cis2_engine_forward(cis2_engine *e, const int32_t *tokens, int n, int pos0, float *logits,
                        char *err);
/* The traced nodes of one position, in execution order; their names
 * (cis2_trace_node_names) are the trace format's (verify/trace.h) and what
 * the engine's trace callback receives. */
typedef enum {
    CIS2_N_EMBED = 0,
    CIS2_N_ATTN_NORM,
    CIS2_N_Q_PROJ,
    CIS2_N_K_PROJ,
    CIS2_N_V_PROJ,
    CIS2_N_Q_NORM,
    CIS2_N_K_NORM,
    CIS2_N_Q_ROPE,
    CIS2_N_K_ROPE,
    CIS2_N_SCORES,
    CIS2_N_PROBS,
    CIS2_N_ATTN_OUT,
    CIS2_N_O_PROJ,
    CIS2_N_RESID_ATTN,
    CIS2_N_MLP_NORM,
    CIS2_N_GATE,
    CIS2_N_UP,
    CIS2_N_ACT,
    CIS2_N_DOWN,
    CIS2_N_RESID_MLP,
    CIS2_N_FINAL_NORM,
    CIS2_N_LOGITS,
    CIS2_N_NODES
} cis2_trace_node;
extern const char *const cis2_trace_node_names[CIS2_N_NODES];
#endif
