/* Log-probabilities, docs/sampling.md §9: the pinned log-softmax of one
 * step's raw logits (the vector the §12.1 witness hashes, before any
 * temperature), and the k most likely ids. Scalar binary32 code on the
 * pinned operations (core/fparith.h) and the pinned exp and ln (spec §6.2,
 * §6.5), so the values are the same bits on every backend, ISA and thread
 * count, like the sampler's pick. */
#include "core/fparith.h"
#include <stdlib.h>

static int is_nan(float v) { return (cis2_f2u(v) & 0x7FFFFFFFu) > 0x7F800000u; }

/* §1.3 DAZ by bit pattern: a subnormal logit reads as a zero of its sign. */
static float daz(float v)
{
    uint32_t b = cis2_f2u(v);
    return (b & 0x7F800000u) == 0 ? cis2_u2f(b & 0x80000000u) : v;
}

#define NEG_INF cis2_u2f(0xFF800000u)

/* §9 steps 2-4 for one id, given the maximum m and ln Z (finite m), or the
 * count of ids at an infinite m. */
static float lp_of(float l, float m, int inf_m, float ln_z)
{
    if (is_nan(l)) return NEG_INF;
    l = daz(l);
    if (inf_m) return l == m ? ln_z : NEG_INF; /* ln_z holds -ln(count) here */
    return cis2_fsub(cis2_fsub(l, m), ln_z);
}

static int logprobs(const float *logits, int n, int32_t chosen, float *chosen_lp, int k,
                    cis2_logprob *top)
{
    /* §9.1: the largest non-NaN logit (DAZ) */
    int have = 0;
    float m = 0.0f;
    for (int i = 0; i < n; i++)
        if (!is_nan(logits[i]) && (!have || daz(logits[i]) > m)) {
            m = daz(logits[i]);
            have = 1;
        }
    const int inf_m = have && (cis2_f2u(m) & 0x7FFFFFFFu) == 0x7F800000u;
    float ln_z = 0.0f;
    if (inf_m) { /* §9.3: the ids at the infinite maximum share its mass */
        int cnt = 0;
        for (int i = 0; i < n; i++) cnt += !is_nan(logits[i]) && daz(logits[i]) == m;
        ln_z = -cis2_ln_pinned((float)cnt);
    } else if (have) { /* §9.2: Z = exp(l_0 - m) + exp(l_1 - m) + ..., by id, left to right */
        float z = 0.0f;
        for (int i = 0; i < n; i++)
            if (!is_nan(logits[i])) z = cis2_fadd(z, cis2_exp_pinned(cis2_fsub(daz(logits[i]), m)));
        ln_z = cis2_ln_pinned(z);
    }
    if (chosen_lp)
        *chosen_lp =
            have && chosen >= 0 && chosen < n ? lp_of(logits[chosen], m, inf_m, ln_z) : NEG_INF;
    /* §9.4: the k largest logits, the lower id first among equal ones: ids
     * come in ascending order and one enters only past every entry whose
     * logit is at least its own. */
    int got = 0;
    for (int i = 0; i < n && k > 0; i++) {
        if (is_nan(logits[i])) continue;
        float l = daz(logits[i]);
        if (got == k && !(l > daz(logits[top[k - 1].id]))) continue;
        int at = got < k ? got : k - 1;
        while (at > 0 && l > daz(logits[top[at - 1].id])) {
            top[at] = top[at - 1];
            at--;
        }
        top[at].id = i;
        if (got < k) got++;
    }
    for (int i = 0; i < got; i++) top[i].logprob = lp_of(logits[top[i].id], m, inf_m, ln_z);
    return got;
}

int cis2_logprobs(const float *logits, int n, int32_t chosen, float *chosen_lp, int k,
                  cis2_logprob *top)
{
    char err[CIS2_ERR_LEN];
    uint64_t saved;
    if (!logits || n < 1 || k < 0 || (k > 0 && !top)) return -1;
    if (cis2_fpenv_enter(&saved, err)) return -1;
    int got = logprobs(logits, n, chosen, chosen_lp, k, top);
    cis2_fpenv_write(saved);
    return got;
}
