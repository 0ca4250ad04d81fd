/* Engine properties through the library API on generated fixtures:
 * §3.5 KV-cache decode == full recompute (full logit vectors, bit for bit),
 * batched prefill == token-by-token prefill, §12.4 double run. */
#include "unit.h"

static int make_fixture(const char *dir, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 tools/make_model.py %s %s >/dev/null", dir, args);
    return system(cmd);
}

static void check_arch(const char *name, const char *args)
{
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], err[CIS2_ERR_LEN], tn[128];
    snprintf(dir, sizeof dir, "%s/unit-engine-%s", tmp, name);
    if (make_fixture(dir, args)) { snprintf(tn, sizeof tn, "engine.%s.fixture", name); CHECK(tn, 0, "make_model.py failed"); return; }
    cis2_model m;
    cis2_load_opts lo = { 1, 0 };
    if (cis2_model_load(&m, dir, &lo, err)) { snprintf(tn, sizeof tn, "engine.%s.load", name); CHECK(tn, 0, "%s", err); return; }
    int V = m.cfg.vocab, P = 7, N = 9;
    int32_t toks[16] = { 3, 141, 59, 26, 5, 35, 89 };
    float *la = malloc((size_t)V * 4), *lb = malloc((size_t)V * 4);
    cis2_engine *inc, *full;
    cis2_engine_new(&inc, &m, NULL, err);
    cis2_engine_new(&full, &m, NULL, err);
    /* incremental: prefill P, then one token at a time with the cache */
    int same = 1, prefill_same = 1;
    cis2_engine_forward(inc, toks, P, 0, la, err);
    /* token-by-token prefill on a fresh engine must give the same last logits */
    for (int t = 0; t < P; t++) cis2_engine_forward(full, &toks[t], 1, t, t == P - 1 ? lb : NULL, err);
    prefill_same = memcmp(la, lb, (size_t)V * 4) == 0;
    for (int s = P; s < P + N; s++) {
        toks[s] = cis2_argmax(la, V);
        cis2_engine_forward(inc, &toks[s], 1, s, la, err);
        /* recompute everything from position 0 with a cold pass */
        cis2_engine_forward(full, toks, s + 1, 0, lb, err);
        if (memcmp(la, lb, (size_t)V * 4) != 0) { same = 0; break; }
    }
    snprintf(tn, sizeof tn, "engine.%s.kv-cache-equals-full-recompute", name);
    CHECK(tn, same, "logits differ");
    snprintf(tn, sizeof tn, "engine.%s.batched-prefill-equals-sequential", name);
    CHECK(tn, prefill_same, "logits differ");
    cis2_result r1, r2;
    cis2_gen_opts g = { 5, 0, NULL, NULL };
    int rc1 = cis2_generate(inc, toks, 3, &g, &r1, err), rc2 = cis2_generate(inc, toks, 3, &g, &r2, err);
    snprintf(tn, sizeof tn, "engine.%s.double-run", name);
    CHECK(tn, !rc1 && !rc2 && !memcmp(r1.witness, r2.witness, 32) && !memcmp(r1.argmax, r2.argmax, 32), "%s", err);
    cis2_result_free(&r1);
    cis2_result_free(&r2);
    free(la);
    free(lb);
    cis2_engine_free(inc);
    cis2_engine_free(full);
    cis2_model_free(&m);
}

int main(void)
{
    if (cis2_fpenv_pin()) { CHECK("engine.pin", 0, "cannot pin"); UNIT_END(); }
    check_arch("llama", "--arch llama --heads 6 --kv-heads 2 --hidden 48 --layers 2");
    check_arch("qwen2", "--arch qwen2 --heads 4 --kv-heads 1 --hidden 32");
    check_arch("qwen3", "--arch qwen3 --heads 4 --kv-heads 2 --hidden 32 --head-dim 24 --untied");
    UNIT_END();
}
