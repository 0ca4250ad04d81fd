/* cis2 — bit-exact CIS-2 v0.3b fp32 transformer inference.
 *
 * The library API; the `cis2` CLI (src/main.c, src/cli.c) is its first client.
 * Every function that can fail returns 0 on success and a nonzero value on
 * failure, writing one human-readable line (naming the file and the problem)
 * into the caller's `err` buffer of CIS2_ERR_LEN bytes.
 */
#ifndef CIS2_H
#define CIS2_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CIS2_SPEC_VERSION "0.3b"
#define CIS2_ERR_LEN 512

/* ------------------------------------------------------------ fpenv (§1.3) */
/* Pin FTZ+DAZ (x86-64 MXCSR bits 15, 6) / FZ (aarch64 FPCR bit 24) on the
 * calling thread by register read-modify-write and read it back.
 * Returns 0 when the readback shows the pin in effect. */
int cis2_fpenv_pin(void);
/* 1 when the calling thread's FP control register has the pin set. */
int cis2_fpenv_is_pinned(void);
/* Raw control register value (MXCSR or FPCR), for diagnostics. */
uint64_t cis2_fpenv_read(void);
/* Restore the IEEE default flush behaviour on this thread (used only by the
 * self-test's "differs without the pin" leg and by the no-ftz fault). */
void cis2_fpenv_unpin(void);
/* Run the §1.3 adversarial denormal rows through volatile operands.
 * Prints one line per row to `log` (may be NULL). Returns number of failures. */
int cis2_fpenv_selftest(FILE *log);
/* Classify by bit pattern (never via (double)x or fabs(x) < FLT_MIN). */
int cis2_f32_is_subnormal(uint32_t bits);
const char *cis2_isa_name(void);
/* `cis2 selftest`: the §1.3 rows, the §5.1 cancellation, rsqrt(64), and the
 * §6.6/§7.2 pinned digests, one PASS/FAIL line each to `out`. Pins FTZ/DAZ on
 * the calling thread first. Returns the number of failures. */
int cis2_selftest(FILE *out);

/* ------------------------------------------------------- pinned math (§5, §6) */
static inline uint32_t cis2_f2u(float f) { union { float f; uint32_t u; } c; c.f = f; return c.u; }
static inline float cis2_u2f(uint32_t u) { union { float f; uint32_t u; } c; c.u = u; return c.f; }
static inline float cis2_bf16_to_f32(uint16_t b) { return cis2_u2f((uint32_t)b << 16); } /* §4.1 */

float cis2_dot_seq(const float *a, const float *b, size_t n);   /* §5.1 */
float cis2_sum_seq(const float *a, size_t n);                   /* §5.3 */
float cis2_ldexp_exact(float x, int k);                         /* §6.2.1 */
float cis2_frexp_exact(float x, int *e);                        /* §6.5.1 */
float cis2_exp_pinned(float x);                                 /* §6.2 */
float cis2_ln_pinned(float x);                                  /* §6.5 */
float cis2_sin_pinned(float x);                                 /* §6.3 */
float cis2_cos_pinned(float x);                                 /* §6.3 */
void  cis2_sincos_pinned(float x, float *s, float *c);          /* §6.3, one reduction */
float cis2_silu(float x);                                       /* §6.4 */
float cis2_rsqrt(float x);                                      /* §6.1 */
void  cis2_table_digest(uint8_t out[32]);                       /* §6.6 */
/* §7.1: inv_freq[head_dim/2]; §7.2 digest over it. */
void  cis2_inv_freq(int head_dim, float rope_theta, float *inv_freq);
void  cis2_f32_digest(const float *v, size_t n, uint8_t out[32]);

/* --------------------------------------------------------------- sha256 */
typedef struct {
    uint32_t h[8];
    uint64_t nbytes;
    uint8_t buf[64];
    size_t buflen;
} cis2_sha256;
void cis2_sha256_init(cis2_sha256 *s);
void cis2_sha256_update(cis2_sha256 *s, const void *data, size_t len);
void cis2_sha256_final(cis2_sha256 *s, uint8_t out[32]);
void cis2_sha256_buf(const void *data, size_t len, uint8_t out[32]);
int  cis2_sha256_file(const char *path, uint8_t out[32], char *err);
void cis2_hex(const uint8_t *b, size_t n, char *out); /* lowercase, NUL-terminated */
int  cis2_unhex32(const char *hex, uint8_t out[32]);  /* exactly 64 lowercase hex chars */
const char *cis2_sha256_impl(void);                    /* "sha-ni" or "portable" */

/* --------------------------------------------------------------- config */
typedef enum { CIS2_ARCH_LLAMA = 0, CIS2_ARCH_QWEN2 = 1, CIS2_ARCH_QWEN3 = 2 } cis2_arch;

typedef struct {
    cis2_arch arch;
    int hidden, inter, n_layers, n_heads, n_kv_heads, head_dim, vocab, max_pos;
    float eps;          /* §2.3: (float)(double)rms_norm_eps */
    float rope_theta;   /* (float)(double)rope_theta */
    int tied;           /* tie_word_embeddings */
    int qkv_bias;       /* Qwen2: attention_bias (or arch default) */
    int qk_norm;        /* Qwen3 */
    int bos_id;         /* -1 when absent */
    int n_eos;          /* eos_token_id: an int or a list in config.json */
    int eos_ids[8];
} cis2_config;

int cis2_config_parse(const char *json, size_t len, const char *path, cis2_config *cfg, char *err);
int cis2_config_load(const char *path, cis2_config *cfg, char *err);

/* ----------------------------------------------------------- safetensors */
typedef enum { CIS2_DT_F32 = 0, CIS2_DT_BF16 = 1, CIS2_DT_F16 = 2 } cis2_dtype;

typedef struct {
    char *name;
    cis2_dtype dtype;
    int ndim;
    int64_t shape[8];
    int64_t numel;
    const uint8_t *data; /* into the mapping */
    uint64_t nbytes;
} cis2_st_tensor;

typedef struct {
    const char *path;
    uint8_t *map;
    size_t map_len;
    cis2_st_tensor *t;
    int n;
    char *metadata_json; /* raw __metadata__ object text, or NULL */
} cis2_safetensors;

/* Map and fully validate (§2, the reader's own rules). */
int  cis2_st_open(cis2_safetensors *st, const char *path, char *err);
/* Validate an in-memory image (the fuzzers use this). `buf` must outlive st. */
int  cis2_st_parse(cis2_safetensors *st, const uint8_t *buf, size_t len, const char *path, char *err);
const cis2_st_tensor *cis2_st_find(const cis2_safetensors *st, const char *name);
void cis2_st_close(cis2_safetensors *st);
/* Widen any supported dtype to f32 exactly (§4.1; F16 converted exactly). */
void cis2_st_to_f32(const cis2_st_tensor *t, float *out);
float cis2_f16_to_f32(uint16_t h);

/* ----------------------------------------------------------------- model */
/* A linear layer's weight, [rows, cols] row-major. `f32` is the widened copy
 * the reference kernels read (§4.2); `raw`/`dtype` point into the mapping so
 * fast backends can keep bf16 resident; `packed` belongs to the backend. */
typedef struct {
    int rows, cols;
    cis2_dtype dtype;
    const uint8_t *raw;
    float *f32;
    void *packed;
} cis2_linear;

typedef struct {
    float *attn_norm, *mlp_norm;       /* [hidden] */
    cis2_linear q, k, v, o, gate, up, down;
    float *q_bias, *k_bias, *v_bias;   /* Qwen2, else NULL */
    float *q_norm, *k_norm;            /* Qwen3 [head_dim], else NULL */
} cis2_layer;

typedef struct cis2_model {
    char dir[1024];
    cis2_config cfg;
    cis2_safetensors st;
    uint8_t weights_sha[32], tokenizer_sha[32], config_sha[32];
    uint8_t table_digest[32], inv_freq_digest[32];
    float *inv_freq;            /* [head_dim/2] */
    cis2_linear embed;          /* [vocab, hidden] */
    cis2_linear lm_head;        /* aliases embed when tied */
    float *final_norm;
    cis2_layer *layers;
    int have_tokenizer;         /* tokenizer.json present */
    double load_ms, hash_ms;
    void *hash_job;             /* pending async hash (skip_hash = CIS2_HASH_ASYNC), else NULL */
} cis2_model;

typedef struct {
    int need_f32;        /* widen every linear to f32 (reference backend) */
    int skip_hash;       /* 0: hash synchronously; 1 (tests only): don't hash (hashes zeroed);
                          * CIS2_HASH_ASYNC: hash weights + tokenizer on a background thread,
                          * final once cis2_engine_new returns (it joins) */
} cis2_load_opts;
#define CIS2_HASH_ASYNC 2

/* Load DIR/{config.json,model.safetensors,tokenizer.json}. tokenizer.json is
 * hashed (§12.1 item 2) and must exist. */
int  cis2_model_load(cis2_model *m, const char *dir, const cis2_load_opts *o, char *err);
void cis2_model_free(cis2_model *m);

/* ---------------------------------------------------------------- decode */
struct cis2_engine;
typedef struct cis2_engine cis2_engine;

/* Trace callback (issue 6): called for every node of the forward pass with the
 * values it produced. `layer` is -1 for embed/final_norm/logits. */
typedef void (*cis2_trace_fn)(void *ctx, int pos, int layer, const char *node,
                              const float *v, size_t n);

typedef struct {
    const char *backend;   /* "ref" (default) or "fast" */
    const char *isa;       /* fast backend: force an ISA path, NULL = best */
    int threads;           /* fast backend: 0 = all cores */
    cis2_trace_fn trace;   /* NULL = no tracing */
    void *trace_ctx;
    const char *fault;     /* fault injection (issue 6), NULL = none */
    const char *fault_arg;
} cis2_engine_opts;

int  cis2_engine_new(cis2_engine **e, cis2_model *m, const cis2_engine_opts *o, char *err);
void cis2_engine_free(cis2_engine *e);
/* Run tokens[0..n) at positions pos0.. through the model, appending to the
 * KV cache. When `logits` is non-NULL it receives the vocab logits of the
 * last token only (§3.4: logits of earlier positions are not computed). */
int  cis2_engine_forward(cis2_engine *e, const int32_t *tokens, int n, int pos0,
                         float *logits, char *err);
const char *cis2_engine_backend(const cis2_engine *e);

/* §11.2 strict-> argmax, first occurrence wins. */
int32_t cis2_argmax(const float *logits, int n);

typedef struct {
    int32_t *prompt; int n_prompt;
    int32_t *gen;    int n_gen;
    uint8_t witness[32];   /* §12.1 CIS2_REF */
    uint8_t argmax[32];    /* §12.2 */
    double prefill_ms, decode_ms;
    int stopped_at_eos;
} cis2_result;

typedef struct {
    int n_gen;             /* exactly this many tokens (§3.4) */
    int stop_at_eos;       /* opt-in: stop after emitting eos_id */
    /* called with each step's logits before the pick (may be NULL) */
    void (*on_step)(void *ctx, int step, const float *logits, int vocab, int32_t chosen);
    void *ctx;
} cis2_gen_opts;

/* §3.4/§12: prefill the prompt, decode greedily, compute witness & argmax digests. */
int  cis2_generate(cis2_engine *e, const int32_t *prompt, int n_prompt,
                   const cis2_gen_opts *g, cis2_result *r, char *err);
void cis2_result_free(cis2_result *r);

/* --------------------------------------------------------------- receipt */
typedef struct {
    char spec_version[16];
    uint8_t weights_sha[32], config_sha[32], tokenizer_sha[32];
    uint8_t *prompt_bytes; size_t prompt_len;
    int32_t *prompt_ids; int n_prompt;
    int gen_toks;
    uint8_t table_digest[32], inv_freq_digest[32];
    int32_t *gen_ids; int n_gen;
    uint8_t argmax_digest[32], witness_digest[32];
} cis2_receipt;

/* Fill a receipt from a finished run. Borrows (does not copy) the prompt
 * bytes and the result's id arrays: keep them alive while `rc` is used. */
void cis2_receipt_from_run(cis2_receipt *rc, const cis2_model *m, const cis2_result *r,
                           const uint8_t *prompt_bytes, size_t prompt_len);
/* Text form: "CIS-2-RECEIPT v1" then 13 "key value" lines in fixed order. */
int  cis2_receipt_format(const cis2_receipt *r, char **out, size_t *len);
int  cis2_receipt_parse(const char *text, size_t len, const char *path, cis2_receipt *r, char *err);
/* Atomic write: temp file + rename. */
int  cis2_receipt_write(const cis2_receipt *r, const char *path, char *err);
void cis2_receipt_free(cis2_receipt *r);

/* ------------------------------------------------------------- tokenizer */
struct cis2_tokenizer;
typedef struct cis2_tokenizer cis2_tokenizer;
int  cis2_tokenizer_load(cis2_tokenizer **t, const char *path, char *err);
int  cis2_tokenizer_parse(cis2_tokenizer **t, const char *json, size_t len, const char *path, char *err);
void cis2_tokenizer_free(cis2_tokenizer *t);
/* Encode UTF-8 text (add_special_tokens=false, §3.3). *ids is malloc'd. */
int  cis2_tokenizer_encode(const cis2_tokenizer *t, const char *text, size_t len,
                           int32_t **ids, int *n, char *err);
/* Decode ids to UTF-8 text. *text is malloc'd and NUL-terminated. */
int  cis2_tokenizer_decode(const cis2_tokenizer *t, const int32_t *ids, int n,
                           char **text, size_t *len, char *err);
int  cis2_tokenizer_vocab_size(const cis2_tokenizer *t);

/* -------------------------------------------------------------- utilities */
/* Read a whole file (NUL-terminated copy). */
int  cis2_read_file(const char *path, char **buf, size_t *len, char *err);
/* Write a whole file atomically (temp + fsync + rename). */
int  cis2_write_file_atomic(const char *path, const void *buf, size_t len, char *err);
/* Parse "1,2,3" (no spaces, decimal, no leading zeros except "0"). */
int  cis2_parse_ids(const char *s, int32_t **ids, int *n, char *err);
/* Format ids comma-separated into a malloc'd string. */
char *cis2_format_ids(const int32_t *ids, int n);
double cis2_now_ms(void);

#endif
