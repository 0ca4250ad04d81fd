/* The model layer's internal interface: config.json (§2.2), the safetensors
 * reader (§2), and the loaded model — its resident weights (weights.h),
 * hashes and tokenizer. A loaded model is never written again: engines on
 * any threads share it. */
#ifndef CIS2_MODEL_H
#define CIS2_MODEL_H
#include "core/core.h"
#include "model/weights.h"
#include "model/quant.h"

/* The most bytes config.json and tokenizer.json may have (real ones: under
 * 4 KiB and 12 MiB): a larger file is refused by its size, unread, wherever
 * it is loaded (a model directory, tokenize --tokenizer, quantize). */
#define CIS2_CONFIG_MAX    ((size_t)16 << 20)
#define CIS2_TOKENIZER_MAX ((size_t)256 << 20)

/* ------------------------------------------------------------------ config */
/* config.json -> cfg. Where config.json leaves a choice to the tensors
 * (§9.1, §11.1) the parse records what it says: cfg->tied is -1 when
 * tie_word_embeddings is absent, and qkv_bias is left 0; the loader settles
 * both from the checkpoint (a loaded model's config holds the outcome). */
int cis2_config_parse(const char *json, size_t len, const char *path, cis2_config *cfg, char *err);
/* cis2_arch_name is public (cis2.h). */

/* ------------------------------------------------------------- safetensors */
typedef struct {
    char *name;
    cis2_dtype dtype;
    int ndim;
    int64_t shape[8];
    int64_t numel;
    uint64_t offset; /* from the start of the data section */
    uint64_t nbytes;
    const uint8_t *data; /* into the file image once bound (cis2_st_bind), else NULL */
} cis2_st_tensor;

typedef struct {
    const char *path;
    uint64_t data_start; /* 8 + the header length */
    uint64_t file_len;
    cis2_st_tensor *t; /* sorted by name */
    int n;
    char *metadata_json; /* raw __metadata__ object text, or NULL */
} cis2_safetensors;

/* The 8-byte header length, checked against the file's size. */
int cis2_st_header_len(const uint8_t first8[8], uint64_t file_len, const char *path, uint64_t *hlen,
                       char *err);
/* Validate the header (hlen bytes after the length) against the file size:
 * every check of the format needs nothing else. Tensors are not bound yet. */
int cis2_st_parse_header(cis2_safetensors *st, const uint8_t *header, uint64_t hlen,
                         uint64_t file_len, const char *path, char *err);
/* Point every tensor's data into the image of the whole file. */
void cis2_st_bind(cis2_safetensors *st, const uint8_t *file);
/* Validate and bind an in-memory image (the fuzzers). `buf` must outlive st. */
int cis2_st_parse(cis2_safetensors *st, const uint8_t *buf, size_t len, const char *path,
                  char *err);
/* Open a safetensors file and validate its length prefix and header against
 * the file's size, before any tensor data is read: *head gets the first
 * st->data_start bytes (the caller frees it), *fd is left at the data. */
int cis2_st_open_header(cis2_safetensors *st, const char *path, int *fd, uint8_t **head, char *err);
const cis2_st_tensor *cis2_st_find(const cis2_safetensors *st, const char *name);
void cis2_st_close(cis2_safetensors *st);
/* Widen any supported dtype to f32 exactly (§4.1; F16 converted exactly). */
void cis2_st_to_f32(const cis2_st_tensor *t, float *out);

/* ------------------------------------------------------------------- model */
#define CIS2_MODEL_MAX_WARNINGS 4

struct cis2_model {
    char dir[1024];
    cis2_config cfg;
    cis2_digests dg;
    float *inv_freq;      /* [head_dim/2] */
    cis2_weights w;       /* resident weights; w.layers and every tile live in `arena` */
    cis2_quant_config qc; /* config.json's quantization_config (present = 0: none) */
    int n_int8;           /* linears held as I8 (docs/quantization.md): dtype "int8-row" */
    void *arena;
    size_t arena_len;
    cis2_tokenizer *tokenizer; /* NULL when tokenizer.json is not one we reproduce */
    char tokenizer_err[CIS2_ERR_LEN];
    int n_warnings;
    char warnings[CIS2_MODEL_MAX_WARNINGS][CIS2_ERR_LEN];
    uint64_t file_bytes; /* model.safetensors */
    double load_ms, hash_ms;
    /* CIS2_HASH_CALLER (cis2.h): the digests still to come from
     * cis2_model_set_digest, bits 1 << cis2_digest_kind; 0 otherwise. */
    int caller_digests, digests_pending;
};

/* The phases of a load, in order, for the test hook below. */
typedef enum {
    CIS2_LOAD_CONFIG_READ,    /* config.json read (and hashed) */
    CIS2_LOAD_TOKENIZER_READ, /* tokenizer.json read (and hashed) */
    CIS2_LOAD_WEIGHTS_OPEN,   /* model.safetensors open, its header validated */
    CIS2_LOAD_WEIGHTS_READ,   /* every byte of it read (hashing/packing may continue) */
    CIS2_LOAD_DONE            /* packed and hashed; no file is read after this */
} cis2_load_phase;

typedef struct {
    int skip_hash; /* CIS2_LOAD_HASH_SKIP: hashes read as zero (fuzzing, timing) */
    /* With skip_hash: digests the caller computed over exactly the bytes it
     * serves (the wasm glue hashes the files as it writes them); NULL = zero. */
    const uint8_t *weights_sha256, *tokenizer_sha256;
    /* Debug/test hook (tests/unit_engine.c): called on the loading thread
     * after each phase, so a test can rename or overwrite the files between
     * phases deterministically. NULL in every normal use. */
    void (*hook)(void *ctx, cis2_load_phase phase, const char *dir);
    void *hook_ctx;
} cis2_load_opts;
#define CIS2_LOAD_HASH_SKIP 1

/* Load DIR into a caller-owned struct (cis2_model_open allocates one). Each
 * file is opened once and read once into memory the process owns; the
 * hashes are of exactly those bytes; weights are packed from them. */
int cis2_model_load(cis2_model *m, const char *dir, const cis2_load_opts *o, char *err);
/* cis2_model_push_open/_buf/_feed/_end (cis2.h) are the same load with
 * model.safetensors pushed in by the caller, chunk by chunk. */
/* State 1 of the divergence method: SHA-256 over the I8 linears in name
 * order ("model.layers.0.mlp.down_proj"), each its name, a NUL, its q bytes
 * row-major and its scales as f32 little-endian (docs/quantization.md §7);
 * 1 when the model has none. */
int cis2_model_int8_digest(const cis2_model *m, uint8_t out[32]);
/* Release what cis2_model_load allocated (not the struct itself). */
void cis2_model_unload(cis2_model *m);
#endif
