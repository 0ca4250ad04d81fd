/* The verify layer's internal interface: receipts (public API in cis2.h)
 * and their shared helpers. */
#ifndef CIS2_VERIFY_H
#define CIS2_VERIFY_H
#include "engine/backend.h"

/* cis2_receipt_verify in two halves, for callers that run the decode
 * themselves (many receipts batched through cis2_seq_*: `cis2 verify-batch`).
 * _begin checks the artifact hashes, prompt-hex and the ids' range; when
 * *run is set the caller decodes r->prompt_ids with `g` and hands the result
 * to _finish, which takes it over (v->run) and compares ids and digests.
 * With *run 0 the verdict is complete (a mismatch). Candidates for cis2.h. */
int cis2_receipt_verify_begin(const cis2_model *m, const cis2_receipt *r, cis2_verdict *v,
                              cis2_gen_opts *g, int *run, char *err);
int cis2_receipt_verify_finish(const cis2_receipt *r, cis2_result *run, cis2_verdict *v, char *err);
#endif
