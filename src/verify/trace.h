/* Layer traces for the divergence localizer (docs/divergence.md): the trace
 * file format (trace_file.c), capturing a traced run of our engine
 * (trace_capture.c), and the diff that measures every node, names the first
 * divergent one and walks the decision tree (trace_diff.c).
 *
 * A trace is a safetensors file of F32 tensors named p{pos}.embed,
 * p{pos}.L{l}.{node}, p{pos}.final_norm, p{pos}.logits (attn_scores and
 * attn_probs are [n_heads, n_ctx], everything else 1-D) and a string
 * __metadata__ (format "cis2-trace/1", arm, token ids, artifact hashes, node
 * order). A --hash-only trace holds no tensors: each captured tensor is a
 * metadata entry "sha256.NAME": "DIMS HEX" (DIMS like "4x5" or "64"; HEX the
 * SHA-256 of the tensor's little-endian F32 bytes). */
#ifndef CIS2_TRACE_H
#define CIS2_TRACE_H
#include "verify/verify.h"
#include <stdio.h>

#define CIS2_TRACE_FORMAT "cis2-trace/1"
/* A trace file is read into memory whole; larger ones are refused by size. */
#define CIS2_TRACE_MAX ((uint64_t)16 << 30)
/* --tol files are a few lines. */
#define CIS2_TOL_MAX ((size_t)1 << 20)

/* The traced nodes: cis2_trace_node (engine/backend.h, forward.c's names). */
int cis2_trace_node_index(const char *s, size_t len); /* -1 when unknown */
const char *cis2_trace_node_name(int k);              /* "?" outside the enum */

/* ------------------------------------------------------- the file (trace_file.c) */
typedef struct {
    char *name;
    int pos, layer, node; /* layer -1 for embed/final_norm/logits */
    int ndim;
    int64_t shape[2], n;
    float *v;        /* NULL for hash-only entries */
    uint8_t sha[32]; /* hash-only entries only: the values' SHA-256 */
} cis2_tentry;

typedef struct {
    const char *path; /* for messages ("(our run)" for in-memory) */
    cis2_tentry *t;
    int n, cap;
    char **mk, **mv; /* metadata, in insertion order */
    int nm, mcap;
    int hash_only;
} cis2_trace;

void cis2_trace_free(cis2_trace *tr);
int cis2_trace_meta_set(cis2_trace *tr, const char *k, const char *v);
const char *cis2_trace_meta_get(const cis2_trace *tr, const char *k);
/* Ids "1,2,3" from a metadata entry (empty string: none). */
int cis2_trace_meta_ids(const cis2_trace *tr, const char *k, int32_t **ids, int *n, char *err);
cis2_tentry *cis2_trace_add(cis2_trace *tr);
/* Execution order: position, then embed, layers in order, final_norm, logits. */
int cis2_trace_cmp(const cis2_tentry *a, const cis2_tentry *b);
void cis2_trace_sort(cis2_trace *tr);
void cis2_trace_dims(const cis2_tentry *e, char *out, size_t cap); /* "4x5" / "64" */
/* Validates an in-memory trace image (names, F32, shapes, metadata, hash
 * entries) and copies it into tr; `path` names it in messages. */
int cis2_trace_parse(cis2_trace *tr, const uint8_t *buf, size_t len, const char *path, char *err);
/* A trace file: refused without blocking unless it is a regular file,
 * refused by size over CIS2_TRACE_MAX, read once, parsed. */
int cis2_trace_load(cis2_trace *tr, const char *path, char *err);
/* The file's bytes (malloc'd). */
int cis2_trace_format(const cis2_trace *tr, char **out, size_t *len, char *err);
/* Only its start, up to the tensor data (malloc'd); the data that follows is
 * each entry's values (those with v), in order, as little-endian F32 — for a
 * writer that streams them instead of holding the file twice (web/wasm_api.c). */
int cis2_trace_format_header(const cis2_trace *tr, char **out, size_t *len, char *err);

/* ------------------------------------------------ a traced run (trace_capture.c) */
typedef struct {
    const char *arm;    /* NULL: "cis2-BACKEND" */
    const char *layers; /* "0-2,29" or NULL for all */
    const char *nodes;  /* "q_proj,logits" or NULL for all */
    int hash_only;
    int greedy_n; /* > 0: cis2_generate (CIS-2 greedy; the trace holds its witness) */
    int extend_n; /* > 0: token-at-a-time greedy extension after the forced tokens */
} cis2_trace_req;

typedef struct {
    int32_t *tokens;
    int n_tokens; /* every token fed */
    int32_t *pred;
    int n_pred; /* argmax at each position with logits */
    uint8_t witness[32];
    int have_witness;
} cis2_trace_run;
void cis2_trace_run_free(cis2_trace_run *r);

/* Runs `prompt ++ force` (teacher-forced, one token per forward so every
 * position has logits) or greedy, on a new engine over m with `eo` (its
 * trace callback is ours), capturing into tr (sorted, with metadata).
 * Ids outside the vocabulary and bad --layers/--nodes are refused. */
int cis2_trace_arm(const cis2_model *m, const cis2_engine_opts *eo, const cis2_trace_req *rq,
                   const int32_t *prompt, int np, const int32_t *force, int nf, cis2_trace *tr,
                   cis2_trace_run *run, char *err);

/* ----------------------------------------------------- the diff (trace_diff.c) */
typedef struct {
    double max_rel, mean_rel, min_cos;
    int top1;        /* every position's top-1 must agree */
    double top1_min; /* logits: the fraction of positions whose top-1 must agree (0: none) */
} cis2_tol_row;
typedef struct {
    cis2_tol_row row[CIS2_N_NODES];
    const char *name; /* the built-in table it started from ("fp32", "armd") */
} cis2_tol_table;
/* The default table (docs/divergence.md), for fp32 engines that are not CIS-2. */
void cis2_tol_defaults(cis2_tol_table *t);
/* A built-in table by name: "fp32" (the default) or "armd" (arm D against
 * arm C, docs/divergence.md); unknown names are refused. */
int cis2_tol_named(cis2_tol_table *t, const char *name, char *err);
/* "NODE|* key=number..." lines (# comments, CRLF allowed) over t. `text`
 * is modified. */
int cis2_tol_parse(cis2_tol_table *t, char *text, size_t len, const char *path, char *err);
int cis2_tol_load(cis2_tol_table *t, const char *path, char *err);
/* Aligns A and B by name, measures each pair and prints the report to out
 * (every string from a trace escaped). Returns 0 identical / within
 * tolerance, 1 diverged. only_b_names: tensors of A that B lacks are
 * skipped (B captured less), not reported. */
int cis2_trace_diff(FILE *out, const cis2_trace *A, const cis2_trace *B, int exact,
                    const cis2_tol_table *tol, int brief, int only_b_names);
/* What a diff found, for a report over many arms (cis2 arms). Per node kind
 * (over the tensors with values): worst max_rel (max_abs / max|A|), worst
 * and mean mean_rel, lowest cosine. */
typedef struct {
    int n;
    double max_rel, mean_rel_max, mean_rel_sum, min_cos;
} cis2_diff_kind;
typedef struct {
    int compared, structural, n_failed, diverged; /* tensors; diverged = the return value */
    uint64_t max_ulp;                             /* over every compared tensor */
    int nan_ulp;                                  /* a NaN differs somewhere */
    int64_t ndiff;                                /* elements whose bits differ, summed */
    int n_logits, top1_same;                      /* positions with logits; top-1 equal */
    int have_first, first_pos, first_layer, first_node, branch; /* branch: 0..3 */
    char first[64], branch_name[32], cause[320];
    cis2_diff_kind kind[CIS2_N_NODES];
} cis2_diff_sum;
/* cis2_trace_diff that also fills *sum (may be NULL). */
int cis2_trace_diff_sum(FILE *out, const cis2_trace *A, const cis2_trace *B, int exact,
                        const cis2_tol_table *tol, int brief, int only_b_names, cis2_diff_sum *sum);
#endif
