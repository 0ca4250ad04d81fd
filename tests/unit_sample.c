/* The sampler (docs/sampling.md) on hand-made logits: the generator's check
 * values, T = 0 and top-k = 1 as the §11.2 argmax, ties by id, NaN and
 * infinite logits, each cut; and the sampled receipt form, which the strict
 * v1 parser refuses at line 1. */
#include "engine/sample.h"
#include "unit.h"

static void test_generator(void)
{
    CHECK("sample.splitmix",
          smp_splitmix64(0, 0) == 0xE220A8397B1DCDAFull &&
              smp_splitmix64(42, 0) == 0xBDD732262FEB6E95ull,
          "%016llx %016llx", (unsigned long long)smp_splitmix64(0, 0),
          (unsigned long long)smp_splitmix64(42, 0));
    CHECK("sample.uniform-top-24-bits", smp_uniform(0, 0) == 0x1.c4415p-1f, "%a",
          (double)smp_uniform(0, 0));
    int in = 1;
    for (uint64_t t = 0; t < 100000; t++) {
        float u = smp_uniform(t * 31, t);
        in &= u >= 0.0f && u < 1.0f;
    }
    CHECK("sample.uniform-in-0-1", in, "a draw outside [0, 1)");
}

static void test_pick(void)
{
    float l[8] = { 0.5f, 2.0f, -1.0f, 2.0f, 1.5f, 0.0f, -3.0f, 1.9f };
    cis2_sampler g = { 0, 0, 1.0f, 0, 7 };
    CHECK("sample.t0-is-argmax", cis2_sample(&g, 3, l, 8) == cis2_argmax(l, 8), "%d",
          cis2_sample(&g, 3, l, 8));
    int ok = 1;
    for (uint64_t seed = 0; seed < 200; seed++) {
        cis2_sampler s = { 3.0f, 1, 1.0f, 0, seed };
        ok &= cis2_sample(&s, seed, l, 8) == 1; /* ids 1 and 3 tie: the lower id */
    }
    CHECK("sample.topk1-is-argmax-tie-lower-id", ok, "a pick other than id 1");
    /* every id of positive weight is reachable, zero-weight ones never */
    int seen[8] = { 0 };
    for (uint64_t seed = 0; seed < 4000; seed++) {
        cis2_sampler s = { 1.0f, 0, 1.0f, 0, seed };
        int32_t id = cis2_sample(&s, 0, l, 8);
        if (id >= 0 && id < 8) seen[id]++;
    }
    ok = 1;
    for (int i = 0; i < 8; i++) ok &= seen[i] > 0;
    CHECK("sample.all-reachable", ok, "an id never drawn in 4000 seeds");
    /* top-k 2 keeps ids 1 and 3 only; top-p tiny keeps id 1 only; min-p 0.9
     * keeps the ids within 10 % of the top: 1, 3 (e^(1.9-2) = 0.905 too: 7) */
    int only13 = 1, only1 = 1, minp = 1;
    for (uint64_t seed = 0; seed < 500; seed++) {
        cis2_sampler k2 = { 1.0f, 2, 1.0f, 0, seed }, p0 = { 1.0f, 0, 0x1p-10f, 0, seed },
                     m9 = { 1.0f, 0, 1.0f, 0.9f, seed };
        int32_t a = cis2_sample(&k2, 1, l, 8), b = cis2_sample(&p0, 1, l, 8),
                c = cis2_sample(&m9, 1, l, 8);
        only13 &= a == 1 || a == 3;
        only1 &= b == 1;
        minp &= c == 1 || c == 3 || c == 7;
    }
    CHECK("sample.top-k", only13, "an id outside {1, 3}");
    CHECK("sample.top-p", only1, "an id other than 1");
    CHECK("sample.min-p", minp, "an id outside {1, 3, 7}");
    /* NaN is never a candidate; +inf logits share the draw, others get 0 */
    float n[4] = { __builtin_nanf(""), 1.0f, __builtin_inff(), __builtin_inff() };
    ok = 1;
    int got2 = 0, got3 = 0;
    for (uint64_t seed = 0; seed < 200; seed++) {
        cis2_sampler s = { 0.5f, 0, 1.0f, 0, seed };
        int32_t id = cis2_sample(&s, 0, n, 4);
        ok &= id == 2 || id == 3;
        got2 |= id == 2;
        got3 |= id == 3;
    }
    CHECK("sample.nan-and-inf", ok && got2 && got3, "ok %d %d %d", ok, got2, got3);
    /* a vocabulary's worth of logits with many ties (multiples of 0.25, -0
     * among them): the sort keeps the lower id first, so top-k 1 is argmax,
     * and top-k 3 picks only among the three first ids of the top logit */
    enum { V = 49152 };
    float *big = malloc(V * sizeof(float));
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < V; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        big[i] = (float)(int)(x % 41) * 0.25f - 5.0f;
        if (big[i] == 0.0f && (i & 1)) big[i] = -0.0f;
    }
    int32_t am = cis2_argmax(big, V), firsts[3], nf = 0;
    for (int i = 0; i < V && nf < 3; i++)
        if (big[i] == big[am]) firsts[nf++] = i;
    int k1 = 1, k3 = 1;
    for (uint64_t seed = 0; seed < 50; seed++) {
        cis2_sampler a = { 2.0f, 1, 1.0f, 0, seed }, b = { 2.0f, 3, 1.0f, 0, seed };
        int32_t ib = cis2_sample(&b, seed, big, V);
        k1 &= cis2_sample(&a, seed, big, V) == am;
        k3 &= nf == 3 && (ib == firsts[0] || ib == firsts[1] || ib == firsts[2]);
    }
    free(big);
    CHECK("sample.vocab-ties-lower-id-first", k1 && k3, "top-k 1 %d, top-k 3 %d", k1, k3);
    cis2_sampler bad = { -1.0f, 0, 1.0f, 0, 0 };
    CHECK("sample.invalid-refused", cis2_sample(&bad, 0, l, 8) == -1, "picked");
}

static void test_receipt(void)
{
    int32_t p[2] = { 5, 17 }, gi[3] = { 1, 2, 3 };
    cis2_receipt r;
    memset(&r, 0, sizeof r);
    strcpy(r.spec_version, CIS2_SPEC_VERSION);
    strcpy(r.dtype, "fp32");
    r.prompt_bytes = (uint8_t *)"ab";
    r.prompt_len = 2;
    r.prompt_ids = p;
    r.n_prompt = 2;
    r.gen_toks = r.n_gen = 3;
    r.gen_ids = gi;
    cis2_sampler s = { 0.8f, 40, 0.95f, 0.05f, 18446744073709551615ull }, z = { 0 }, back;
    char *t1, *t2, *t3, err[CIS2_ERR_LEN];
    size_t l1, l2, l3;
    int f = cis2_receipt_format(&r, &t1, &l1) | cis2_receipt_format_sampled(&r, &z, &t2, &l2) |
            cis2_receipt_format_sampled(&r, &s, &t3, &l3);
    CHECK("sample.receipt-greedy-is-v1", !f && l1 == l2 && !memcmp(t1, t2, l1), "differs");
    CHECK("sample.receipt-sampled-lines",
          !f && !strncmp(t3, "CIS-2-RECEIPT v1+sampling\n", 26) &&
              strstr(t3, "\nsampler temperature=0.8 top-k=40 top-p=0.95 min-p=0.05\n"
                         "seed 18446744073709551615\n"),
          "%s", t3);
    cis2_receipt q;
    int rc = cis2_receipt_parse(t3, l3, "r", &q, err);
    CHECK("sample.receipt-strict-v1-refuses", rc && strstr(err, "r: line 1: first line must be"),
          "rc %d: %s", rc, err);
    rc = cis2_receipt_parse_sampled(t3, l3, "r", &q, &back, err);
    CHECK("sample.receipt-round-trip",
          !rc && !memcmp(&back.temperature, &s.temperature, 4) && back.top_k == 40 &&
              back.top_p == s.top_p && back.min_p == s.min_p && back.seed == s.seed,
          "rc %d: %s", rc, err);
    if (!rc) cis2_receipt_free(&q);
    rc = cis2_receipt_parse_sampled(t1, l1, "r", &q, &back, err);
    CHECK("sample.receipt-v1-reads-greedy", !rc && back.temperature == 0.0f, "rc %d: %s", rc, err);
    if (!rc) cis2_receipt_free(&q);
    /* a sampled receipt with its sampler line cut off, or T = 0 in it */
    char *cut = strdup(t3), *sl = strstr(cut, "sampler ");
    *sl = 0;
    rc = cis2_receipt_parse_sampled(cut, strlen(cut), "r", &q, &back, err);
    CHECK("sample.receipt-missing-sampler", rc && strstr(err, "missing line \"sampler\""), "%s",
          err);
    free(cut);
    free(t1);
    free(t2);
    free(t3);
}

int main(void)
{
    test_generator();
    test_pick();
    test_receipt();
    UNIT_END();
}
