/* The cis2 command line: run, verify, selftest, conform (+ dispatch to the
 * tokenizer, conformance, bench and trace commands). Output lines are
 * key=value so scripts can grep them; every error is one line on stderr. */
#include "commands.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


int cis2_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cis2 %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

int cis2_cli_int(const char *s, long lo, long hi, int *out)
{
    if (!s || !*s) return 1;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi || (s[0] == '0' && s[1]) || s[0] == '+' || s[0] == ' ') return 1;
    *out = (int)v;
    return 0;
}

int cis2_cli_fp_ready(const char *cmd)
{
    if (cis2_fpenv_pin() != 0) {
        cis2_cli_usage_error(cmd, "cannot pin FTZ/DAZ (control register 0x%llx); refusing to run (§1.3)",
                             (unsigned long long)cis2_fpenv_read());
        return 1;
    }
    if (cis2_fpenv_selftest(NULL) != 0) {
        cis2_cli_usage_error(cmd, "the §1.3 denormal self-test failed; refusing to run (see cis2 selftest)");
        return 1;
    }
    return 0;
}

int cis2_cli_open(const char *cmd, const char *dir, const cis2_engine_opts *eo, cis2_model *m, cis2_engine **e)
{
    char err[CIS2_ERR_LEN];
    if (cis2_cli_fp_ready(cmd)) return 1;
    cis2_load_opts lo = { 0 };
    lo.need_f32 = !eo || !eo->backend || strcmp(eo->backend, "ref") == 0;
    lo.skip_hash = CIS2_HASH_ASYNC;   /* hash while the backend packs; cis2_engine_new joins */
    if (cis2_model_load(m, dir, &lo, err)) { cis2_cli_usage_error(cmd, "%s", err); return 1; }
    if (cis2_engine_new(e, m, eo, err)) { cis2_cli_usage_error(cmd, "%s", err); cis2_model_free(m); return 1; }
    return 0;
}

/* ------------------------------------------------------------ options */
typedef struct {
    const char *model, *prompt, *prompt_ids, *receipt, *backend, *isa, *fault, *fault_arg, *vector;
    int n, n_set, threads, stop_at_eos, check_det, no_check_det;
} run_opts;

/* Flags each command accepts, as a string of names. */
static int parse_opts(const char *cmd, int argc, char **argv, const char *allowed, run_opts *o,
                      const char **positional)
{
    memset(o, 0, sizeof *o);
    o->n = 16;
    if (positional) *positional = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *name = a;
        if (strcmp(a, "-n") == 0) name = "--n";
        if (a[0] != '-' || a[1] == 0) {
            if (positional && !*positional) { *positional = a; continue; }
            return cis2_cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
        /* allowed is " --model --prompt ..." with a trailing space per name */
        char key[64];
        snprintf(key, sizeof key, " %s ", name);
        if (strlen(name) > 40 || !strstr(allowed, key))
            return cis2_cli_usage_error(cmd, "unknown option '%s' (see cis2 help)", a);
        int is_flag = !strcmp(name, "--stop-at-eos") || !strcmp(name, "--check-determinism") ||
                      !strcmp(name, "--no-check-determinism");
        if (is_flag) {
            if (!strcmp(name, "--stop-at-eos")) o->stop_at_eos = 1;
            else if (!strcmp(name, "--check-determinism")) o->check_det = 1;
            else o->no_check_det = 1;
            continue;
        }
        if (i + 1 >= argc) return cis2_cli_usage_error(cmd, "option '%s' needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(name, "--model")) o->model = v;
        else if (!strcmp(name, "--prompt")) o->prompt = v;
        else if (!strcmp(name, "--prompt-ids")) o->prompt_ids = v;
        else if (!strcmp(name, "--receipt")) o->receipt = v;
        else if (!strcmp(name, "--backend")) o->backend = v;
        else if (!strcmp(name, "--isa")) o->isa = v;
        else if (!strcmp(name, "--fault")) o->fault = v;
        else if (!strcmp(name, "--fault-arg")) o->fault_arg = v;
        else if (!strcmp(name, "--vector")) o->vector = v;
        else if (!strcmp(name, "--threads")) {
            if (cis2_cli_int(v, 1, 1024, &o->threads)) return cis2_cli_usage_error(cmd, "--threads must be an integer in [1, 1024], got '%s'", v);
        } else if (!strcmp(name, "--n")) {
            if (cis2_cli_int(v, 1, 1000000, &o->n)) return cis2_cli_usage_error(cmd, "-n must be an integer in [1, 1000000], got '%s'", v);
            o->n_set = 1;
        }
    }
    if (o->backend && strcmp(o->backend, "ref") && strcmp(o->backend, "fast"))
        return cis2_cli_usage_error(cmd, "--backend must be ref or fast, got '%s'", o->backend);
    return 0;
}

static void engine_opts(const run_opts *o, cis2_engine_opts *eo)
{
    memset(eo, 0, sizeof *eo);
    eo->backend = o->backend ? o->backend : "ref";
    eo->isa = o->isa;
    eo->threads = o->threads;
    eo->fault = o->fault;
    eo->fault_arg = o->fault_arg;
}

/* JSON string body (without quotes): escapes ", \ and control characters. */
static void print_json_escaped(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"') fputs("\\\"", f);
        else if (ch == '\\') fputs("\\\\", f);
        else if (ch == '\n') fputs("\\n", f);
        else if (ch == '\t') fputs("\\t", f);
        else if (ch == '\r') fputs("\\r", f);
        else if (ch < 0x20 || ch == 0x7F) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
}

static void print_hex_line(const char *key, const uint8_t d[32])
{
    char h[65];
    cis2_hex(d, 32, h);
    printf("%s=%s\n", key, h);
}

static int load_tokenizer(const cis2_model *m, cis2_tokenizer **t, char *err)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/tokenizer.json", m->dir);
    return cis2_tokenizer_load(t, path, err);
}

/* Prompt ids from --prompt-ids or by tokenizing --prompt with `t` (NULL when
 * tokenizer.json did not load; `terr` says why). Also returns the prompt's raw
 * bytes for the receipt (for ids: their decoded text when the tokenizer can
 * decode them, else empty). */
static int get_prompt(const char *cmd, const run_opts *o, const cis2_tokenizer *t, const char *terr,
                      int32_t **ids, int *n, char **bytes, size_t *blen)
{
    char err[CIS2_ERR_LEN];
    *bytes = NULL;
    *blen = 0;
    if (o->prompt_ids) {
        if (cis2_parse_ids(o->prompt_ids, ids, n, err)) return cis2_cli_usage_error(cmd, "--prompt-ids: %s", err);
        if (t && cis2_tokenizer_decode(t, *ids, *n, bytes, blen, err)) { *bytes = NULL; *blen = 0; }
        return 0;
    }
    if (!t) return cis2_cli_usage_error(cmd, "--prompt needs the tokenizer: %s", terr);
    if (cis2_tokenizer_encode(t, o->prompt, strlen(o->prompt), ids, n, err)) return cis2_cli_usage_error(cmd, "--prompt: %s", err);
    if (*n == 0) return cis2_cli_usage_error(cmd, "--prompt: the prompt encodes to no tokens");
    *bytes = strdup(o->prompt);
    *blen = strlen(o->prompt);
    return 0;
}

/* §12.4: run the whole decode twice in this process and compare. */
static int run_twice_check(cis2_engine *e, const int32_t *ids, int n, const cis2_gen_opts *g, const cis2_result *r1,
                           char *err)
{
    cis2_result r2;
    if (cis2_generate(e, ids, n, g, &r2, err)) return 1;
    int same = memcmp(r1->witness, r2.witness, 32) == 0 && memcmp(r1->argmax, r2.argmax, 32) == 0 &&
               r1->n_gen == r2.n_gen && memcmp(r1->gen, r2.gen, (size_t)r1->n_gen * sizeof(int32_t)) == 0;
    cis2_result_free(&r2);
    if (!same) { snprintf(err, CIS2_ERR_LEN, "determinism check failed: two runs in one process differ (§12.4)"); return 1; }
    return 0;
}

static int cmd_run(int argc, char **argv)
{
    run_opts o;
    if (parse_opts("run", argc, argv,
                   " --model --prompt --prompt-ids --n --receipt --backend --isa --threads --stop-at-eos"
                   " --check-determinism --fault --fault-arg ",
                   &o, NULL))
        return 2;
    if (!o.model) return cis2_cli_usage_error("run", "--model DIR is required");
    if (!!o.prompt == !!o.prompt_ids) return cis2_cli_usage_error("run", "give exactly one of --prompt TEXT or --prompt-ids 1,2,3");
    cis2_engine_opts eo;
    engine_opts(&o, &eo);
    cis2_model m;
    cis2_engine *e;
    if (cis2_cli_open("run", o.model, &eo, &m, &e)) return 2;
    int32_t *ids = NULL;
    int n = 0, rc = 2;
    char *bytes = NULL, err[CIS2_ERR_LEN];
    size_t blen = 0;
    cis2_result r = { 0 };
    /* One tokenizer for the prompt and for the generated text. */
    cis2_tokenizer *t = NULL;
    char terr[CIS2_ERR_LEN];
    if (load_tokenizer(&m, &t, terr)) t = NULL;
    if (get_prompt("run", &o, t, terr, &ids, &n, &bytes, &blen)) goto out;
    cis2_gen_opts g = { o.n, o.stop_at_eos, NULL, NULL };
    if (cis2_generate(e, ids, n, &g, &r, err)) { cis2_cli_usage_error("run", "%s", err); goto out; }
    if (o.check_det && run_twice_check(e, ids, n, &g, &r, err)) { cis2_cli_usage_error("run", "%s", err); rc = 1; goto out; }
    char *p = cis2_format_ids(r.prompt, r.n_prompt), *gs = cis2_format_ids(r.gen, r.n_gen);
    printf("prompt_token_ids=%s\ngenerated_token_ids=%s\n", p, gs);
    free(p);
    free(gs);
    if (t) {
        char *text;
        size_t tl;
        if (cis2_tokenizer_decode(t, r.gen, r.n_gen, &text, &tl, err) == 0) {
            printf("text=\"");
            print_json_escaped(stdout, text, tl);
            printf("\"\n");
            free(text);
        } else {
            printf("text_error=%s\n", err);
        }
    }
    print_hex_line("table_digest", m.table_digest);
    print_hex_line("inv_freq_table_digest", m.inv_freq_digest);
    print_hex_line("argmax_digest", r.argmax);
    if (o.stop_at_eos) printf("stop_at_eos=1 stopped=%d\n", r.stopped_at_eos);
    if (o.check_det) printf("determinism=PASS\n");
    char wh[65];
    cis2_hex(r.witness, 32, wh);
    printf("CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=fp32\n", wh, r.n_prompt, r.n_gen);
    fflush(stdout);
    rc = 0;
    if (o.receipt) {
        cis2_receipt rec;
        cis2_receipt_from_run(&rec, &m, &r, (const uint8_t *)bytes, blen);
        if (cis2_receipt_write(&rec, o.receipt, err)) { cis2_cli_usage_error("run", "%s", err); rc = 2; }
    }
out:
    cis2_tokenizer_free(t);
    cis2_result_free(&r);
    free(ids);
    free(bytes);
    cis2_engine_free(e);
    cis2_model_free(&m);
    return rc;
}

/* ------------------------------------------------------------- verify */
static int report(const char *field, int ok, const char *got, const char *want)
{
    if (ok) printf("MATCH %s\n", field);
    else printf("MISMATCH %s: receipt %s, recomputed %s\n", field, want, got);
    return !ok;
}

static int report_hash(const char *field, const uint8_t got[32], const uint8_t want[32])
{
    char g[65], w[65];
    cis2_hex(got, 32, g);
    cis2_hex(want, 32, w);
    return report(field, memcmp(got, want, 32) == 0, g, w);
}

static int cmd_verify(int argc, char **argv)
{
    run_opts o;
    const char *path;
    if (parse_opts("verify", argc, argv, " --model --backend --isa --threads ", &o, &path)) return 2;
    if (!path) return cis2_cli_usage_error("verify", "usage: cis2 verify RECEIPT --model DIR");
    if (!o.model) return cis2_cli_usage_error("verify", "--model DIR is required");
    char err[CIS2_ERR_LEN], *text;
    size_t len;
    if (cis2_read_file(path, &text, &len, err)) return cis2_cli_usage_error("verify", "%s", err);
    cis2_receipt rc;
    int prc = cis2_receipt_parse(text, len, path, &rc, err);
    free(text);
    if (prc) return cis2_cli_usage_error("verify", "%s", err);
    cis2_engine_opts eo;
    engine_opts(&o, &eo);
    cis2_model m;
    cis2_engine *e;
    if (cis2_cli_open("verify", o.model, &eo, &m, &e)) { cis2_receipt_free(&rc); return 2; }
    int bad = 0;
    /* §14.3: artifact hashes first, so a mismatch is localized. */
    bad += report_hash("weights-sha256", m.weights_sha, rc.weights_sha);
    bad += report_hash("config-sha256", m.config_sha, rc.config_sha);
    bad += report_hash("tokenizer-sha256", m.tokenizer_sha, rc.tokenizer_sha);
    bad += report_hash("table-digest", m.table_digest, rc.table_digest);
    bad += report_hash("inv-freq-table-digest", m.inv_freq_digest, rc.inv_freq_digest);
    /* prompt-hex must be the text the prompt ids decode to (empty = not recorded). */
    if (rc.prompt_len) {
        cis2_tokenizer *t;
        char *dec = NULL;
        size_t dl = 0;
        int ok = load_tokenizer(&m, &t, err) == 0;
        if (ok) { ok = cis2_tokenizer_decode(t, rc.prompt_ids, rc.n_prompt, &dec, &dl, err) == 0; cis2_tokenizer_free(t); }
        ok = ok && dl == rc.prompt_len && memcmp(dec, rc.prompt_bytes, dl) == 0;
        bad += report("prompt-hex", ok, ok ? "the same text" : "different text (or undecodable ids)", "prompt-token-ids' text");
        free(dec);
    } else {
        printf("SKIP prompt-hex: empty in the receipt\n");
    }
    cis2_result r;
    cis2_gen_opts g = { rc.gen_toks, 0, NULL, NULL };
    if (cis2_generate(e, rc.prompt_ids, rc.n_prompt, &g, &r, err)) {
        cis2_cli_usage_error("verify", "%s", err);
        cis2_engine_free(e); cis2_model_free(&m); cis2_receipt_free(&rc);
        return 2;
    }
    char *gg = cis2_format_ids(r.gen, r.n_gen), *gw = cis2_format_ids(rc.gen_ids, rc.n_gen);
    bad += report("generated-token-ids", strcmp(gg, gw) == 0, gg, gw);
    free(gg);
    free(gw);
    bad += report_hash("argmax-digest", r.argmax, rc.argmax_digest);
    bad += report_hash("witness-digest", r.witness, rc.witness_digest);
    if (bad) printf("receipt does NOT match: %d field(s) differ\n", bad);
    else printf("receipt verified: all fields match\n");
    cis2_result_free(&r);
    cis2_engine_free(e);
    cis2_model_free(&m);
    cis2_receipt_free(&rc);
    return bad ? 1 : 0;
}

/* ----------------------------------------------------------- selftest */
static int cmd_selftest(int argc, char **argv)
{
    if (argc > 1) return cis2_cli_usage_error("selftest", "takes no arguments");
    return cis2_selftest(stdout) ? 1 : 0;
}

/* ------------------------------------------------------------ conform */
/* §13.1, the normative test vector, in the same key=value form that
 * `--vector FILE` takes (tests pin fixture checkpoints this way). */
static const char SPEC_13_1[] =
    "weights_sha256=80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1\n"
    "config_sha256=1d556eab73b69c7f11f64c557a2f9c6f440bd4c6b89bb2584a6b498c92603843\n"
    "tokenizer_sha256=9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c\n"
    "prompt=Once upon a time\n"
    "prompt_token_ids=6403,1980,253,655\n"
    "gen_toks=16\n"
    "generated_token_ids=28,665,436,253,1838,8180,3365,14176,30,2306,4161,281,253,2066,2291,351\n"
    "table_digest=23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d\n"
    "inv_freq_table_digest=da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12\n"
    "argmax_digest=0b9c8f3ac90d0b9cd5f1719ac327dca1fc639fd87468305fccebbe3d56f67aff\n"
    "cis2_ref=d82743059d1db929e710236fe4ec37f89e6f932524801345a006980f7c3cc9df\n";

static const char *VEC_KEYS[] = { "weights_sha256", "config_sha256", "tokenizer_sha256", "prompt", "prompt_token_ids",
                                  "gen_toks", "generated_token_ids", "table_digest", "inv_freq_table_digest",
                                  "argmax_digest", "cis2_ref" };
#define N_VEC_KEYS 11

static int parse_vector(const char *text, const char *path, char *vals[N_VEC_KEYS], char *err)
{
    memset(vals, 0, N_VEC_KEYS * sizeof *vals);
    const char *p = text;
    int line = 0;
    while (*p) {
        line++;
        const char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        if (ll && p[0] != '#') {
            const char *eq = memchr(p, '=', ll);
            if (!eq) { snprintf(err, CIS2_ERR_LEN, "%s: line %d: expected key=value", path, line); return 1; }
            int k;
            for (k = 0; k < N_VEC_KEYS; k++)
                if (strlen(VEC_KEYS[k]) == (size_t)(eq - p) && !memcmp(p, VEC_KEYS[k], (size_t)(eq - p))) break;
            if (k == N_VEC_KEYS) { snprintf(err, CIS2_ERR_LEN, "%s: line %d: unknown key '%.*s'", path, line, (int)(eq - p), p); return 1; }
            if (vals[k]) { snprintf(err, CIS2_ERR_LEN, "%s: line %d: duplicate key '%s'", path, line, VEC_KEYS[k]); return 1; }
            vals[k] = strndup(eq + 1, ll - (size_t)(eq + 1 - p));
        }
        p += ll + (nl ? 1 : 0);
    }
    for (int k = 0; k < N_VEC_KEYS; k++)
        if (!vals[k] && k != 3) { snprintf(err, CIS2_ERR_LEN, "%s: missing key '%s'", path, VEC_KEYS[k]); return 1; }
    return 0;
}

static int pf(const char *what, int ok, const char *got, const char *want)
{
    if (ok) printf("PASS %s = %s\n", what, got);
    else printf("FAIL %s: got %s, want %s\n", what, got, want);
    return !ok;
}

static int cmd_conform(int argc, char **argv)
{
    run_opts o;
    if (parse_opts("conform", argc, argv, " --model --vector --backend --isa --threads --no-check-determinism ", &o, NULL))
        return 2;
    if (!o.model) return cis2_cli_usage_error("conform", "--model DIR is required");
    char err[CIS2_ERR_LEN], *vtext = NULL, *v[N_VEC_KEYS];
    size_t vl;
    const char *vpath = o.vector ? o.vector : "(spec §13.1)";
    if (o.vector && cis2_read_file(o.vector, &vtext, &vl, err)) return cis2_cli_usage_error("conform", "%s", err);
    int prc = parse_vector(vtext ? vtext : SPEC_13_1, vpath, v, err);
    free(vtext);
    int rc = 2, fails = 0;
    cis2_model m;
    cis2_engine *e = NULL;
    int32_t *ids = NULL, *want_ids = NULL;
    int n = 0, nw = 0;
    memset(&m, 0, sizeof m);
    if (prc) { cis2_cli_usage_error("conform", "%s", err); goto out; }
    printf("conform: vector %s, model %s\n", vpath, o.model);
    /* §2.1: verify the three pinned hashes before any forward pass. */
    const char *files[3] = { "model.safetensors", "config.json", "tokenizer.json" };
    for (int i = 0; i < 3; i++) {
        char path[1100], h[65];
        uint8_t d[32];
        snprintf(path, sizeof path, "%s/%s", o.model, files[i]);
        if (cis2_sha256_file(path, d, err)) { cis2_cli_usage_error("conform", "%s", err); goto out; }
        cis2_hex(d, 32, h);
        char what[64];
        snprintf(what, sizeof what, "%s sha256", files[i]);
        if (pf(what, strcmp(h, v[i]) == 0, h, v[i])) {
            fails++;
        }
    }
    if (fails) {
        printf("conform: FAIL: pinned artifact hash mismatch; refusing to run the model (§2.1)\n");
        rc = 1;
        goto out;
    }
    cis2_engine_opts eo;
    engine_opts(&o, &eo);
    if (cis2_cli_open("conform", o.model, &eo, &m, &e)) goto out;
    if (cis2_parse_ids(v[4], &want_ids, &nw, err)) { cis2_cli_usage_error("conform", "%s: prompt_token_ids: %s", vpath, err); goto out; }
    if (v[3]) {
        cis2_tokenizer *t;
        if (load_tokenizer(&m, &t, err)) { cis2_cli_usage_error("conform", "%s", err); goto out; }
        int erc = cis2_tokenizer_encode(t, v[3], strlen(v[3]), &ids, &n, err);
        cis2_tokenizer_free(t);
        if (erc) { cis2_cli_usage_error("conform", "%s", err); goto out; }
        char *g = cis2_format_ids(ids, n);
        fails += pf("prompt_token_ids (tokenized prompt)", strcmp(g, v[4]) == 0, g, v[4]);
        free(g);
    } else {
        ids = want_ids;
        n = nw;
        want_ids = NULL;
    }
    int gen_toks;
    if (cis2_cli_int(v[5], 1, 1000000, &gen_toks)) { cis2_cli_usage_error("conform", "%s: bad gen_toks", vpath); goto out; }
    cis2_result r1;
    cis2_gen_opts g = { gen_toks, 0, NULL, NULL };
    if (cis2_generate(e, ids, n, &g, &r1, err)) { cis2_cli_usage_error("conform", "%s", err); goto out; }
    char h[65], *gs = cis2_format_ids(r1.gen, r1.n_gen);
    fails += pf("generated_token_ids", strcmp(gs, v[6]) == 0, gs, v[6]);
    free(gs);
    cis2_hex(m.table_digest, 32, h);
    fails += pf("table_digest", strcmp(h, v[7]) == 0, h, v[7]);
    cis2_hex(m.inv_freq_digest, 32, h);
    fails += pf("inv_freq_table_digest", strcmp(h, v[8]) == 0, h, v[8]);
    cis2_hex(r1.argmax, 32, h);
    fails += pf("argmax_digest", strcmp(h, v[9]) == 0, h, v[9]);
    cis2_hex(r1.witness, 32, h);
    fails += pf("CIS2_REF", strcmp(h, v[10]) == 0, h, v[10]);
    if (!o.no_check_det) {
        int det = run_twice_check(e, ids, n, &g, &r1, err) == 0;
        printf("%s determinism: second in-process run %s (§12.4)\n", det ? "PASS" : "FAIL", det ? "identical" : err);
        fails += !det;
    }
    printf("CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=fp32\n", h, r1.n_prompt, r1.n_gen);
    cis2_result_free(&r1);
    printf("conform: %s\n", fails ? "FAIL" : "PASS: every pinned value reproduced bit for bit");
    rc = fails ? 1 : 0;
out:
    for (int k = 0; !prc && k < N_VEC_KEYS; k++) free(v[k]);
    free(ids);
    free(want_ids);
    if (e) cis2_engine_free(e);
    if (m.layers || m.st.map) cis2_model_free(&m);
    return rc;
}

/* ---------------------------------------------------------------- main */
static void usage(FILE *f)
{
    fputs("cis2 — bit-exact CIS-2 v0.3b inference\n"
          "usage:\n"
          "  cis2 run --model DIR (--prompt TEXT | --prompt-ids 1,2,3) [-n N] [--receipt FILE]\n"
          "           [--backend ref|fast] [--threads N] [--isa scalar|sse2|avx2|avx512|neon]\n"
          "           [--stop-at-eos] [--check-determinism] [--fault NAME [--fault-arg ARG]]\n"
          "  cis2 verify RECEIPT --model DIR [--backend ref|fast] [--threads N] [--isa X]\n"
          "  cis2 selftest\n"
          "  cis2 conform --model DIR [--vector FILE] [--no-check-determinism] [--backend ref|fast]\n"
          "  cis2 tokenize (--tokenizer FILE | --model DIR) TEXT   [--bench TEXTFILE]\n"
          "  cis2 detokenize (--tokenizer FILE | --model DIR) IDS\n"
          "  cis2 op OP < vector.txt\n"
          "  cis2 suite [--vectors DIR]... [--timeout SECONDS] CANDIDATE [ARG...]\n"
          "  cis2 bench --model DIR [--prompt-len P] [-n N] [--threads T] [--backend ref|fast] [--isa X]\n"
          "             [--positions 256,2048,8000]\n"
          "  cis2 trace --model DIR --prompt-ids IDS [--teacher-force IDS | -n N] -o FILE\n"
          "             [--arm NAME] [--layers 0-2,29] [--nodes a,b] [--hash-only] [--backend ref|fast]\n"
          "             [--fault NAME [--fault-arg ARG]]\n"
          "  cis2 diff A B [--exact | --tol FILE] [--brief]\n"
          "  cis2 compare --model DIR --prompt-ids IDS [--teacher-force IDS | -n N]\n"
          "               (--against TRACE | --backend ref --backend fast) [--exact | --tol FILE]\n"
          "faults (debug, --backend ref): weight-bit (--fault-arg TENSOR:INDEX:BIT), fma (--fault-arg LAYER),\n"
          "  rmsnorm-assoc, rope-offset, kv-stale (--fault-arg POS), no-ftz\n"
          "docs: README.md, docs/{tokenizer,conformance,performance,divergence,errors}.md\n",
          f);
}

int cis2_cli_main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
    const char *c = argv[1];
    int sub_argc = argc - 1;
    char **sub_argv = argv + 1;
    if (!strcmp(c, "run")) return cmd_run(sub_argc, sub_argv);
    if (!strcmp(c, "verify")) return cmd_verify(sub_argc, sub_argv);
    if (!strcmp(c, "selftest")) return cmd_selftest(sub_argc, sub_argv);
    if (!strcmp(c, "conform")) return cmd_conform(sub_argc, sub_argv);
    if (!strcmp(c, "tokenize")) return cis2_cmd_tokenize(sub_argc, sub_argv);
    if (!strcmp(c, "detokenize")) return cis2_cmd_detokenize(sub_argc, sub_argv);
    if (!strcmp(c, "op")) return cis2_cmd_op(sub_argc, sub_argv);
    if (!strcmp(c, "suite")) return cis2_cmd_suite(sub_argc, sub_argv);
    if (!strcmp(c, "bench")) return cis2_cmd_bench(sub_argc, sub_argv);
    if (!strcmp(c, "trace")) return cis2_cmd_trace(sub_argc, sub_argv);
    if (!strcmp(c, "diff")) return cis2_cmd_diff(sub_argc, sub_argv);
    if (!strcmp(c, "compare")) return cis2_cmd_compare(sub_argc, sub_argv);
    if (!strcmp(c, "help") || !strcmp(c, "--help") || !strcmp(c, "-h")) { usage(stdout); return 0; }
    if (!strcmp(c, "version") || !strcmp(c, "--version")) { printf("cis2 spec %s\n", CIS2_SPEC_VERSION); return 0; }
    return cis2_cli_usage_error(c, "unknown command (see cis2 help)");
}
