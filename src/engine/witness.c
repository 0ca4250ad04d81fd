/* The §12.1 witness stream (the artifact digests, the prompt, then each
 * step's logits row and pick, one SHA-256), its replay, the side job that
 * hashes a lone sequence's step beside the next one, and §11.2's argmax. */
#include "engine/engine.h"
#include "engine/sample.h"

int32_t cis2_argmax(const float *logits, int n)
{
    if (n < 1) return -1; /* no logits: no index (logits[0] is not there) */
    int32_t best = 0;
    float best_v = logits[0];
    for (int i = 1; i < n; i++)
        if (logits[i] > best_v) {
            best_v = logits[i];
            best = i;
        } /* strict >: first max wins (§11.2) */
    return best;
}

/* §12.1: one continuous SHA-256 stream: the five artifact digests, the
 * prompt ids, then per step its logits row and its pick. */
void witness_begin(cis2_sha256 *w, const cis2_digests *d, const int32_t *prompt, int n_prompt)
{
    cis2_sha256_init(w);
    cis2_sha256_update(w, d->weights_sha256, 32);
    cis2_sha256_update(w, d->tokenizer_sha256, 32);
    cis2_sha256_update(w, d->config_sha256, 32);
    cis2_sha256_update(w, d->table_digest, 32);
    cis2_sha256_update(w, d->inv_freq_digest, 32);
    for (int i = 0; i < n_prompt; i++) cis2_sha256_update_u32(w, (uint32_t)prompt[i]);
}

void cis2_witness_replay(const cis2_digests *d, const int32_t *prompt, int n_prompt,
                         const float *rows, const int32_t *ids, int n_steps, int vocab,
                         uint8_t out[32])
{
    cis2_witness_replay_sampled(d, NULL, prompt, n_prompt, rows, ids, n_steps, vocab, out);
}

/* docs/sampling.md §5: a sampled run's stream holds the 40-byte sampler
 * record between the prompt ids and the steps, as seq_submit feeds it; a
 * greedy one (no sampler, or temperature 0) has none. */
void cis2_witness_replay_sampled(const cis2_digests *d, const cis2_sampler *s,
                                 const int32_t *prompt, int n_prompt, const float *rows,
                                 const int32_t *ids, int n_steps, int vocab, uint8_t out[32])
{
    cis2_sha256 w;
    witness_begin(&w, d, prompt, n_prompt);
    if (s && s->temperature > 0.0f) {
        uint8_t rec[40];
        smp_record(s, rec);
        cis2_sha256_update(&w, rec, sizeof rec);
    }
    for (int i = 0; i < n_steps; i++) {
        cis2_sha256_update(&w, rows + (size_t)i * (size_t)vocab,
                           (size_t)vocab * sizeof(float)); /* LE bit patterns */
        cis2_sha256_update_u32(&w, (uint32_t)ids[i]);
    }
    cis2_sha256_final(&w, out);
}

/* The side job: a step's logits row, then its pick, into the §12.1 stream
 * (the order emit_logits and emit_id feed them). */
void witness_job_run(void *ctx)
{
    const struct witness_job *j = ctx;
    cis2_sha256_update(&j->s->w, j->row, j->len); /* LE bit patterns */
    cis2_sha256_update_u32(&j->s->w, (uint32_t)j->id);
}

/* Before anything reads a witness stream or writes the logits: the side
 * job, if one is out, has run (side_wait returns at once when none is). */
void witness_wait(cis2_engine *e)
{
    if (e->be->side_wait) e->be->side_wait(e->be);
}
