/* The verify layer's parsers and reports: receipts as a peer renders them,
 * the key=value text of vectors (CRLF), the §13.1 vector, --tol files, a
 * candidate's answer, and traces whose metadata tries to forge report
 * lines. */
#include "unit.h"
#include "verify/conformance.h"
#include "verify/trace.h"
#include <math.h>
#include <unistd.h>

/* ------------------------------------------------------------ receipts */
/* A receipt as a published peer's strict Rust parser/renderer writes it
 * (same 13 keys in the same order, "key value\n", lowercase hex; its own
 * unit test's sample: digests of bytes 1..7, "Once upon a time"). Rendered
 * here independently of receipt.c. */
static char *peer_render(const char *prompt, const char *pids, int gen_toks, const char *gids)
{
    static char b[4096];
    char h[7][65];
    for (int k = 0; k < 7; k++) {
        for (int i = 0; i < 32; i++) snprintf(h[k] + 2 * i, 3, "%02x", k + 1);
    }
    char ph[512] = "";
    for (size_t i = 0; prompt[i]; i++) snprintf(ph + 2 * i, 3, "%02x", (unsigned char)prompt[i]);
    snprintf(b, sizeof b,
             "CIS-2-RECEIPT v1\nspec-version 0.3b\nweights-sha256 %s\nconfig-sha256 %s\n"
             "tokenizer-sha256 %s\nprompt-hex %s\nprompt-token-ids %s\ngen-toks %d\ndtype fp32\n"
             "table-digest %s\ninv-freq-table-digest %s\ngenerated-token-ids %s\n"
             "argmax-digest %s\nwitness-digest %s\n",
             h[0], h[1], h[2], ph, pids, gen_toks, h[3], h[4], gids, h[5], h[6]);
    return b;
}

static int parses(const char *text)
{
    cis2_receipt r;
    char err[CIS2_ERR_LEN];
    int rc = cis2_receipt_parse(text, strlen(text), "r", &r, err);
    if (!rc) cis2_receipt_free(&r);
    return rc == 0;
}

static char *replace(const char *s, const char *a, const char *b)
{
    static char out[8192];
    const char *p = strstr(s, a);
    if (!p) return NULL;
    snprintf(out, sizeof out, "%.*s%s%s", (int)(p - s), s, b, p + strlen(a));
    return out;
}

static void test_receipts(void)
{
    char *peer = peer_render("Once upon a time", "6403,1980,253,655", 2, "28,665");
    cis2_receipt r;
    char err[CIS2_ERR_LEN];
    int rc = cis2_receipt_parse(peer, strlen(peer), "peer.receipt", &r, err);
    CHECK("receipt.peer-rendering-parses", rc == 0, "%s", err);
    if (rc == 0) {
        char *out;
        size_t len;
        int frc = cis2_receipt_format(&r, &out, &len);
        CHECK("receipt.peer-rendering-formats-back-byte-identical",
              !frc && len == strlen(peer) && !memcmp(out, peer, len), "differs");
        CHECK("receipt.peer-rendering-fields",
              r.prompt_len == 16 && !memcmp(r.prompt_bytes, "Once upon a time", 16) &&
                  r.n_prompt == 4 && r.prompt_ids[0] == 6403 && r.n_gen == 2 &&
                  r.weights_sha[0] == 1 && r.witness_digest[31] == 7,
              "fields");
        if (!frc) free(out);
        /* A struct the caller doctored is refused, never rendered: a dtype or
         * spec_version with a newline would add a forged line, one without a
         * NUL would be read past, a negative count would wrap a size. */
        cis2_receipt d = r;
        strcpy(d.dtype, "fp32\nwitness");
        int bad = !cis2_receipt_format(&d, &out, &len);
        d = r;
        memcpy(d.dtype, "fp32fp32fp32fp32", 16);
        bad += !cis2_receipt_format(&d, &out, &len);
        d = r;
        strcpy(d.spec_version, "0.3b\nx");
        bad += !cis2_receipt_format(&d, &out, &len);
        d = r;
        d.n_gen = -1;
        bad += !cis2_receipt_format(&d, &out, &len);
        d = r;
        d.n_prompt = 0;
        bad += !cis2_receipt_format(&d, &out, &len);
        d = r;
        d.gen_ids = NULL;
        bad += !cis2_receipt_format(&d, &out, &len);
        CHECK("receipt.doctored-struct-not-formatted", bad == 0, "%d of 6 formatted", bad);
        d = r;
        strcpy(d.dtype, "fp32\nwitness");
        int wrc = cis2_receipt_write(&d, "/nonexistent-dir/r.txt", err);
        CHECK("receipt.doctored-struct-not-written", wrc && strstr(err, "receipt: dtype must be"),
              "%s", wrc ? err : "written");
        CHECK("receipt.format-ids-negative-count", cis2_format_ids(r.gen_ids, -1) == NULL,
              "a list for n = -1");
        cis2_receipt_free(&r);
    }
    /* the source's name is escaped: the message stays one line */
    rc = cis2_receipt_parse("x\n", 2, "r\n\x1b[31m.txt", &r, err);
    CHECK("receipt.parse-error-path-escaped",
          rc && !strchr(err, '\n') && !strchr(err, 0x1b) &&
              strstr(err, "r\\n\\x1b[31m.txt: line 1"),
          "%s", err);
    /* every mutant the peer's parser rejects, ours rejects too */
    const char *mut[][2] = {
        { "CIS-2-RECEIPT v1", "CIS-2-RECEIPT v2" },
        { "CIS-2-RECEIPT v1", "cis-2-receipt v1" },
        { "CIS-2-RECEIPT v1\n", "junk\nCIS-2-RECEIPT v1\n" },
        { "dtype fp32\n", "dtype fp32 extra\n" },
        { "gen-toks 2\n", "gen-toks 2x\n" },
        { "prompt-token-ids 6403,1980,253,655", "prompt-token-ids 6403,1980,253,655," },
        { "prompt-token-ids 6403,1980,253,655", "prompt-token-ids 06403,1980,253,655" },
        { "generated-token-ids 28,665", "generated-token-ids 28" },
        { "dtype fp32\n", "" },
        { "\ndtype fp32", "\n\ndtype fp32" },
        { "table-digest 0404", "table-digest 04040404" },
        { "witness-digest", "witness-digest " },
        { "\nargmax-digest", "\r\nargmax-digest" },
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof mut / sizeof mut[0]; i++) {
        char *m = replace(peer, mut[i][0], mut[i][1]);
        if (!m || parses(m)) {
            printf("  accepted mutant %zu\n", i);
            bad++;
        }
    }
    char tail[8192];
    snprintf(tail, sizeof tail, "%sunknown-key value\n", peer);
    bad += parses(tail);
    snprintf(tail, sizeof tail, "%sdtype fp32\n", peer);
    bad += parses(tail);
    CHECK("receipt.rejects-what-the-peer-rejects", !bad, "%d mutants accepted", bad);
}

/* ------------------------------------------------------------ key=value */
static void test_kv(void)
{
    char a[] = "# c\nop=rsqrt\n n = 2 \nx_bits=0x1,0x2\n";
    char b[] = "# c\r\nop=rsqrt\r\n n = 2 \r\nx_bits=0x1,0x2\r\n";
    cis2_kv_doc da, db;
    char err[CIS2_ERR_LEN];
    int ra = cis2_kv_parse(a, strlen(a), "a", CIS2_KV_TRIM, &da, err);
    int rb = cis2_kv_parse(b, strlen(b), "b", CIS2_KV_TRIM, &db, err);
    int same = !ra && !rb && da.n == 3 && db.n == 3;
    for (int i = 0; same && i < 3; i++)
        same = !strcmp(da.p[i].key, db.p[i].key) && !strcmp(da.p[i].val, db.p[i].val);
    CHECK("kv.crlf-equals-lf", same, "ra=%d rb=%d %s", ra, rb, err);
    if (!ra) cis2_kv_free(&da);
    if (!rb) cis2_kv_free(&db);
    char c[] = "prompt= Once\r\n";
    int rc = cis2_kv_parse(c, strlen(c), "c", 0, &da, err);
    CHECK("kv.untrimmed-keeps-value-bytes", !rc && da.n == 1 && !strcmp(da.p[0].val, " Once"), "%s",
          err);
    if (!rc) cis2_kv_free(&da);
    char d[] = "a=1\na=2\n";
    rc = cis2_kv_parse(d, strlen(d), "d", CIS2_KV_TRIM, &da, err);
    CHECK("kv.duplicate-refused", rc && strstr(err, "line 2: duplicate field 'a'"), "%s", err);
    char e[] = "a\x01=1\n";
    rc = cis2_kv_parse(e, strlen(e), "e\n", CIS2_KV_TRIM, &da, err);
    CHECK("kv.bad-key-and-escaped-source", rc && !strchr(err, '\n') && strstr(err, "e\\n: line 1"),
          "%s", err);
    size_t n = 5000 * 8;
    char *many = malloc(n + 1), *p = many;
    for (int i = 0; i < 5000; i++) p += sprintf(p, "k%05d=\n", i);
    rc = cis2_kv_parse(many, (size_t)(p - many), "many", CIS2_KV_TRIM, &da, err);
    CHECK("kv.field-cap", rc && strstr(err, "more than 4096 fields"), "%s", err);
    free(many);
}

/* ------------------------------------------------------------ §13.1 vector */
static void test_run_vector(void)
{
    cis2_run_vector a, b;
    char err[CIS2_ERR_LEN];
    int ra = cis2_run_vector_parse(&a, cis2_spec_13_1, strlen(cis2_spec_13_1), "spec", err);
    CHECK("run-vector.spec-13.1",
          !ra && a.gen_toks == 16 && !strcmp(a.v[CIS2_RV_PROMPT], "Once upon a time"), "%s", err);
    /* CRLF: identical values (a CR never reaches a comparison: no FAIL whose
     * got and want print alike) */
    char crlf[4096], *q = crlf;
    for (const char *s = cis2_spec_13_1; *s; s++) {
        if (*s == '\n') *q++ = '\r';
        *q++ = *s;
    }
    *q = 0;
    int rb = cis2_run_vector_parse(&b, crlf, strlen(crlf), "crlf", err);
    int same = !ra && !rb;
    for (int k = 0; same && k < CIS2_RV_N; k++) same = !strcmp(a.v[k], b.v[k]);
    CHECK("run-vector.crlf-equals-lf", same, "%s", err);
    if (!ra) cis2_run_vector_free(&a);
    if (!rb) cis2_run_vector_free(&b);
    const char *bad[][2] = {
        { "cis2_ref=d8", "cis2_ref=D8" },
        { "gen_toks=16", "gen_toks=0" },
        { "prompt_token_ids=6403", "prompt_token_ids= 6403" },
        { "argmax_digest=", "argmax=" },
        { "table_digest=23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d\n", "" },
    };
    const char *want[] = { "cis2_ref must be 64 lowercase hex", "gen_toks is malformed",
                           "prompt_token_ids is malformed", "unknown key 'argmax'",
                           "missing key 'table_digest'" };
    for (int i = 0; i < 5; i++) {
        char *m = replace(cis2_spec_13_1, bad[i][0], bad[i][1]);
        int rc = m ? cis2_run_vector_parse(&a, m, strlen(m), "v", err) : 0;
        char name[64];
        snprintf(name, sizeof name, "run-vector.rejects.%d", i);
        CHECK(name, rc && strstr(err, want[i]), "%s", rc ? err : "accepted");
    }
}

/* ------------------------------------------------------------ --tol files */
static void test_tol(void)
{
    cis2_tol_table t;
    cis2_tol_defaults(&t);
    char a[] = "# x\r\n* max_rel=0.5\r\nlogits top1=0 mean_rel=1e-2\r\n";
    char err[CIS2_ERR_LEN];
    int rc = cis2_tol_parse(&t, a, strlen(a), "t.tol", err);
    CHECK("tol.crlf",
          !rc && t.row[CIS2_N_Q_PROJ].max_rel == 0.5 && t.row[CIS2_N_LOGITS].top1 == 0 &&
              t.row[CIS2_N_LOGITS].mean_rel == 1e-2,
          "%s", err);
    char b[] = "q_proj max_rel=x\x1b[2J\n";
    rc = cis2_tol_parse(&t, b, strlen(b), "t.tol", err);
    CHECK("tol.bad-value-escaped", rc && strstr(err, "got 'max_rel=x\\x1b[2J'"), "%s", err);
    /* nothing is settled by line order alone, and no bound is out of reach */
    char c[] = "* max_rel=1 max_rel=2\n";
    rc = cis2_tol_parse(&t, c, strlen(c), "t.tol", err);
    CHECK("tol.duplicate-key-refused", rc && strstr(err, "line 1: max_rel for '*' is given twice"),
          "%s", err);
    char d[] = "q_proj mean_rel=1\nq_proj mean_rel=2\n";
    rc = cis2_tol_parse(&t, d, strlen(d), "t.tol", err);
    CHECK("tol.duplicate-line-refused", rc && strstr(err, "line 2: mean_rel for 'q_proj'"), "%s",
          err);
    char e[] = "logits max_rel=0.25\n* max_rel=0.5\n";
    rc = cis2_tol_parse(&t, e, strlen(e), "t.tol", err);
    CHECK("tol.star-after-node-refused",
          rc && strstr(err, "line 2: max_rel for '*' would override"), "%s", err);
    cis2_tol_defaults(&t);
    char f[] = "* max_rel=0.5\nlogits max_rel=0.25\n";
    rc = cis2_tol_parse(&t, f, strlen(f), "t.tol", err);
    CHECK("tol.node-after-star-overrides",
          !rc && t.row[CIS2_N_LOGITS].max_rel == 0.25 && t.row[CIS2_N_Q_PROJ].max_rel == 0.5, "%s",
          err);
    char g[] = "logits top1=2\n";
    rc = cis2_tol_parse(&t, g, strlen(g), "t.tol", err);
    CHECK("tol.top1-not-a-flag", rc && strstr(err, "top1 must be 0 or 1, got '2'"), "%s", err);
    char h[] = "* min_cos=1.5\n";
    rc = cis2_tol_parse(&t, h, strlen(h), "t.tol", err);
    CHECK("tol.min-cos-above-1", rc && strstr(err, "min_cos must be at most 1"), "%s", err);
    /* only plain decimals: no hex float, sign, inf/nan; no value that
     * underflows (it would silently become another bound) */
    const char *bad[] = { "* max_rel=0x1p-3\n",   "* max_rel=+1\n", "* max_rel=-0\n",
                          "* max_rel=infinity\n", "* max_rel=1e\n", "* max_rel=.\n" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char b2[64];
        snprintf(b2, sizeof b2, "%s", bad[i]);
        rc = cis2_tol_parse(&t, b2, strlen(b2), "t.tol", err);
        CHECK("tol.not-a-plain-decimal", rc && strstr(err, "expected key=number"), "%s: %s", bad[i],
              err);
    }
    char u[] = "* max_rel=1e-999\n", u2[] = "* mean_rel=1e-310\n";
    rc = cis2_tol_parse(&t, u, strlen(u), "t.tol", err);
    CHECK("tol.underflow-to-0", rc && strstr(err, "underflows to 0"), "%s", err);
    rc = cis2_tol_parse(&t, u2, strlen(u2), "t.tol", err);
    CHECK("tol.underflow-to-subnormal", rc && strstr(err, "underflows to a subnormal"), "%s", err);
    cis2_tol_defaults(&t);
    char ok[] = "* max_rel=1. mean_rel=.5 min_cos=0e-999\nlogits max_rel=1E-5 top1_min=0.0\n";
    rc = cis2_tol_parse(&t, ok, strlen(ok), "t.tol", err);
    CHECK("tol.plain-decimals-accepted",
          !rc && t.row[CIS2_N_LOGITS].max_rel == 1e-5 && t.row[CIS2_N_Q_PROJ].mean_rel == 0.5 &&
              t.row[CIS2_N_Q_PROJ].min_cos == 0,
          "%s", err);
}

/* ------------------------------------------------------------ answers */
static void test_answer(void)
{
    const char *sha = "9E7C407D1B56304F7EF56998F234C12BA58E8EF1382F08D9D40B959C89051731";
    char ok[256], got[65], why[CIS2_ERR_LEN];
    const char *bits;
    snprintf(ok, sizeof ok, "  out_sha256 = %s \t\r\n\r\nout_bits=0x1\r\n", sha);
    int rc = cis2_suite_parse_answer(ok, strlen(ok), got, &bits, why);
    CHECK("answer.trimmed-crlf-uppercase",
          !rc && !strcmp(got, "9e7c407d1b56304f7ef56998f234c12ba58e8ef1382f08d9d40b959c89051731") &&
              bits && !strcmp(bits, "0x1"),
          "%s", why);
    const char *bad[] = { "out_sha256=abc\n", "hello\nout_sha256=%s\n",
                          "out_sha256=%s\nout_sha256=%s\n", "# note\nout_sha256=%s\n",
                          "out_bits=0x1\n" };
    const char *want[] = { "malformed out_sha256", "unexpected stdout line 'hello'",
                           "more than one out_sha256=", "unexpected stdout line '# note'",
                           "no out_sha256=" };
    for (int i = 0; i < 5; i++) {
        char t[512], name[64];
        snprintf(t, sizeof t, bad[i], sha, sha);
        rc = cis2_suite_parse_answer(t, strlen(t), got, &bits, why);
        snprintf(name, sizeof name, "answer.rejects.%d", i);
        CHECK(name, rc && strstr(why, want[i]), "%s", rc ? why : "accepted");
    }
}

/* ------------------------------------------------------------ traces */
static void test_trace(void)
{
    cis2_trace a;
    memset(&a, 0, sizeof a);
    a.path = "a\x1b[31m.st";
    cis2_trace_meta_set(&a, "format", CIS2_TRACE_FORMAT);
    cis2_trace_meta_set(&a, "arm", "evil\nverdict=WITHIN-TOLERANCE\x1b]0;t\a");
    cis2_trace_meta_set(&a, "token_ids", "1\n");
    cis2_tentry *e = cis2_trace_add(&a);
    e->name = strdup("p0.logits");
    e->node = CIS2_N_LOGITS;
    e->layer = -1;
    e->ndim = 1;
    e->shape[0] = e->n = 3;
    e->v = calloc(3, sizeof(float));
    char *img, err[CIS2_ERR_LEN];
    size_t len;
    int rc = cis2_trace_format(&a, &img, &len, err);
    cis2_trace b;
    rc = rc || cis2_trace_parse(&b, (const uint8_t *)img, len, "b.st", err);
    CHECK("trace.round-trip",
          !rc && b.n == 1 && b.t[0].n == 3 &&
              !strcmp(cis2_trace_meta_get(&b, "arm"), "evil\nverdict=WITHIN-TOLERANCE\x1b]0;t\a"),
          "%s", err);
    if (!rc) {
        for (int i = 0; i < b.nm; i++)
            if (!strcmp(b.mk[i], "token_ids")) {
                free(b.mv[i]);
                b.mv[i] = strdup("2\x1b[2J");
            }
        char *rep = NULL;
        size_t rl = 0;
        FILE *f = open_memstream(&rep, &rl);
        int d = cis2_trace_diff(f, &a, &b, 1, NULL, 0, 0);
        fclose(f);
        int verdicts = 0, esc = 0;
        for (char *l = rep; l && *l;) {
            char *nl = strchr(l, '\n');
            if (!strncmp(l, "verdict=", 8)) verdicts++;
            l = nl ? nl + 1 : l + strlen(l);
        }
        for (size_t i = 0; i < rl; i++) esc += rep[i] == 0x1b || rep[i] == '\a';
        CHECK("trace.diff-report-cannot-be-forged",
              d == 1 && verdicts == 1 && !esc && strstr(rep, "arm evil\\nverdict=") &&
                  strstr(rep, "A=1\\n B=2\\x1b[2J"),
              "%s", rep ? rep : "");
        free(rep);
        cis2_trace_free(&b);
    }
    free(img);
    a.path = NULL;
    cis2_trace_free(&a);
    /* bad entries: a non-trace name, a hash entry with a bad shape */
    cis2_trace c;
    memset(&c, 0, sizeof c);
    c.path = "c";
    cis2_trace_meta_set(&c, "sha256.p0.logits", "03 00");
    rc = cis2_trace_format(&c, &img, &len, err) ||
         cis2_trace_parse(&b, (const uint8_t *)img, len, "c.st", err);
    CHECK("trace.bad-hash-entry-refused", rc && strstr(err, "bad hash entry"), "%s", err);
    free(img);
    cis2_trace_free(&c);
}

/* The diff's summary (what cis2 arms prints): counts, ULPs, top-1 and the
 * first divergent node, on two hand-made traces whose differences are known. */
static void add_entry(cis2_trace *t, const char *name, int pos, int layer, int node, int n,
                      const float *v)
{
    cis2_tentry *e = cis2_trace_add(t);
    e->name = strdup(name);
    e->pos = pos;
    e->layer = layer;
    e->node = node;
    e->ndim = 1;
    e->shape[0] = e->n = n;
    e->v = malloc((size_t)n * sizeof(float));
    memcpy(e->v, v, (size_t)n * sizeof(float));
}

static void test_diff_sum(void)
{
    cis2_trace a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.path = "a";
    b.path = "b";
    float up[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 }, up2[16],
          l0[4] = { 0.5f, 3, 1, 2 }, l1[4] = { 4, 1, 2, 3 }, l1b[4] = { 4, 1, 5, 3 };
    memcpy(up2, up, sizeof up);
    up2[5] = nextafterf(6.0f, 7.0f); /* one element, one ulp */
    add_entry(&a, "p0.L0.up", 0, 0, CIS2_N_UP, 16, up);
    add_entry(&b, "p0.L0.up", 0, 0, CIS2_N_UP, 16, up2);
    add_entry(&a, "p0.logits", 0, -1, CIS2_N_LOGITS, 4, l0);
    add_entry(&b, "p0.logits", 0, -1, CIS2_N_LOGITS, 4, l0);
    add_entry(&a, "p1.logits", 1, -1, CIS2_N_LOGITS, 4, l1);
    add_entry(&b, "p1.logits", 1, -1, CIS2_N_LOGITS, 4, l1b); /* top-1 moves from 0 to 2 */
    cis2_trace_sort(&a);
    cis2_trace_sort(&b);
    char *rep = NULL;
    size_t rl = 0;
    FILE *f = open_memstream(&rep, &rl);
    cis2_diff_sum s;
    int d = cis2_trace_diff_sum(f, &a, &b, 1, NULL, 0, 0, &s);
    fclose(f);
    CHECK("trace.diff-sum-counts",
          d == 1 && s.diverged == 1 && s.compared == 3 && s.n_failed == 2 && s.ndiff == 2 &&
              s.n_logits == 2 && s.top1_same == 1 && !s.nan_ulp,
          "d=%d compared=%d failed=%d ndiff=%lld logits=%d top1=%d", d, s.compared, s.n_failed,
          (long long)s.ndiff, s.n_logits, s.top1_same);
    /* l1 vs l1b: 2 -> 5 is 0x40000000 -> 0x40A00000, the largest ULP distance here */
    CHECK("trace.diff-sum-max-ulp", s.max_ulp == 0x00A00000u, "max_ulp=%llu",
          (unsigned long long)s.max_ulp);
    CHECK("trace.diff-sum-first-node",
          s.have_first && !strcmp(s.first, "p0.L0.up") && s.first_node == CIS2_N_UP &&
              s.branch == 1 && !strcmp(s.branch_name, "linear-projection") &&
              strstr(s.cause, "isolated outputs differ (1 of 16 elements differ, first at 5)") &&
              s.kind[CIS2_N_UP].n == 1 && s.kind[CIS2_N_LOGITS].n == 2,
          "first=%s branch=%d cause=%s", s.first, s.branch, s.cause);
    free(rep);
    cis2_trace_free(&a);
    cis2_trace_free(&b);
}

int main(void)
{
    test_receipts();
    test_kv();
    test_run_vector();
    test_tol();
    test_answer();
    test_trace();
    test_diff_sum();
    UNIT_END();
}
