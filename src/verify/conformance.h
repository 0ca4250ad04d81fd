/* Op-level conformance (CONFORMANCE_SUITE.md, docs/conformance.md): the
 * key=value text that vectors, expected files and candidates' answers are
 * written in; the ops a candidate computes; and the checker that runs any
 * candidate over a folder of vectors. */
#ifndef CIS2_CONFORMANCE_H
#define CIS2_CONFORMANCE_H
#include "verify/verify.h"
#include <stdio.h>

#define CIS2_CONF_MAX_INPUT  ((size_t)64 << 20) /* bytes of one vector, expected file, stdin */
#define CIS2_CONF_MAX_VALUES ((size_t)1 << 24)  /* values in one list or one output */
#define CIS2_CONF_MAX_FIELDS 4096               /* key=value lines in one document */

/* ------------------------------------------------------ key=value text (kv.c) */
typedef struct {
    const char *key, *val; /* point into the parsed text */
    int line;
} cis2_kv_pair;
typedef struct {
    cis2_kv_pair *p;
    int n;
} cis2_kv_doc;
/* Blanks (space, tab) around keys and values are dropped. Without it a
 * value is kept byte for byte (a prompt may start with a space). */
#define CIS2_KV_TRIM 1
/* Parses `key=value` lines of `text` in place (it must be NUL-terminated at
 * text[len]). A line's CRLF or LF ending is its end, blank lines and lines
 * whose first non-blank character is '#' are skipped; keys are
 * [A-Za-z0-9_.-]+ and unique; a NUL byte is an error. `what` names the
 * source in messages. Free with cis2_kv_free. */
int cis2_kv_parse(char *text, size_t len, const char *what, int flags, cis2_kv_doc *d, char *err);
const char *cis2_kv_get(const cis2_kv_doc *d, const char *key);
void cis2_kv_free(cis2_kv_doc *d);
/* "0xHHHHHHHH,0x..." (1-8 hex digits of either case each, blanks around
 * items allowed, no empty item) -> bit patterns; `name` is for messages. */
int cis2_parse_bits_list(const char *s, const char *name, uint32_t **out, size_t *n, char *err);
/* A decimal integer (digits only, at most 10) in [lo, hi]. */
int cis2_parse_uint(const char *s, const char *name, uint64_t lo, uint64_t hi, uint64_t *out,
                    char *err);
/* Comma-separated decimal integers, each at most hi, blanks around items. */
int cis2_parse_uint_list(const char *s, const char *name, uint64_t hi, uint64_t **out, size_t *n,
                         char *err);

/* ------------------------------------------------------------------ ops (op.c) */
int cis2_op_count(void);
const char *cis2_op_name(int k);
int cis2_op_find(const char *name); /* -1 when unknown */
/* Computes op k from a parsed vector into a malloc'd array of *n values,
 * with the engine's own scalar kernels (§5-§9). One line in err when a
 * field is missing, malformed or of the wrong size. */
int cis2_op_eval(int k, const cis2_kv_doc *d, float **out, size_t *n, char *err);

/* ------------------------------------------------------------ checker (suite.c) */
#define CIS2_CHILD_STDERR ((size_t)4096) /* a child's stderr kept (for reasons) */
typedef struct {
    char *out; /* stdout, NUL-terminated (malloc'd; at most 64 MiB) */
    size_t out_len;
    char err[CIS2_CHILD_STDERR + 1]; /* its first bytes of stderr, NUL-terminated */
    size_t err_len;
    int status, timed_out, too_much; /* waitpid status */
} cis2_child_result;
/* Runs cargv (execvp) with `input` on stdin (then closed), collecting
 * stdout/stderr, within timeout_s seconds. The child and anything it spawns
 * form one process group, killed as a whole on timeout. 1 (err) when it
 * could not be run at all; a child that cannot exec exits 127. */
int cis2_run_child(char **cargv, const char *input, size_t in_len, double timeout_s,
                   cis2_child_result *r, char *err);
typedef struct {
    const char *const *dirs; /* vector folders */
    int ndirs;
    char *const *cand; /* CANDIDATE ARG...; OP is appended */
    int ncand;
    double timeout_s; /* per vector */
} cis2_suite_opts;
/* Runs every NAME.txt of every folder (in name order) through the
 * candidate, one "PASS NAME" / "FAIL NAME: reason" line each to `out`, and
 * the summary line. Returns 0 all passed, 1 some failed, 2 a checker error
 * (no vectors, an unreadable folder: err says it, nothing was run). */
int cis2_suite_run(FILE *out, const cis2_suite_opts *o, char *err);
/* The candidate's answer to one vector (its stdout): exactly one
 * out_sha256= line and at most one out_bits= line. Each line is read as a
 * vector line is (trimmed, CRLF allowed) and the digest is a value, so its
 * hex may be of either case (CONFORMANCE_SUITE.md: the bits are normative,
 * the digest a convenience). *sha gets the digest in lowercase. */
int cis2_suite_parse_answer(char *out, size_t len, char sha[65], const char **bits, char *why);
#endif
