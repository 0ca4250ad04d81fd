/* The Jinja subset (src/model/jinja_*.c) against Jinja2 itself: every case
 * of tests/fixtures/jinja/cases.jsonl (a template, its variables, and what
 * Jinja2 3.1 under transformers' settings renders, or that it fails;
 * written by tools/jinja_cases.py, the second reading) renders those exact
 * bytes, or is refused / fails with one line naming line and column.
 *
 * With arguments it is the renderer of tests/t_chat_template.sh:
 *   unit_jinja --chat CASES  lines "DIR<TAB>MESSAGES.json<TAB>GEN<TAB>KWARGS<TAB>DATE"
 * prints per case the rendering's hex and the prompt ids of DIR/tokenizer.json
 * ("HEX IDS"), or "ERR message", through the public chat API. */
#include "unit.h"
#include "model/jinja.h"
#include "core/json.h"

static char *slurp(const char *path, size_t *len)
{
    char *buf = NULL, err[CIS2_ERR_LEN];
    if (cis2_read_file(path, &buf, len, err)) return NULL;
    return buf;
}

static int chat_cases(const char *path)
{
    size_t len;
    char *all = slurp(path, &len);
    if (!all) {
        fprintf(stderr, "unit_jinja: cannot read %s\n", path);
        return 2;
    }
    /* the template and tokenizer of the previous line's DIR, kept: cases
     * come grouped by model, and a real tokenizer.json takes a while to load */
    char dir[1024] = "", lerr[CIS2_ERR_LEN] = "";
    cis2_chat_template *t = NULL;
    cis2_tokenizer *tok = NULL;
    int lrc = 1;
    for (char *line = all; line < all + len;) {
        char *eol = strchr(line, '\n');
        if (!eol) break;
        *eol = 0;
        char *f[5] = { line, NULL, NULL, NULL, NULL };
        for (int i = 1; i < 5; i++) {
            f[i] = f[i - 1] ? strchr(f[i - 1], '\t') : NULL;
            if (f[i]) *f[i]++ = 0;
        }
        char err[CIS2_ERR_LEN] = "";
        cis2_chat_msg *msgs = NULL;
        char *mj = NULL, *out = NULL, tp[1100];
        size_t ml = 0, ol = 0;
        int nm = 0;
        int32_t *ids = NULL;
        int nids = 0;
        if (strcmp(dir, f[0])) {
            cis2_chat_template_free(t);
            cis2_tokenizer_free(tok);
            t = NULL, tok = NULL;
            snprintf(dir, sizeof dir, "%s", f[0]);
            snprintf(tp, sizeof tp, "%s/tokenizer.json", f[0]);
            lrc = cis2_chat_template_load(&t, f[0], lerr);
            FILE *tf = fopen(tp, "r");
            if (tf) fclose(tf);
            if (!lrc && tf) lrc = cis2_tokenizer_load(&tok, tp, lerr);
        }
        int rc = !f[4] ? (snprintf(err, sizeof err, "bad case line"), 1) : 0;
        if (!rc && lrc) rc = 1, snprintf(err, sizeof err, "%s", lerr);
        if (!rc && !(mj = slurp(f[1], &ml)))
            rc = 1, snprintf(err, sizeof err, "cannot read %s", f[1]);
        if (!rc) rc = cis2_chat_parse_messages(mj, ml, f[1], &msgs, &nm, err);
        if (!rc) {
            int kw = strcmp(f[3], "-") != 0, day = strcmp(f[4], "-") != 0;
            cis2_chat_opts o = { atoi(f[2]), kw ? f[3] : NULL, kw ? strlen(f[3]) : 0,
                                 day ? f[4] : NULL };
            rc = cis2_chat_render_opts(t, msgs, nm, &o, tok, &out, &ol, err);
        }
        if (!rc && tok) rc = cis2_tokenizer_encode(tok, out, ol, &ids, &nids, err);
        if (rc) printf("ERR %s\n", err);
        else {
            for (size_t i = 0; i < ol; i++) printf("%02x", (unsigned char)out[i]);
            printf(" ");
            for (int i = 0; i < nids; i++) printf("%s%d", i ? "," : "", ids[i]);
            printf("%s\n", tok ? "" : "-");
        }
        free(ids);
        free(out);
        free(msgs);
        free(mj);
        line = eol + 1;
    }
    cis2_tokenizer_free(tok);
    cis2_chat_template_free(t);
    free(all);
    return 0;
}

/* Each line: {"name", "template", "vars", "date", "out"} or {..., "error"}
 * (Jinja2's exception class) or {..., "refused"} (a construct the subset
 * refuses: its message must name it). */
static void test_cases(void)
{
    size_t len;
    char *all = slurp("tests/fixtures/jinja/cases.jsonl", &len);
    if (!all) {
        CHECK("jinja: tests/fixtures/jinja/cases.jsonl readable", 0, "missing");
        return;
    }
    int n = 0, bad = 0;
    for (char *line = all; line < all + len;) {
        char *eol = strchr(line, '\n');
        if (!eol) break;
        json_doc d;
        char err[CIS2_ERR_LEN];
        if (json_parse(&d, line, (size_t)(eol - line), "cases.jsonl", err)) {
            CHECK("jinja: cases.jsonl parses", 0, "%s", err);
            break;
        }
        uint32_t nm = json_get(&d, 0, "name", NULL), tp = json_get(&d, 0, "template", NULL);
        uint32_t vr = json_get(&d, 0, "vars", NULL), dt = json_get(&d, 0, "date", NULL);
        uint32_t want = json_get(&d, 0, "out", NULL), er = json_get(&d, 0, "error", NULL);
        uint32_t rf = json_get(&d, 0, "refused", NULL);
        size_t tl, wl = 0, rl = 0, nl;
        char *name = json_str_dup(&d, nm, &nl), *src = json_str_dup(&d, tp, &tl);
        char *w = want != JSON_NONE ? json_str_dup(&d, want, &wl) : NULL;
        char *refused = rf != JSON_NONE ? json_str_dup(&d, rf, &rl) : NULL;
        char *date =
            dt != JSON_NONE && d.nodes[dt].type == JSON_STRING ? json_str_dup(&d, dt, NULL) : NULL;
        jinja_tpl *t = NULL;
        char *out = NULL, label[300];
        size_t ol = 0;
        err[0] = 0;
        int rc = jinja_compile(&t, src, tl, err);
        if (!rc)
            rc = jinja_render(t, line + d.nodes[vr].start, d.nodes[vr].len, date, &out, &ol, err);
        int ok;
        if (w) ok = !rc && ol == wl && !memcmp(out, w, wl);
        else if (refused)
            ok = rc && strstr(err, "unsupported construct") && strstr(err, refused) &&
                 strstr(err, "line ");
        else ok = rc && er != JSON_NONE;
        ok = ok && !strchr(err, '\n');
        snprintf(label, sizeof label, "jinja %s: %s", name,
                 w         ? "renders Jinja2's bytes"
                 : refused ? "refused naming the construct"
                           : "fails as Jinja2 does");
        CHECK(label, ok, "rc=%d err=%s out=[%.*s]", rc, err, (int)(ol > 200 ? 200 : ol),
              out ? out : "");
        n++;
        bad += !ok;
        free(out);
        jinja_free(t);
        free(name), free(src), free(w), free(refused), free(date);
        json_free(&d);
        line = eol + 1;
    }
    CHECK("jinja: the case table has cases, all as Jinja2", n >= 100 && bad == 0,
          "%d cases, %d differ", n, bad);
    free(all);
}

/* Hostile templates end with an error, never hang or crash. */
static void test_limits(void)
{
    static const struct {
        const char *tpl, *want;
    } c[] = {
        { "{% set r = range(100000) %}{% for a in r %}{% for b in r %}{% endfor %}{% endfor %}",
          "steps" },
        { "{% for a in range(100000) %}{% set r = range(100000) %}{% endfor %}", "MiB of memory" },
        { "{% macro m(n) %}{{ m(n) }}{% endmacro %}{{ m(1) }}", "nested deeper" },
        { "{% set s = 'xxxxxxxxxxxxxxxx' %}{% for i in range(100000) %}{{ s * 1000 }}{% endfor %}",
          "longer than" },
        { "{{ range(1000000) }}", "100000" },
        { "{{ 'x' * 100000000000 }}", "repetition longer" },

    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char err[CIS2_ERR_LEN] = "", label[120];
        jinja_tpl *t = NULL;
        char *out = NULL;
        size_t ol;
        int rc = jinja_compile(&t, c[i].tpl, strlen(c[i].tpl), err);
        if (!rc) rc = jinja_render(t, "{}", 2, NULL, &out, &ol, err);
        snprintf(label, sizeof label, "jinja limit: %s", c[i].want);
        CHECK(label, rc && !out && strstr(err, c[i].want), "rc=%d %s", rc, err);
        jinja_free(t);
    }
    /* 300 nested parentheses: a parse-depth error, not a stack overflow */
    char deep[700];
    int k = 0;
    k += sprintf(deep + k, "{{ ");
    for (int i = 0; i < 300; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 300; i++) deep[k++] = ')';
    k += sprintf(deep + k, " }}");
    char err[CIS2_ERR_LEN] = "";
    jinja_tpl *t = NULL;
    CHECK("jinja limit: nesting deeper than the parser allows",
          jinja_compile(&t, deep, (size_t)k, err) && strstr(err, "nesting deeper"), "%s", err);
    jinja_free(t);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--chat")) return chat_cases(argv[2]);
    test_cases();
    test_limits();
    UNIT_END();
}
