/* Log-probabilities (docs/sampling.md §9) on hand-made logits: the pinned
 * recipe's bits, agreement with a binary64 log-softmax, the order of the top
 * entries (ties by id), NaN and infinite logits, and the refusals. */
#include "core/fparith.h"
#include "unit.h"
#include <math.h>

/* §9 written out step by step, on the pinned operations. */
static float recipe(const float *l, int n, int id)
{
    float m = l[0];
    for (int i = 1; i < n; i++)
        if (l[i] > m) m = l[i];
    float z = 0.0f;
    for (int i = 0; i < n; i++) z = cis2_fadd(z, cis2_exp_pinned(cis2_fsub(l[i], m)));
    return cis2_fsub(cis2_fsub(l[id], m), cis2_ln_pinned(z));
}

static void test_values(void)
{
    float l[8] = { 0.5f, 2.0f, -1.0f, 2.0f, 1.5f, 0.0f, -3.0f, 1.9f };
    cis2_logprob top[8];
    float c = 0.0f;
    int got = cis2_logprobs(l, 8, 4, &c, 8, top);
    int bits = got == 8, close = got == 8;
    double m = 2.0, z = 0.0;
    for (int i = 0; i < 8; i++) z += exp((double)l[i] - m);
    for (int i = 0; i < got; i++) {
        bits &= cis2_f2u(top[i].logprob) == cis2_f2u(recipe(l, 8, top[i].id));
        close &= fabs((double)top[i].logprob - ((double)l[top[i].id] - m - log(z))) < 1e-6;
    }
    CHECK("logprob.pinned-recipe-bits", bits, "got %d", got);
    CHECK("logprob.matches-binary64", close, "got %d", got);
    CHECK("logprob.chosen", cis2_f2u(c) == cis2_f2u(recipe(l, 8, 4)), "%a", (double)c);
    /* largest first; ids 1 and 3 tie: 1 first */
    static const int order[8] = { 1, 3, 7, 4, 0, 5, 2, 6 };
    int ok = got == 8;
    for (int i = 0; i < got; i++) ok &= top[i].id == order[i];
    CHECK("logprob.top-order-ties-by-id", ok, "%d %d %d", top[0].id, top[1].id, top[2].id);
    cis2_logprob t2[2];
    ok = cis2_logprobs(l, 8, -1, NULL, 2, t2) == 2 && t2[0].id == 1 && t2[1].id == 3 &&
         cis2_f2u(t2[0].logprob) == cis2_f2u(t2[1].logprob);
    CHECK("logprob.top-2", ok, "%d %d", t2[0].id, t2[1].id);
    /* two equal logits: each -ln 2, by the pinned ln */
    float two[2] = { 3.0f, 3.0f };
    ok = cis2_logprobs(two, 2, 0, &c, 0, NULL) == 0 &&
         cis2_f2u(c) == cis2_f2u(cis2_fsub(0.0f, cis2_ln_pinned(2.0f)));
    CHECK("logprob.two-equal-minus-ln2", ok, "%a", (double)c);
}

static void test_special(void)
{
    float nan = cis2_u2f(0x7FC00000u), inf = cis2_u2f(0x7F800000u);
    float l[4] = { 1.0f, nan, 0.5f, -inf };
    cis2_logprob top[4];
    float c = 0.0f;
    int got = cis2_logprobs(l, 4, 1, &c, 4, top);
    CHECK("logprob.nan-is-minus-inf-never-top",
          got == 3 && cis2_f2u(c) == 0xFF800000u && top[0].id == 0 && top[1].id == 2 &&
              top[2].id == 3 && cis2_f2u(top[2].logprob) == 0xFF800000u,
          "got %d, c %a", got, (double)c);
    float li[4] = { inf, 0.0f, inf, 1.0f };
    got = cis2_logprobs(li, 4, 3, &c, 2, top);
    CHECK("logprob.inf-max-shares",
          got == 2 && top[0].id == 0 && top[1].id == 2 &&
              cis2_f2u(top[0].logprob) == cis2_f2u(cis2_fsub(0.0f, cis2_ln_pinned(2.0f))) &&
              cis2_f2u(c) == 0xFF800000u,
          "got %d %a %a", got, (double)top[0].logprob, (double)c);
    CHECK(
        "logprob.refused",
        cis2_logprobs(l, 0, 0, &c, 0, NULL) == -1 && cis2_logprobs(NULL, 4, 0, &c, 0, NULL) == -1 &&
            cis2_logprobs(l, 4, 0, &c, -1, top) == -1 && cis2_logprobs(l, 4, 0, &c, 1, NULL) == -1,
        "accepted");
}

int main(void)
{
    test_values();
    test_special();
    UNIT_END();
}
