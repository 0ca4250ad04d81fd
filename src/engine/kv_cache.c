/* Each sequence's KV cache (§3.5): post-RoPE K and V of every layer and
 * position it has computed, grown on demand, and the key-blocked copy a
 * backend that wants_kb reads (backend.h). The engine (engine.c) sizes it
 * before a forward pass; the pass (forward.c) writes and reads its slots. */
#include "engine/engine.h"
#include <stdlib.h>
#include <string.h>

/* A sequence's KV cache grows on demand (doubling) up to
 * max_position_embeddings, every layer's K and V in one huge-page arena (4
 * KiB page faults on a VM cost ~10 us each). A run's prefill allocates ahead
 * (cis2_engine_step) and a slot keeps its arena from run to run
 * (seq_release, engine.c). */
int eng_ensure_positions(cis2_engine *e, seq_t *s, int need, char *err)
{
    const cis2_config *c = &e->m->cfg;
    if (need > c->max_pos) {
        snprintf(err, CIS2_ERR_LEN, "position %d is beyond max_position_embeddings = %d", need - 1,
                 c->max_pos);
        return 1;
    }
    if (need <= s->kv_cap) return 0;
    int want_kb = e->be->wants_kb;
    if (!s->kc) {
        s->kc = calloc((size_t)c->n_layers, sizeof *s->kc);
        s->vc = calloc((size_t)c->n_layers, sizeof *s->vc);
        s->kb = want_kb ? calloc((size_t)c->n_layers, sizeof *s->kb) : NULL;
        if (!s->kc || !s->vc || (want_kb && !s->kb)) {
            eng_kv_free(s); /* all three or none: the next call starts over */
            snprintf(err, CIS2_ERR_LEN, "out of memory");
            return 1;
        }
    }
    int cap = s->kv_cap ? s->kv_cap : 16; /* small: short runs grow (and test growth) */
    while (cap < need) cap *= 2;
    if (cap > c->max_pos) cap = c->max_pos;
    int kb_cap = (cap + CIS2_KB - 1) / CIS2_KB * CIS2_KB;
    /* first the scratch for every position this cache holds: the
     * sequence's KV cache never outgrows the backend's reservation */
    if (eng_reserve(e, 0, cap, err)) return 1;
    size_t hd = (size_t)c->head_dim, kvd = (size_t)c->n_kv_heads * hd, per = (size_t)cap * kvd;
    size_t kb_per = want_kb ? (size_t)kb_cap * kvd : 0, alen = 0;
    float *a = eng_buf_alloc((size_t)c->n_layers * (2 * per + kb_per) * sizeof(float), &alen);
    if (!a) {
        snprintf(err, CIS2_ERR_LEN, "out of memory for a KV cache of %d positions", cap);
        return 1;
    }
    size_t keep = (size_t)s->kv_cap * kvd * sizeof(float);
    for (int l = 0; l < c->n_layers; l++) {
        float *k = a + (size_t)l * (2 * per + kb_per), *v = k + per;
        if (keep) {
            memcpy(k, s->kc[l], keep);
            memcpy(v, s->vc[l], keep);
        }
        s->kc[l] = k;
        s->vc[l] = v;
        if (!want_kb) continue;
        /* each KV head's blocks are one run of its kb_cap positions */
        float *kb = v + per;
        for (int h = 0; keep && h < c->n_kv_heads; h++)
            memcpy(kb + (size_t)h * kb_cap * hd, s->kb[l] + (size_t)h * s->kb_cap * hd,
                   (size_t)s->kb_cap * hd * sizeof(float));
        s->kb[l] = kb;
    }
    eng_buf_free(s->kv, s->kv_len);
    s->kv = a;
    s->kv_len = alen;
    s->kv_cap = cap;
    s->kb_cap = kb_cap;
    return 0;
}

/* The KV arena back to the system. */
void eng_kv_free(seq_t *s)
{
    eng_buf_free(s->kv, s->kv_len);
    free(s->kc);
    free(s->vc);
    free(s->kb);
    s->kv = NULL;
    s->kc = s->vc = s->kb = NULL;
    s->kv_len = 0;
    s->kv_cap = s->kb_cap = 0;
}
