/* Unit tests of what cis2 batch / merge / verify-batch share (docs/scale.md):
 * the streaming JSONL reader across buffer refills, over-long and torn lines;
 * the result-line format and its read-back; the receipt check in two halves
 * against the one-call cis2_receipt_verify. */
#include "unit.h"
#include "cli/batch.h"
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int tmpfile_with(const char *data, size_t n, char *path)
{
    strcpy(path, "/tmp/cis2-unit-batch.XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    if (write(fd, data, n) != (ssize_t)n) return -1;
    lseek(fd, 0, SEEK_SET);
    return fd;
}

static void reader(void)
{
    /* short lines, a line over the limit, a torn tail; the limit is 10 bytes */
    const char *data = "a\nxxxxxxxxxxxxxxxxxxxxxxxxx\nbb\n\ntail-no-newline";
    char path[64], err[CIS2_ERR_LEN];
    int fd = tmpfile_with(data, strlen(data), path);
    cis2_jsonl r;
    cis2_jsonl_init(&r, fd, path);
    r.max_line = 10;
    const char *l;
    size_t n;
    int c, k, ok = 1;
    k = cis2_jsonl_next(&r, &l, &n, &c, err);
    ok &= k == 1 && l && n == 1 && l[0] == 'a' && c;
    k = cis2_jsonl_next(&r, &l, &n, &c, err);
    ok &= k == 1 && !l && n == 25 && c;
    k = cis2_jsonl_next(&r, &l, &n, &c, err);
    ok &= k == 1 && l && n == 2 && !memcmp(l, "bb", 2) && c && r.good == 31 && r.lineno == 3;
    k = cis2_jsonl_next(&r, &l, &n, &c, err);
    ok &= k == 1 && l && n == 0 && c;
    k = cis2_jsonl_next(&r, &l, &n, &c, err);
    ok &= k == 1 && !l && n == 15 && !c && r.good == 32;
    ok &= cis2_jsonl_next(&r, &l, &n, &c, err) == 0;
    CHECK("jsonl.short-long-empty-torn", ok, "line %ld", r.lineno);
    cis2_jsonl_free(&r);
    close(fd);
    unlink(path);

    /* lines far longer than one read: 3 MiB kept whole under a 4 MiB limit,
     * 5 MiB skipped, and the next line still read from the right place */
    size_t big = (3u << 20) + 7, huge = (5u << 20) + 3, tot = big + huge + 8;
    char *d = malloc(tot);
    memset(d, 'y', tot);
    d[big] = '\n';
    d[big + 1 + huge] = '\n';
    memcpy(d + big + 2 + huge, "{\"k\":1}", 6);
    tot = big + 2 + huge + 6;
    fd = tmpfile_with(d, tot, path);
    cis2_jsonl_init(&r, fd, path);
    r.max_line = 4u << 20;
    ok = 1;
    k = cis2_jsonl_next(&r, &l, &n, &c, err);
    ok &= k == 1 && l && n == big && l[0] == 'y' && l[big - 1] == 'y' && c;
    k = cis2_jsonl_next(&r, &l, &n, &c, err);
    ok &= k == 1 && !l && n == huge && c && r.good == big + huge + 2;
    k = cis2_jsonl_next(&r, &l, &n, &c, err);
    ok &= k == 1 && l && n == 6 && !memcmp(l, "{\"k\":1", 6) && !c;
    ok &= cis2_jsonl_next(&r, &l, &n, &c, err) == 0 && r.lineno == 3;
    CHECK("jsonl.lines-across-refills", ok, "line %ld n=%zu", r.lineno, n);
    cis2_jsonl_free(&r);
    close(fd);
    unlink(path);
    free(d);
}

static void lines(void)
{
    size_t n;
    char err[CIS2_ERR_LEN];
    char *e = cis2_result_error_line(3, 40, "a\"\n\xff", 4, "bad \x01", &n);
    CHECK("result-line.error-object",
          e && !strcmp(e, "{\"line\":3,\"lines\":40,\"id\":\"a\\\"\\n\\ufffd\",\"error\":\"bad "
                          "\\u0001\"}\n"),
          "%s", e ? e : "NULL");
    cis2_line_head h;
    int rc = cis2_line_head_parse(e, n - 1, &h, err);
    CHECK("result-line.head-read-back",
          rc == 0 && h.line == 3 && h.lines == 40 && h.is_error && h.id_len == 6 &&
              !memcmp(h.id, "a\"\n\xef\xbf\xbd", 6),
          "rc=%d %s", rc, err);
    cis2_line_head_free(&h);
    free(e);
    e = cis2_result_error_line(7, 9, NULL, 0, "x", &n);
    rc = cis2_line_head_parse(e, n - 1, &h, err);
    CHECK("result-line.null-id", rc == 0 && !h.id && h.line == 7, "rc=%d", rc);
    cis2_line_head_free(&h);
    free(e);
    static const char *bad[] = { "{\"line\":0,\"lines\":1,\"id\":null}",
                                 "{\"line\":2,\"lines\":1,\"id\":null}",
                                 "{\"line\":1,\"lines\":1,\"id\":5}",
                                 "{\"line\":1,\"line\":1,\"lines\":1,\"id\":null}",
                                 "{\"line\":1.0,\"lines\":1,\"id\":null}",
                                 "[1]",
                                 "{" };
    int nbad = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nbad += cis2_line_head_parse(bad[i], strlen(bad[i]), &h, err) != 0;
        cis2_line_head_free(&h);
    }
    CHECK("result-line.head-rejects", nbad == (int)(sizeof bad / sizeof bad[0]), "%d rejected",
          nbad);
}

/* begin + a run through the seq API + finish gives cis2_receipt_verify's verdict. */
static void verify_halves(void)
{
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], cmd[1024];
    snprintf(dir, sizeof dir, "%s/unit_batch_model", tmp);
    snprintf(cmd, sizeof cmd, "python3 tools/make_model.py %s >/dev/null", dir);
    cis2_model *m;
    cis2_engine *e;
    cis2_engine_opts eo = { 0 };
    eo.max_seqs = 2;
    if (system(cmd) != 0 || cis2_cli_open("unit", dir, &eo, &m, &e)) {
        CHECK("verify.halves-equal-whole", 0, "make_model.py or loading %s failed", dir);
        return;
    }
    const int32_t ids[3] = { 5, 17, 42 };
    cis2_gen_opts g = { 0 };
    g.n_gen = 4;
    cis2_result r;
    char err[CIS2_ERR_LEN];
    int ok = cis2_generate(e, ids, 3, &g, &r, err) == 0;
    cis2_receipt rc;
    char *pb = NULL;
    size_t pl = 0; /* prompt-hex: the bytes the prompt ids decode to */
    ok &= cis2_receipt_prompt_bytes(cis2_model_tokenizer(m, NULL), ids, 3, &pb, &pl, err) == 0;
    cis2_receipt_from_run(&rc, m, &r, (const uint8_t *)pb, pl);
    for (int flip = 0; flip < 2 && ok; flip++) {
        rc.witness_digest[31] ^= (uint8_t)flip;
        cis2_verdict whole, half;
        cis2_gen_opts hg;
        int run = 0, seq;
        ok &= cis2_receipt_verify(e, &rc, NULL, NULL, &whole, err) == 0;
        ok &= cis2_receipt_verify_begin(m, &rc, &half, &hg, &run, err) == 0 && run;
        ok &= cis2_seq_submit(e, rc.prompt_ids, rc.n_prompt, &hg, &seq, err) == 0;
        while (ok && !cis2_seq_done(e, seq)) ok &= cis2_engine_step(e, err) == 0;
        cis2_result hr;
        ok &= cis2_seq_take(e, seq, &hr, err) == 0;
        ok &= cis2_receipt_verify_finish(&rc, &hr, &half, err) == 0;
        ok &= whole.n_fields == half.n_fields && whole.mismatches == half.mismatches &&
              whole.mismatches == flip;
        for (int i = 0; ok && i < whole.n_fields; i++)
            ok &= !strcmp(whole.fields[i].name, half.fields[i].name) &&
                  whole.fields[i].status == half.fields[i].status &&
                  !strcmp(whole.fields[i].recomputed, half.fields[i].recomputed);
        cis2_verdict_free(&whole);
        cis2_verdict_free(&half);
    }
    CHECK("verify.halves-equal-whole", ok, "%s", err);
    free(pb);
    cis2_result_free(&r);
    cis2_engine_free(e);
    cis2_model_free(m);
}

/* Memory running out is told from a bad line by the return code, -1, never
 * by reading the message (cis2 batch stops on it instead of writing an error
 * line): a child process, its address space capped 64 MiB above what it
 * uses, parses lines that need more: 4 M ids (the JSON nodes) and a 12 MiB
 * prompt (the encoder's work arrays). */
static char *repeat(const char *head, const char *unit, size_t n, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + n * ul + tl + 1);
    if (!s) return NULL;
    memcpy(s, head, hl);
    for (size_t i = 0; i < n; i++) memcpy(s + hl + i * ul, unit, ul);
    memcpy(s + hl + n * ul, tail, tl + 1);
    return s;
}

static void oom_codes(void)
{
    const char *tmp = getenv("TESTTMP") ? getenv("TESTTMP") : "tests/tmp";
    char dir[512], err[CIS2_ERR_LEN];
    snprintf(dir, sizeof dir, "%s/unit_batch_model", tmp); /* made by verify_halves */
    cis2_model *m = NULL;
    char *ids = repeat("{\"id\":\"x\",\"prompt_ids\":[", "1,", 4u << 20, "1]");
    char *text = repeat("{\"id\":\"x\",\"prompt\":\"", "a ", 6u << 20, "\"}");
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld", &pages) != 1) pages = 0;
    if (f) fclose(f);
    size_t vm = (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
    const char *names[] = { "oom.json-line-parse-returns-minus-1",
                            "oom.request-ids-returns-minus-1",
                            "oom.request-prompt-encode-returns-minus-1" };
    if (!ids || !text || cis2_model_open(&m, dir, NULL, err) || !cis2_model_tokenizer(m, err)) {
        for (int i = 0; i < 3; i++) CHECK(names[i], 0, "setup: %s", err);
        goto out;
    }
    if (!vm || vm > ((size_t)8 << 30)) { /* a sanitizer's shadow: no cap can be set */
        for (int i = 0; i < 3; i++) SKIP(names[i], "address space %zu MiB", vm >> 20);
        goto out;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = { vm + (64u << 20), vm + (64u << 20) };
        int bits = 0;
        cis2_request_defaults df = { 16, 0, NULL, "no template" };
        cis2_request rq;
        json_doc d;
        const char *arr = strchr(ids, '['); /* the array alone */
        /* the cap must hold before anything is judged by it: under an
         * emulator (qemu-user, the aarch64 leg) it limits the emulator, and a
         * 256 MiB block is still granted */
        void *probe = NULL;
        if (setrlimit(RLIMIT_AS, &rl) != 0 || (probe = malloc((size_t)256 << 20)) != NULL) {
            free(probe);
            _exit(64);
        }
        {
            bits |= (cis2_json_line_parse(&d, arr, strlen(arr) - 1, err) == -1) << 0;
            bits |= (cis2_request_parse(ids, strlen(ids), m, &df, &rq, err) == -1) << 1;
            cis2_request_free(&rq);
            bits |= (cis2_request_parse(text, strlen(text), m, &df, &rq, err) == -1) << 2;
        }
        _exit(bits);
    }
    int st = 0;
    int bits = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : 0;
    for (int i = 0; i < 3; i++)
        if (bits == 64) SKIP(names[i], "the address-space cap is not enforced here (an emulator?)");
        else CHECK(names[i], bits >> i & 1, "exit status %d", bits);
out:
    cis2_model_free(m);
    free(ids);
    free(text);
}

int main(void)
{
    reader();
    lines();
    verify_halves();
    oom_codes();
    UNIT_END();
}
