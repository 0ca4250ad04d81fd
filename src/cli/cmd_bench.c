/* cis2 bench: load time, batched-prefill and decode throughput,
 * peak RSS, the machine's streaming read bandwidth measured in the same run
 * and the decode floor it implies, plus decode speed at long positions and
 * the aggregate decode speed of B sequences decoded together.
 *
 *   cis2 bench --model DIR [--prompt-len P[,P2...]] [-n N] [--threads T]
 *              [--backend ref|fast|approx] [--isa X] [--positions 256,2048,8000]
 *              [--batch 1,4,8,16] [--peak]
 *
 * Several prompt lengths and/or positions end with one table of prefill and
 * decode tok/s; --peak (alone or with --model) prints the machine's
 * mul+add and read-bandwidth ceilings and the exact bf16 matmul kernel's
 * own rate against them (bench_peak.c).
 * The prompt is deterministic ids. No pass/fail: numbers only. */
#include "cli/commands.h"
#include "engine/fast.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static double peak_rss_mb(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return -1.0;
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

/* ---- streaming read bandwidth: every thread sums its slice of a buffer */
typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_arg;
static void *bw_worker(void *a)
{
    bw_arg *b = a;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= b->n; i += 4) {
        s0 += b->p[i];
        s1 += b->p[i + 1];
        s2 += b->p[i + 2];
        s3 += b->p[i + 3];
    }
    b->sum = s0 ^ s1 ^ s2 ^ s3;
    return NULL;
}

double cis2_bench_read_gbs(int threads)
{
    size_t bytes = (size_t)256 << 20, n = bytes / 8;
    uint64_t *buf = malloc(bytes);
    if (!buf) return 0.0;
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
    if (threads < 1) threads = 1;
    bw_arg *args = calloc((size_t)threads, sizeof *args);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    double best = 0.0;
    volatile uint64_t sink = 0;
    for (int pass = 0; pass < 4 && args && th; pass++) {
        size_t per = n / (size_t)threads & ~(size_t)3;
        double t0 = cis2_now_ms();
        for (int i = 0; i < threads; i++) {
            args[i].p = buf + (size_t)i * per;
            args[i].n = per;
            if (i == 0) continue;
            pthread_create(&th[i], NULL, bw_worker, &args[i]);
        }
        bw_worker(&args[0]);
        for (int i = 1; i < threads; i++) pthread_join(th[i], NULL);
        double ms = cis2_now_ms() - t0;
        for (int i = 0; i < threads; i++) sink ^= args[i].sum;
        double gbs = (double)per * 8.0 * threads / (ms * 1e6);
        if (gbs > best) best = gbs;
    }
    (void)sink;
    free(args);
    free(th);
    free(buf);
    return best;
}

/* Attention time per decode token at context `pos` (all layers): the same
 * backend kernel the engine calls, over a filled KV cache of that length per
 * layer (each layer its own memory, as in the engine). */
static double attn_ms_at(cis2_backend *b, const cis2_config *c, float **kc, float **vc, float **kb,
                         int kb_cap, const float *q, float *out, int pos, int reps)
{
    float scale = cis2_rsqrt((float)c->head_dim);
    double best = 1e300;
    for (int r = 0; r < reps; r++) {
        double t0 = cis2_now_ms();
        for (int l = 0; l < c->n_layers; l++)
            b->attention(b, q, kc[l], vc[l], kb ? kb[l] : NULL, kb_cap, 1, pos, c->n_heads,
                         c->n_kv_heads, c->head_dim, scale, out);
        double ms = cis2_now_ms() - t0;
        if (ms < best) best = ms;
    }
    return best;
}

/* B sequences of P prompt ids and n tokens each in one engine: the first
 * step prefills them all; the n-1 steps after it each decode one token of
 * every sequence, and only those are timed. Sequence 0 has the single run's
 * prompt, so its witness must be the single run's (`same_as_single`). */
static int batch_row(const cis2_model *m, cis2_engine_opts eo, int B, int plen, int n,
                     double single_tok_s, const uint8_t *single_witness, char *err)
{
    const cis2_config *c = &m->cfg;
    cis2_engine *e;
    eo.max_seqs = B;
    if (cis2_engine_new(&e, m, &eo, err)) return 1;
    int32_t *prompt = malloc((size_t)plen * sizeof(int32_t));
    int *seq = malloc((size_t)B * sizeof(int)), rc = !prompt || !seq;
    if (rc) snprintf(err, CIS2_ERR_LEN, "out of memory");
    cis2_gen_opts g = { n, 0, NULL, NULL, NULL, 0 };
    for (int b = 0; b < B && !rc; b++) {
        for (int i = 0; i < plen; i++)
            prompt[i] = (int32_t)(((int64_t)i * 7919 + 13 + (int64_t)b * 101) % c->vocab);
        rc = cis2_seq_submit(e, prompt, plen, &g, &seq[b], err);
    }
    double ms = 0.0;
    if (!rc) rc = cis2_engine_step(e, err); /* prefill: untimed */
    while (!rc && cis2_engine_active(e)) {
        double t0 = cis2_now_ms();
        rc = cis2_engine_step(e, err);
        ms += cis2_now_ms() - t0;
    }
    cis2_result r;
    if (!rc && !(rc = cis2_seq_take(e, seq[0], &r, err))) {
        double tok_s = (double)B * (n - 1) / (ms / 1000.0);
        printf("batch=%d decode_tok_s=%.2f ms_per_step=%.3f x_single=%.2f same_as_single=%s\n", B,
               tok_s, ms / (n - 1), tok_s / single_tok_s,
               memcmp(r.witness, single_witness, 32) ? "no" : "yes");
        fflush(stdout);
        cis2_result_free(&r);
    }
    free(prompt);
    free(seq);
    cis2_engine_free(e);
    return rc;
}

/* Prefill tok/s for one more prompt length (a run that stops after its
 * first generated token); < 0 when the run fails. */
static double prefill_tok_s(cis2_engine *e, const cis2_config *c, int plen)
{
    int32_t *prompt = malloc((size_t)plen * sizeof(int32_t));
    if (!prompt) return -1.0;
    for (int i = 0; i < plen; i++) prompt[i] = (int32_t)(((int64_t)i * 7919 + 13) % c->vocab);
    cis2_gen_opts g = { 1, 0, NULL, NULL, NULL, 0 };
    cis2_result r;
    char err[CIS2_ERR_LEN];
    int rc = cis2_generate(e, prompt, plen, &g, &r, err);
    free(prompt);
    if (rc) return -1.0;
    double v = plen / (r.prefill_ms / 1000.0);
    cis2_result_free(&r);
    return v;
}

/* The one table: a column per prompt length or position (ascending), a row
 * of prefill tok/s at that prompt length and one of decode tok/s at that
 * position ("-" where not measured). */
static void print_table(const char *backend, int threads, const int32_t *pl, const double *pf,
                        int npl, const int32_t *ps, const double *dc, int nps)
{
    int cols[64], nc = 0;
    for (int i = 0; i < npl + nps; i++) {
        int v = i < npl ? pl[i] : ps[i - npl], k = 0;
        while (k < nc && cols[k] < v) k++;
        if ((k < nc && cols[k] == v) || nc == 64) continue;
        memmove(cols + k + 1, cols + k, (size_t)(nc - k) * sizeof(int));
        cols[k] = v;
        nc++;
    }
    printf("table backend=%s threads=%d (tok/s)\n|  |", backend, threads);
    for (int k = 0; k < nc; k++) printf(" %d |", cols[k]);
    printf("\n|---|");
    for (int k = 0; k < nc; k++) printf("---|");
    for (int row = 0; row < 2; row++) {
        const int32_t *key = row ? ps : pl;
        const double *val = row ? dc : pf;
        int nk = row ? nps : npl;
        printf("\n| %s |", row ? "decode at position" : "prefill, prompt length");
        for (int k = 0; k < nc; k++) {
            int f = -1;
            for (int i = 0; i < nk; i++)
                if (key[i] == cols[k]) f = i;
            if (f >= 0 && val[f] > 0) printf(" %.1f |", val[f]);
            else printf(" - |");
        }
    }
    printf("\n");
}

int cis2_cmd_bench(int argc, char **argv)
{
    const char *cmd = "bench", *model = NULL, *backend = NULL, *isa = NULL, *positions = NULL,
               *batch = NULL, *plens = NULL;
    int n = 0, threads = 0, peak = 0;
    const cis2_opt opts[] = {
        { "--model", NULL, CIS2_OPT_PATH, &model, 0, 0 },
        { "--backend", NULL, CIS2_OPT_STR, &backend, 0, 0 },
        { "--isa", NULL, CIS2_OPT_STR, &isa, 0, 0 },
        { "--positions", NULL, CIS2_OPT_STR, &positions, 0, 0 },
        { "--batch", NULL, CIS2_OPT_STR, &batch, 0, 0 },
        { "--prompt-len", NULL, CIS2_OPT_STR, &plens, 0, 0 },
        { "--peak", NULL, CIS2_OPT_FLAG, &peak, 0, 0 },
        { "--n", "-n", CIS2_OPT_INT, &n, 2, 100000 },
        { "--threads", NULL, CIS2_OPT_INT, &threads, 1, 1024 },
    };
    if (cis2_cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL,
                       0))
        return 2;
    /* --peak alone measures the machine: a flag of the model run given with
     * it would be ignored, so it is refused (as any flag a command does not
     * use) instead of silently dropped */
    const char *model_only = !peak || model ? NULL
                             : plens        ? "--prompt-len"
                             : n            ? "-n"
                             : backend      ? "--backend"
                             : isa          ? "--isa"
                             : positions    ? "--positions"
                             : batch        ? "--batch"
                                            : NULL;
    if (model_only)
        return cis2_cli_usage_error(cmd,
                                    "%s applies to a model run: give --model DIR too, or drop it "
                                    "(--peak alone measures the machine)",
                                    model_only);
    if (!plens) plens = "256";
    if (!n) n = 32;
    if (!backend) backend = "fast";
    int32_t *pos = NULL, *bs = NULL, *pl = NULL;
    int npos = 0, nbs = 0, npl = 0, bad = 0, rc = 2, loaded = 0;
    if (!peak && !model) return cis2_cli_usage_error(cmd, "--model DIR is required");
    cis2_model m;
    cis2_engine *e = NULL;
    char perr[CIS2_ERR_LEN];
    if (cis2_parse_ids(plens, &pl, &npl, perr))
        bad = cis2_cli_usage_error(cmd,
                                   "--prompt-len wants a length or a list like 256,1024, "
                                   "got '%s'",
                                   plens);
    else if (npl > 32) bad = cis2_cli_usage_error(cmd, "--prompt-len: %d lengths, at most 32", npl);
    for (int i = 0; !bad && i < npl; i++)
        if (pl[i] < 1 || pl[i] > 8192)
            bad = cis2_cli_usage_error(cmd, "--prompt-len: %d is outside [1, 8192]", pl[i]);
    if (!bad && positions && cis2_parse_ids(positions, &pos, &npos, perr))
        bad = cis2_cli_usage_error(cmd, "--positions wants a list like 256,2048,8000, got '%s'",
                                   positions);
    else if (!bad && npos > 32)
        bad = cis2_cli_usage_error(cmd, "--positions: %d positions, at most 32", npos);
    if (!bad && batch && cis2_parse_ids(batch, &bs, &nbs, perr))
        bad = cis2_cli_usage_error(cmd, "--batch wants a list like 1,4,8,16, got '%s'", batch);
    for (int i = 0; !bad && i < nbs; i++)
        if (bs[i] < 1 || bs[i] > 4096)
            bad = cis2_cli_usage_error(cmd, "--batch: %d is outside [1, 4096]", bs[i]);
    /* a length, position or batch size twice is a typo for another one: its
     * row would only be measured twice */
    const struct {
        const char *flag;
        const int32_t *v;
        int n;
    } lists[] = { { "--prompt-len", pl, npl },
                  { "--positions", pos, npos },
                  { "--batch", bs, nbs } };
    for (int l = 0; !bad && l < 3; l++)
        for (int i = 0; !bad && i < lists[l].n; i++)
            for (int j = 0; !bad && j < i; j++)
                if (lists[l].v[i] == lists[l].v[j])
                    bad = cis2_cli_usage_error(cmd, "%s: %d is given twice", lists[l].flag,
                                               lists[l].v[i]);
    if (bad) goto out;
    int plen = pl[0];

    cis2_engine_opts eo;
    if (cis2_cli_engine_opts(cmd, backend, isa, threads, &eo)) goto out;
    /* every flag is checked before the ceilings are measured (seconds) */
    if (peak) {
        cis2_bench_peak(threads > 0 ? threads : cis2_cpu_count());
        if (!model) {
            rc = 0;
            goto out;
        }
    }
    double t0 = cis2_now_ms();
    /* cis2_cli_open, with the model in a struct of ours (its timings) */
    {
        char lerr[CIS2_ERR_LEN];
        cis2_load_opts lo = { 0 };
        if (cis2_cli_dir_input_ok(cmd, "--model", model) || cis2_cli_fp_ready(cmd)) goto out;
        if (cis2_model_load(&m, model, &lo, lerr)) {
            cis2_cli_usage_error(cmd, "%s", lerr);
            goto out;
        }
        loaded = 1;
        if (cis2_engine_new(&e, &m, &eo, lerr)) {
            e = NULL;
            cis2_cli_usage_error(cmd, "%s", lerr);
            goto out;
        }
    }
    double load_ms = cis2_now_ms() - t0;
    const cis2_config *c = &m.cfg;
    for (int i = 1; i < npl; i++)
        if (pl[i] > c->max_pos) {
            cis2_cli_usage_error(cmd, "--prompt-len %d exceeds max_position_embeddings = %d", pl[i],
                                 c->max_pos);
            goto out;
        }
    if (plen + n - 1 > c->max_pos) {
        cis2_cli_usage_error(cmd, "--prompt-len + -n exceeds max_position_embeddings = %d",
                             c->max_pos);
        goto out;
    }
    for (int i = 0; i < npos; i++)
        if (pos[i] < 1 || pos[i] >= c->max_pos) {
            cis2_cli_usage_error(cmd, "--positions: %d is outside [1, %d)", pos[i], c->max_pos);
            goto out;
        }

    int32_t *prompt = malloc((size_t)plen * sizeof(int32_t));
    for (int i = 0; i < plen; i++) prompt[i] = (int32_t)(((int64_t)i * 7919 + 13) % c->vocab);
    /* Warm-up, as llama-bench runs each test once before timing it: the
     * engine's first call touches its activation and KV pages for the first
     * time (that cold figure is printed on its own line), and then the same
     * run as the timed one, untimed: a KV cache grows by doubling, and the
     * timed run's plen + n - 1 positions may need a bigger one than the
     * first call's plen did (at P = 256 a fresh 512-position cache, paid
     * inside the timed prefill: it was 7-10 % slower than the next one). */
    double pf_first = prefill_tok_s(e, c, plen);
    cis2_gen_opts g = { n, 0, NULL, NULL, NULL, 0 };
    cis2_result r;
    char err[CIS2_ERR_LEN];
    for (int pass = 0; pass < 2; pass++) {
        if (pass) cis2_result_free(&r);
        if (cis2_generate(e, prompt, plen, &g, &r, err)) {
            free(prompt);
            cis2_cli_usage_error(cmd, "%s", err);
            goto out;
        }
    }
    free(prompt);
    double rss = peak_rss_mb();
    int nth = threads > 0 ? threads : cis2_cpu_count();
    if (!strcmp(backend, "ref")) nth = 1;
    double gbs = cis2_bench_read_gbs(nth);
    size_t wbytes = cis2_weights_step_bytes(&m.w);
    double ms_tok = r.decode_ms / (double)(n - 1);
    double floor_ms = gbs > 0 ? (double)wbytes / (gbs * 1e6) : 0.0;
    /* K and V, plus the key-blocked K the fast and approx backends keep
     * (engine/backend.h, wants_kb), whole blocks of CIS2_KB positions */
    double kv_pos = 2.0 * (plen + n);
    if (strcmp(backend, "ref")) kv_pos += (plen + n + CIS2_KB - 1) / CIS2_KB * CIS2_KB;
    double kv_mb = kv_pos * c->n_layers * c->n_kv_heads * c->head_dim * 4.0 / 1048576.0;
    char wh[65];
    cis2_hex(r.witness, 32, wh);
    printf("backend=%s threads=%d prompt_len=%d n=%d\n", cis2_engine_backend(e), nth, plen, n);
    printf("load_ms=%.1f\n", load_ms);
    printf("hash_ms=%.1f\n", m.hash_ms); /* on its own thread, overlapping reading + packing */
    printf("model_load_ms=%.1f\n", m.load_ms); /* read + hash + pack; load_ms adds the engine */
    printf("prefill_tok_s=%.1f\n", plen / (r.prefill_ms / 1000.0));
    printf("prefill_first_tok_s=%.1f\n", pf_first); /* cold: first call of the engine */
    printf("decode_tok_s=%.2f\n", 1000.0 / ms_tok);
    printf("ms_per_token=%.3f\n", ms_tok);
    printf("peak_rss_mb=%.1f\n", rss);
    printf("weights_mb=%.1f\n", (double)m.file_bytes / 1048576.0);
    printf("kv_cache_mb=%.1f\n", kv_mb);
    printf("read_gbs=%.2f\n", gbs);
    printf("floor_ms_per_token=%.3f\n", floor_ms);
    if (eo.backend == CIS2_BACKEND_APPROX) /* arm D: not reproducible (docs/quantization.md §6) */
        printf("arm=D approximate: no CIS2_REF\n");
    else
        printf("CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=%s\n", wh,
               r.n_prompt, r.n_gen, cis2_model_dtype(&m));
    fflush(stdout);
    for (int i = 0; i < nbs; i++)
        if (batch_row(&m, eo, bs[i], plen, n, 1000.0 / ms_tok, r.witness, err)) {
            cis2_result_free(&r);
            cis2_cli_usage_error(cmd, "--batch %d: %s", bs[i], err);
            goto out;
        }
    double pf[32], dc[32];
    cis2_result_free(&r);
    /* Every length timed warm, the first included: the run above has warmed
     * it, but its own prefill (prefill_tok_s= above) may include a fresh KV
     * arena, since it reaches more positions than the first call did. */
    pf[0] = npl > 1 || npos > 0 ? prefill_tok_s(e, c, plen) : 0.0; /* 0: no table */
    for (int i = 1; i < npl; i++) /* each length warmed once, as the first */
        pf[i] = prefill_tok_s(e, c, pl[i]) < 0 ? -1.0 : prefill_tok_s(e, c, pl[i]);

    if (npos) {
        /* decode at position P = the measured short-context decode, with its
         * attention replaced by the attention over P cached positions. */
        cis2_backend *b = NULL;
        int brc = !strcmp(backend, "ref") ? cis2_backend_ref_new(&b, NULL, NULL, err)
                                          : cis2_backend_fast_create(&b, isa, threads, err);
        if (brc) {
            cis2_cli_usage_error(cmd, "%s", err);
            goto out;
        }
        int maxp = plen + n / 2;
        for (int i = 0; i < npos; i++)
            if (pos[i] > maxp) maxp = pos[i];
        size_t kvd = (size_t)c->n_kv_heads * c->head_dim, qd = (size_t)c->n_heads * c->head_dim;
        float **kc = calloc((size_t)c->n_layers, sizeof *kc),
              **vc = calloc((size_t)c->n_layers, sizeof *vc),
              **kb = b->wants_kb ? calloc((size_t)c->n_layers, sizeof *kb) : NULL;
        int kb_cap = (maxp + CIS2_KB) / CIS2_KB * CIS2_KB; /* maxp + 1 positions */
        if (b->reserve && b->reserve(b, 1, maxp + 1, c->n_heads, c->n_kv_heads, c->head_dim, err)) {
            cis2_cli_usage_error(cmd, "%s", err);
            goto out;
        }
        float *q = malloc(qd * sizeof(float)), *out = malloc(qd * sizeof(float));
        uint64_t st = 88172645463325252ull;
        for (size_t i = 0; i < qd; i++) {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            q[i] = (float)(st >> 40) / 16777216.0f - 0.5f;
        }
        for (int l = 0; l < c->n_layers; l++) {
            kc[l] = malloc(((size_t)maxp + 1) * kvd * sizeof(float));
            vc[l] = malloc(((size_t)maxp + 1) * kvd * sizeof(float));
            if (!kc[l] || !vc[l]) {
                cis2_cli_usage_error(cmd, "out of memory for the --positions KV cache");
                goto out;
            }
            for (size_t j = 0; j < ((size_t)maxp + 1) * kvd; j++) {
                st ^= st << 13;
                st ^= st >> 7;
                st ^= st << 17;
                kc[l][j] = (float)(st >> 40) / 16777216.0f - 0.5f;
                vc[l][j] = (float)(st & 0xFFFFFF) / 16777216.0f - 0.5f;
            }
            if (!kb) continue; /* the engine's key-blocked copy, as it keeps it */
            kb[l] = malloc((size_t)kb_cap * kvd * sizeof(float));
            if (!kb[l]) {
                cis2_cli_usage_error(cmd, "out of memory for the --positions KV cache");
                goto out;
            }
            for (int p = 0; p <= maxp; p++)
                cis2_kb_put(kb[l], kb_cap, c->n_kv_heads, c->head_dim, p, kc[l] + (size_t)p * kvd);
        }
        double base = attn_ms_at(b, c, kc, vc, kb, kb_cap, q, out, plen + n / 2, 3);
        for (int i = 0; i < npos; i++) {
            double a = attn_ms_at(b, c, kc, vc, kb, kb_cap, q, out, pos[i], pos[i] > 4000 ? 3 : 5);
            double ms = ms_tok - base + a;
            dc[i] = 1000.0 / ms;
            printf("pos=%d decode_tok_s=%.2f ms_per_token=%.3f attn_ms=%.3f\n", pos[i], 1000.0 / ms,
                   ms, a);
        }
        for (int l = 0; l < c->n_layers; l++) {
            free(kc[l]);
            free(vc[l]);
            if (kb) free(kb[l]);
        }
        free(kb);
        free(kc);
        free(vc);
        free(q);
        free(out);
        b->destroy(b);
    }
    if (npl > 1 || npos > 0) print_table(cis2_engine_backend(e), nth, pl, pf, npl, pos, dc, npos);
    rc = 0;
out:
    free(pos);
    free(bs);
    free(pl);
    if (e) cis2_engine_free(e);
    if (loaded) cis2_model_unload(&m);
    return rc;
}
