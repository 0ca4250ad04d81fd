/* cis2_receipt_verify: a receipt checked field by field against a model and a
 * re-run of its prompt (§14.3) — artifact hashes first, so a mismatch says
 * whether the inputs or the computation differ. Shared by `cis2 verify`, the
 * browser verifier and the Python package. */
#include "engine/sample.h"
#include "verify/verify.h"
#include <stdlib.h>
#include <string.h>

static char *dup_str(const char *s)
{
    char *d = strdup(s);
    return d;
}

static int add(cis2_verdict *v, const char *name, cis2_field_status st, char *receipt,
               char *recomputed)
{
    if (v->n_fields >= CIS2_VERDICT_MAX_FIELDS || !receipt || !recomputed) {
        free(receipt);
        free(recomputed);
        return 1;
    }
    cis2_verdict_field *f = &v->fields[v->n_fields++];
    f->name = name;
    f->status = st;
    f->receipt = receipt;
    f->recomputed = recomputed;
    if (st == CIS2_FIELD_MISMATCH) v->mismatches++;
    return 0;
}

static int add_hash(cis2_verdict *v, const char *name, const uint8_t receipt[32],
                    const uint8_t recomputed[32])
{
    char a[65], b[65];
    cis2_hex(receipt, 32, a);
    cis2_hex(recomputed, 32, b);
    return add(v, name, memcmp(receipt, recomputed, 32) ? CIS2_FIELD_MISMATCH : CIS2_FIELD_MATCH,
               dup_str(a), dup_str(b));
}

/* A byte string as a verdict value: its hex (the first 32 bytes) and length. */
static char *describe(const uint8_t *b, size_t n)
{
    cis2_sb s = { 0 };
    if (!n) cis2_sb_str(&s, "(empty)");
    cis2_sb_hex(&s, b, n < 32 ? n : 32);
    if (n > 32) cis2_sb_str(&s, "...");
    if (n) cis2_sb_printf(&s, " (%zu bytes)", n);
    return cis2_sb_take(&s, NULL);
}

static int ids_in_vocab(const int32_t *ids, int n, int vocab)
{
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab) return 0;
    return 1;
}

/* 0 when model m can re-run receipt r's decode of n_gen tokens: positions
 * 0 .. n_prompt + n_gen - 2 within max_position_embeddings (§3.4: the last
 * pick is never fed); else 1 with err naming the receipt, not a flag. */
static int receipt_fits(const cis2_model *m, const cis2_receipt *r, int n_gen, char *err)
{
    const cis2_config *c = cis2_model_config(m);
    if ((int64_t)r->n_prompt + n_gen - 1 <= c->max_pos) return 0;
    snprintf(err, CIS2_ERR_LEN,
             "the receipt cannot be re-run with this model: prompt (%d tokens) + gen-toks %d "
             "exceeds max_position_embeddings = %d",
             r->n_prompt, n_gen, c->max_pos);
    return 1;
}

int cis2_receipt_verify_begin(const cis2_model *m, const cis2_receipt *r, cis2_verdict *v,
                              cis2_gen_opts *g, int *run, char *err)
{
    memset(v, 0, sizeof *v);
    memset(g, 0, sizeof *g);
    *run = 0;
    v->run.nan_step = v->run.nan_index = -1;
    if (cis2_receipt_check(r, err)) return 1;
    const cis2_digests *d = cis2_model_digests(m);
    const cis2_config *c = cis2_model_config(m);
    int oom = 0;
    oom |= add_hash(v, "weights-sha256", r->weights_sha, d->weights_sha256);
    oom |= add_hash(v, "config-sha256", r->config_sha, d->config_sha256);
    oom |= add_hash(v, "tokenizer-sha256", r->tokenizer_sha, d->tokenizer_sha256);
    oom |= add_hash(v, "table-digest", r->table_digest, d->table_digest);
    oom |= add_hash(v, "inv-freq-table-digest", r->inv_freq_digest, d->inv_freq_digest);
    /* fp32 and int8-row runs are different computations (docs/quantization.md §2):
     * a receipt is only ever checked by an engine doing the one it names. */
    const char *mdt = cis2_model_dtype(m);
    oom |= add(v, "dtype", strcmp(r->dtype, mdt) ? CIS2_FIELD_MISMATCH : CIS2_FIELD_MATCH,
               dup_str(r->dtype), dup_str(mdt));
    /* prompt-hex is the bytes the prompt ids decode to (byte-level BPE
     * decoding is total: valid UTF-8 or not), so it is never empty. */
    char terr[CIS2_ERR_LEN];
    const cis2_tokenizer *t = cis2_model_tokenizer(m, terr);
    char *dec = NULL;
    size_t dl = 0;
    int prc = t ? cis2_receipt_prompt_bytes(t, r->prompt_ids, r->n_prompt, &dec, &dl, terr) : 0;
    if (prc < 0) oom = 1; /* memory ran out: no verdict, never a mismatch */
    else if (!t) {
        char why[CIS2_ERR_LEN + 64];
        snprintf(why, sizeof why, "tokenizer.json cannot decode ids here: %s", terr);
        oom |= add(v, "prompt-hex", CIS2_FIELD_SKIPPED, dup_str(""), dup_str(why));
    } else if (prc) {
        oom |= add(v, "prompt-hex", CIS2_FIELD_MISMATCH, describe(r->prompt_bytes, r->prompt_len),
                   dup_str(terr));
    } else {
        int ok = r->prompt_len > 0 && dl == r->prompt_len && !memcmp(dec, r->prompt_bytes, dl);
        oom |= add(v, "prompt-hex", ok ? CIS2_FIELD_MATCH : CIS2_FIELD_MISMATCH,
                   describe(r->prompt_bytes, r->prompt_len), describe((const uint8_t *)dec, dl));
    }
    free(dec);
    if (!ids_in_vocab(r->prompt_ids, r->n_prompt, c->vocab) ||
        !ids_in_vocab(r->gen_ids, r->n_gen, c->vocab)) {
        /* Not this model's ids: a mismatch, not an input error. */
        char want[64];
        snprintf(want, sizeof want, "ids below vocab_size %d", c->vocab);
        oom |= add(v, "token-ids-in-vocabulary", CIS2_FIELD_MISMATCH,
                   dup_str("ids outside the vocabulary"), dup_str(want));
    } else {
        /* §3.4: the receipt's ids come from exactly gen-toks greedy steps;
         * a run that stopped at EOS is the same steps cut short. */
        g->n_gen = r->gen_toks;
        *run = 1;
    }
    if (oom) {
        cis2_verdict_free(v);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    /* A receipt that needs more positions than the model has was not made
     * with it (or was doctored): with another field already a mismatch that
     * is the verdict; otherwise the receipt is named (2). */
    if (*run && receipt_fits(m, r, g->n_gen, err)) {
        *run = 0;
        if (!v->mismatches) {
            cis2_verdict_free(v);
            return 2;
        }
    }
    return 0;
}

int cis2_receipt_verify_finish(const cis2_receipt *r, cis2_result *run, cis2_verdict *v, char *err)
{
    v->run = *run;
    memset(run, 0, sizeof *run);
    char *gg = cis2_format_ids(v->run.gen, v->run.n_gen),
         *gw = cis2_format_ids(r->gen_ids, r->n_gen);
    int same = gg && gw && strcmp(gg, gw) == 0, oom = 0;
    oom |= add(v, "generated-token-ids", same ? CIS2_FIELD_MATCH : CIS2_FIELD_MISMATCH, gw, gg);
    oom |= add_hash(v, "argmax-digest", r->argmax_digest, v->run.argmax);
    oom |= add_hash(v, "witness-digest", r->witness_digest, v->run.witness);
    if (oom) {
        cis2_verdict_free(v);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    return 0;
}

/* docs/sampling.md §6: the sampler and the seed cannot be recomputed, only
 * re-run: each is MISMATCH when the run under the receipt's values gives
 * other ids or another witness (which covers them, §5), and names itself. */
int cis2_receipt_verify_finish_sampled(const cis2_receipt *r, const cis2_sampler *smp,
                                       cis2_result *run, cis2_verdict *v, char *err)
{
    if (cis2_receipt_verify_finish(r, run, v, err)) return 1;
    if (!smp || smp->temperature == 0.0f) return 0;
    int step = -1;
    for (int i = 0; i < r->n_gen && i < v->run.n_gen && step < 0; i++)
        if (r->gen_ids[i] != v->run.gen[i]) step = i;
    if (step < 0 && r->n_gen != v->run.n_gen)
        step = r->n_gen < v->run.n_gen ? r->n_gen : v->run.n_gen;
    int bad = step >= 0 || memcmp(r->witness_digest, v->run.witness, 32) != 0;
    char sl[160], sd[32], why[128];
    smp_format(smp, sl, sizeof sl);
    snprintf(sd, sizeof sd, "%llu", (unsigned long long)smp->seed);
    if (step >= 0) snprintf(why, sizeof why, "a run under it picks other ids from step %d", step);
    else snprintf(why, sizeof why, "%s", bad ? "a run under it has another witness" : "re-run");
    int oom = 0;
    oom |=
        add(v, "sampler", bad ? CIS2_FIELD_MISMATCH : CIS2_FIELD_MATCH, dup_str(sl), dup_str(why));
    oom |= add(v, "seed", bad ? CIS2_FIELD_MISMATCH : CIS2_FIELD_MATCH, dup_str(sd), dup_str(why));
    if (oom) {
        cis2_verdict_free(v);
        snprintf(err, CIS2_ERR_LEN, "out of memory");
        return 1;
    }
    return 0;
}

int cis2_receipt_verify(cis2_engine *e, const cis2_receipt *r, cis2_step_fn on_step, void *ctx,
                        cis2_verdict *v, char *err)
{
    return cis2_receipt_verify_sampled(e, r, NULL, on_step, ctx, v, err);
}

int cis2_receipt_verify_sampled(cis2_engine *e, const cis2_receipt *r, const cis2_sampler *smp,
                                cis2_step_fn on_step, void *ctx, cis2_verdict *v, char *err)
{
    cis2_gen_opts g;
    int run;
    if (smp && cis2_sampler_check(smp, err)) return 1;
    if (cis2_receipt_verify_begin(cis2_engine_model(e), r, v, &g, &run, err)) return 1;
    if (!run) return 0;
    g.on_step = on_step;
    g.ctx = ctx;
    cis2_result res;
    if (cis2_generate_sampled(e, r->prompt_ids, r->n_prompt, &g, smp, &res, err)) {
        cis2_verdict_free(v);
        return 1;
    }
    return cis2_receipt_verify_finish_sampled(r, smp, &res, v, err);
}

void cis2_verdict_free(cis2_verdict *v)
{
    for (int i = 0; i < v->n_fields; i++) {
        free(v->fields[i].receipt);
        free(v->fields[i].recomputed);
    }
    cis2_result_free(&v->run);
    memset(v, 0, sizeof *v);
}
