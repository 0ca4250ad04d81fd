/* The verify layer's internal interface: receipts (public API in cis2.h),
 * the whole-model test vector that `cis2 conform` reads, and what the
 * verify files share. Traces: verify/trace.h; op-level conformance:
 * verify/conformance.h. */
#ifndef CIS2_VERIFY_H
#define CIS2_VERIFY_H
#include "engine/backend.h"

/* Receipts are a few kB; the parser's own line limit (4 MiB) times its 14
 * lines bounds a valid one, and a file over this is refused by its size. */
#define CIS2_RECEIPT_MAX ((size_t)64 << 20)
/* 0 when a receipt struct can be rendered and verified: spec_version and
 * dtype are the known NUL-terminated values, the counts are in range and
 * their arrays present; else 1 with err (cis2_receipt_format/_write/_verify
 * refuse such a struct). */
int cis2_receipt_check(const cis2_receipt *r, char *err);

/* ------------------------------------------ the §13.1 vector (run_vector.c) */
/* The fields of a whole-model vector, in file order (§13.1). */
typedef enum {
    CIS2_RV_WEIGHTS = 0, /* weights_sha256 */
    CIS2_RV_CONFIG,      /* config_sha256 */
    CIS2_RV_TOKENIZER,   /* tokenizer_sha256 */
    CIS2_RV_PROMPT,      /* prompt (optional: the ids are fed as given) */
    CIS2_RV_PROMPT_IDS,  /* prompt_token_ids */
    CIS2_RV_GEN_TOKS,    /* gen_toks */
    CIS2_RV_GEN_IDS,     /* generated_token_ids */
    CIS2_RV_TABLE,       /* table_digest */
    CIS2_RV_INV_FREQ,    /* inv_freq_table_digest */
    CIS2_RV_ARGMAX,      /* argmax_digest */
    CIS2_RV_REF,         /* cis2_ref */
    CIS2_RV_N
} cis2_rv_key;
#define CIS2_RUN_VECTOR_MAX ((size_t)16 << 20)
typedef struct {
    char *text; /* owns the values */
    const char *v[CIS2_RV_N];
    int gen_toks;
} cis2_run_vector;
extern const char cis2_spec_13_1[]; /* §13.1 itself, in this form */
/* Strict key=value parse (CRLF or LF line ends, # comments; values kept
 * byte for byte): every key known and once, all but prompt present, hashes
 * 64 lowercase hex digits, ids and gen_toks well-formed. */
int cis2_run_vector_parse(cis2_run_vector *rv, const char *text, size_t len, const char *path,
                          char *err);
void cis2_run_vector_free(cis2_run_vector *rv);
#endif
