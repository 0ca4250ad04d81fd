/* The engine's private layout, shared by its three files: engine.c (the
 * engine object, its activation memory, sequences and the greedy loop,
 * §3.4, §11.2), kv_cache.c (each sequence's KV cache, §3.5), forward.c (the
 * forward pass, §7–§11) and witness.c (the witness and argmax digests,
 * §12.1, §12.2). Calls go one way: engine.c calls forward.c, kv_cache.c and
 * witness.c; forward.c calls kv_cache.c; neither calls back into engine.c
 * (tests/t_layers.sh checks). An engine runs one or
 * several independent sequences. A forward pass runs rows: one row is one
 * token of one sequence at its own position. A prefill is the rows of one
 * prompt; a decode step is one row per running sequence, so every linear
 * reads each weight once for all of them, and each output element is still
 * one §5.1 dot product over its own row (the bits never depend on the batch). */
#ifndef CIS2_ENGINE_H
#define CIS2_ENGINE_H
#include "engine/backend.h"
#include <stdlib.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the witness chain hashes little-endian bit patterns straight from memory"
#endif

/* One sequence: its KV cache and its run in progress. */
enum { SEQ_FREE = 0, SEQ_QUEUED, SEQ_RUNNING, SEQ_DONE };
typedef struct {
    int state;
    int kv_cap;       /* positions allocated in the KV cache */
    float **kc, **vc; /* per layer: [kv_cap][n_kv*head_dim], post-RoPE K (§3.5) */
    float **kb;       /* per layer when the backend wants_kb: kc key-blocked (backend.h) */
    int kb_cap;       /* kv_cap rounded up to CIS2_KB */
    float *kv;        /* the arena kc[], vc[] and kb[] point into (huge pages) */
    size_t kv_len;
    int pos;         /* positions computed so far */
    cis2_gen_opts g; /* g.force points at force_copy */
    int32_t *force_copy;
    int32_t next; /* the last emitted id, fed at the next step */
    cis2_result r;
    cis2_sha256 w;    /* §12.1 witness stream in progress */
    int cancelled;    /* cis2_seq_cancel from an on_step: released when the step ends */
    cis2_sampler smp; /* temperature > 0: sampled (docs/sampling.md), else §11.2 */
    void *smp_scratch;
} seq_t;

/* Consecutive rows of one sequence at positions pos0..pos0+n-1: attention
 * reads and extends that sequence's KV cache. */
typedef struct {
    seq_t *s;
    int row0, n, pos0;
} span_t;

/* One row of the activation matrices. */
typedef struct {
    seq_t *s;
    int pos;     /* its position in its sequence */
    int in_step; /* its span starts after position 0 (FAULT rope-offset) */
} row_t;

struct cis2_engine {
    const cis2_model *m; /* read only, shared with any other engine */
    cis2_weights w;      /* this engine's view of m->w (a fault may swap one tensor) */
    cis2_layer *layers;  /* w.layers, this engine's copy of the per-layer table */
    cis2_backend *be;
    cis2_engine_opts o;
    int n_seqs; /* slots in seqs[]; seqs[n_seqs] is the solo sequence of cis2_engine_forward */
    seq_t *seqs;
    /* Activations, one row per token: x [T][hidden] is the residual stream. */
    int t_cap; /* rows the buffers below hold */
    row_t *rows;
    int32_t *tokens;
    span_t *spans;
    float *x, *xn, *q, *k, *v, *att, *proj, *gate, *up, *act;
    float *rope_c, *rope_s; /* [T][head_dim/2]: each row's §7.3 table, once per forward */
    float *xf;              /* [T][hidden]: final-normed rows (§11.1 head input) */
    void *arena;            /* the float buffers above: one huge-page mapping */
    size_t arena_len;
    float *logits;         /* [T][vocab]: one row per span (its last token, §3.4) */
    float *logits_side;    /* [vocab]: a lone row's other buffer, while the side job hashes one */
    float *scores, *probs; /* traced attention: [n_heads][n_ctx] */
    size_t scores_cap;
    /* A lone sequence's last logits row and pick, hashed into its witness on
     * the backend's side thread (witness_job_run) while the next step runs. */
    struct witness_job {
        seq_t *s;
        const float *row;
        size_t len;
        int32_t id;
    } wj;
    cis2_fault fault; /* FAULT INJECTION (docs/divergence.md, debug only) */
    int stepping;     /* inside cis2_engine_step: on_step callbacks may run */
};

/* The memory helpers engine.c and kv_cache.c share. *pp realloc'ed to n
 * items of size bytes (1 = out of memory, *pp unchanged). */
static inline int eng_grow(void *pp, size_t n, size_t size)
{
    void **p = pp, *q = realloc(*p, n * size);
    if (!q) return 1;
    *p = q;
    return 0;
}
/* Buffers of a megabyte or more take huge pages (core/core.h); smaller
 * ones malloc (len 0), so small models and engines don't map 2 MiB each. */
static inline void *eng_buf_alloc(size_t bytes, size_t *len)
{
    *len = 0;
    return bytes < ((size_t)1 << 20) ? malloc(bytes) : cis2_big_alloc(bytes, len);
}
static inline void eng_buf_free(void *p, size_t len)
{
    if (len) cis2_big_free(p, len);
    else free(p);
}
/* The backend's scratch for `rows` activation rows and `positions` keys
 * (backend.h): reserved before any pass needs it, so a forward pass
 * allocates nothing past the engine's rows and the KV cache's positions. */
static inline int eng_reserve(cis2_engine *e, int rows, int positions, char *err)
{
    const cis2_config *c = &e->m->cfg;
    return e->be->reserve
               ? e->be->reserve(e->be, rows, positions, c->n_heads, c->n_kv_heads, c->head_dim, err)
               : 0;
}

/* kv_cache.c: s's KV cache made to hold positions < need (it keeps what it
 * holds), and given back to the system. */
int eng_ensure_positions(cis2_engine *e, seq_t *s, int need, char *err);
void eng_kv_free(seq_t *s);

/* forward.c: the forward pass over e->tokens[0..T) as n_sp spans. */
int eng_forward(cis2_engine *e, const span_t *sp, int n_sp, int T, float *logits, char *err);

/* witness.c: the §12.1 stream (an id as 4 little-endian bytes,
 * cis2_sha256_update_u32; its start; the side job; waiting for the side job). */
void witness_begin(cis2_sha256 *w, const cis2_digests *d, const int32_t *prompt, int n_prompt);
void witness_job_run(void *ctx);
void witness_wait(cis2_engine *e);
#endif
