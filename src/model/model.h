/* The model layer's internal interface: config.json (§2.2), the safetensors
 * reader (§2), and the loaded model — its weights, hashes and tokenizer. */
#ifndef CIS2_MODEL_H
#define CIS2_MODEL_H
#include "core/core.h"

/* ------------------------------------------------------------------ config */
int cis2_config_parse(const char *json, size_t len, const char *path, cis2_config *cfg, char *err);
int cis2_config_load(const char *path, cis2_config *cfg, char *err);
const char *cis2_arch_name(cis2_arch a); /* "llama", "qwen2", "qwen3" */

/* ------------------------------------------------------------- safetensors */
typedef enum { CIS2_DT_F32 = 0, CIS2_DT_BF16 = 1, CIS2_DT_F16 = 2 } cis2_dtype;

typedef struct {
    char *name;
    cis2_dtype dtype;
    int ndim;
    int64_t shape[8];
    int64_t numel;
    const uint8_t *data; /* into the file image */
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
int cis2_st_open(cis2_safetensors *st, const char *path, char *err);
/* Validate an in-memory image (the fuzzers use this). `buf` must outlive st. */
int cis2_st_parse(cis2_safetensors *st, const uint8_t *buf, size_t len, const char *path,
                  char *err);
const cis2_st_tensor *cis2_st_find(const cis2_safetensors *st, const char *name);
void cis2_st_close(cis2_safetensors *st);
/* Widen any supported dtype to f32 exactly (§4.1; F16 converted exactly). */
void cis2_st_to_f32(const cis2_st_tensor *t, float *out);
float cis2_f16_to_f32(uint16_t h);

/* ------------------------------------------------------------------- model */
/* A linear layer's weight, [rows, cols] row-major. `f32` is the widened copy
 * the reference kernels read (§4.2); `raw`/`dtype` point into the file image
 * so fast backends can keep bf16 resident; `packed` belongs to the backend. */
typedef struct {
    int rows, cols;
    cis2_dtype dtype;
    const uint8_t *raw;
    float *f32;
    void *packed;
} cis2_linear;

typedef struct {
    float *attn_norm, *mlp_norm; /* [hidden] */
    cis2_linear q, k, v, o, gate, up, down;
    float *q_bias, *k_bias, *v_bias; /* Qwen2, else NULL */
    float *q_norm, *k_norm;          /* Qwen3 [head_dim], else NULL */
} cis2_layer;

struct cis2_model {
    char dir[1024];
    cis2_config cfg;
    cis2_safetensors st;
    cis2_digests dg;
    float *inv_freq;     /* [head_dim/2] */
    cis2_linear embed;   /* [vocab, hidden] */
    cis2_linear lm_head; /* shares embed's slot when tied */
    float *final_norm;
    cis2_layer *layers;
    cis2_tokenizer *tokenizer; /* NULL when tokenizer.json is not one we reproduce */
    char tokenizer_err[CIS2_ERR_LEN];
    double load_ms, hash_ms;
    void *hash_job; /* pending async hash (CIS2_LOAD_HASH_ASYNC), else NULL */
};

typedef struct {
    int need_f32;  /* widen every linear to f32 (reference backend) */
    int skip_hash; /* 0: hash synchronously; CIS2_LOAD_HASH_SKIP (tests only): hashes zeroed;
                    * CIS2_LOAD_HASH_ASYNC: hash the weights on a background thread,
                    * final once cis2_engine_new returns (it joins) */
} cis2_load_opts;
#define CIS2_LOAD_HASH_SKIP  1
#define CIS2_LOAD_HASH_ASYNC 2

/* Load DIR into a caller-owned struct (cis2_model_open allocates one). */
int cis2_model_load(cis2_model *m, const char *dir, const cis2_load_opts *o, char *err);
/* Release what cis2_model_load allocated (not the struct itself). */
void cis2_model_unload(cis2_model *m);
/* Wait for a pending async hash and publish the digests. 0 when none is
 * pending; 1 with a message when hashing failed. */
int cis2_model_hash_join(cis2_model *m, char *err);
/* Widen every linear to f32 if the load did not (the reference backend). */
int cis2_model_widen(cis2_model *m, char *err);
/* Bytes per element of a stored dtype. */
size_t cis2_dtype_size(cis2_dtype dt);
#endif
