/* int8 row-wise quantization (docs/quantization.md): the pinned rule
 * (quantize.c), the compressed-tensors quantization_config of config.json
 * (quant_config.c: parse and write), and the checkpoint converter behind
 * `cis2 quantize` (quantize_write.c). */
#ifndef CIS2_QUANT_H
#define CIS2_QUANT_H
#include "core/core.h"

/* ------------------------------------------------------------ the rule */
/* One row w[0..n) (already widened exactly, §4.1) to q[0..n) and *s, by
 * docs/quantization.md §1: s = maxabs/127 (one f32 division, RNE), q =
 * clamp(rne(w/s), -127, 127) (w/s one f32 division); subnormal weights read
 * as zero and a subnormal s flushes to zero (§1.3, decided by bit pattern,
 * whatever the FP environment); s = 0 gives q = 0. Returns -1, or the index
 * of the first NaN/Inf weight (nothing is written then). */
int cis2_quantize_row(const float *w, int n, int8_t *q, float *s);

/* --------------------------------------------------- quantization_config */
#define CIS2_QC_MAX_IGNORE 64
typedef struct {
    int present;          /* config.json has a (non-null) quantization_config */
    int lm_head;          /* the LM head is quantized ("lm_head" not in ignore) */
    int embed;            /* "Embedding" is a target: the embedding is int8 too */
    char format[24];      /* "int-quantized" or "naive-quantized" (same tensors) */
    char scale_dtype[24]; /* "" = the checkpoint says (F32/BF16/F16 accepted) */
    int n_ignore;         /* other ignored modules: left in float */
    char *ignore[CIS2_QC_MAX_IGNORE];
} cis2_quant_config;

/* Read quantization_config from config.json's text: absent or null ->
 * present = 0. Accepted: compressed-tensors, format int-/naive-quantized,
 * every group int, 8 bits, symmetric, strategy channel (group_size null or
 * -1), static, no actorder, no input/output activation quantization,
 * targets Linear (and Embedding); anything else, and any unknown key, is
 * refused naming the field ("PATH: quantization_config.X ...: why"). */
int cis2_quant_config_parse(const char *json, size_t len, const char *path, cis2_quant_config *q,
                            char *err);
void cis2_quant_config_free(cis2_quant_config *q);
/* The quantization_config object `cis2 quantize` writes (malloc'd JSON text,
 * lines after the first indented by `indent` spaces), or NULL on OOM. */
char *cis2_quant_config_json(int lm_head, int embed, int indent);

/* -------------------------------------------------- the checkpoint writer */
typedef struct {
    int lm_head; /* quantize the LM head too (tied: needs embed) */
    int embed;   /* quantize the embedding too */
    /* Test hook (tests/t_quant.sh; NULL in every normal use): "kill-after-weights",
     * "kill-before-swap", "no-exchange", "kill-between-renames" stop the process
     * (SIGKILL) at that point of writing QDIR, or take the rename fallback. */
    const char *test_hook;
} cis2_quant_opts;
typedef struct {
    int n_int8;                   /* tensors written as int8 + scale */
    int n_f32;                    /* norms/biases written as F32 */
    int n_kept;                   /* tensors copied verbatim */
    uint64_t int8_params;         /* weights now int8 */
    uint64_t in_bytes, out_bytes; /* model.safetensors sizes */
    int zero_rows;                /* rows whose scale is 0 */
    uint8_t out_sha256[32];       /* of the written model.safetensors */
    char note[CIS2_ERR_LEN];      /* "" or one line: the old QDIR could not all be removed */
} cis2_quant_report;
/* DIR (config.json, model.safetensors, tokenizer.json) -> QDIR (created if
 * missing; never DIR itself): the linears int8 with one f32 scale per row,
 * compressed-tensors layout; deterministic bytes. QDIR changes all at once
 * (quant_outdir.c): built beside it, then renamed into place. */
int cis2_quantize_checkpoint(const char *dir, const char *qdir, const cis2_quant_opts *o,
                             cis2_quant_report *rep, char *err);

/* ------------------------------------------- the output directory, swapped */
typedef struct {
    char final[4096]; /* QDIR, trailing slashes dropped */
    char tmp[4096];   /* QDIR.quantize-tmp.HEX: the new checkpoint is built here */
    int existed;      /* QDIR was a directory: it is replaced, its files removed */
} cis2_qout;
/* Check QDIR (not a link; not "." or ".."; when it exists, holding nothing
 * but regular files `cis2 quantize` writes, which are removed with it) and
 * make the empty directory beside it that the new checkpoint is written to.
 * Call after the checks of check_out_dir (quantize_write.c). */
int cis2_qout_begin(cis2_qout *q, const char *qdir, char *err);
/* Put q->tmp in QDIR's place in one step (renameat2 RENAME_EXCHANGE; where
 * the file system lacks it, two renames) and remove the old directory; a
 * part of it that could not be removed is said in note (the new QDIR is in
 * place all the same). hook: cis2_quant_opts.test_hook. */
int cis2_qout_commit(cis2_qout *q, const char *hook, char *note, char *err);
/* Remove q->tmp and what was written in it (a failed run). */
void cis2_qout_abort(cis2_qout *q);

/* ------------------------------------------------- the twin's recorded source */
/* The source_sha256 that `cis2 quantize` records in QDIR/model.safetensors'
 * __metadata__ (its header alone is read): 1 with *val (malloc'd, as
 * recorded: print it escaped) and *len, 0 when the checkpoint records none (a
 * checkpoint from another quantizer), -1 on an error (err says it). */
int cis2_quant_recorded_source(const char *qdir, char **val, size_t *len, char *err);
#endif
