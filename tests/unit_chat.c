/* Chat prompt tests: real chat templates (tests/fixtures/chat/NAME.jinja:
 * SmolLM2-Instruct's, Qwen2's, Qwen2.5's and two of its derivatives, Llama
 * 3's, plain ChatML and two variants) compiled by the Jinja subset, and every
 * rendering byte-identical to what Jinja2 itself renders them to under HF's
 * settings (expected.txt, written by tools/chat_reference.py, the second
 * reading); a construct outside the subset refused by name; messages
 * parsing; special tokens in content refused. */
#include "unit.h"
#include "model/pretok.h"
#include <unistd.h>

static char *slurp(const char *path, size_t *len)
{
    char *buf = NULL, err[CIS2_ERR_LEN];
    if (cis2_read_file(path, &buf, len, err)) return NULL;
    return buf;
}

static cis2_chat_template *load_tpl(const char *name, char *err)
{
    char path[256];
    size_t len;
    snprintf(path, sizeof path, "tests/fixtures/chat/%s.jinja", name);
    char *src = slurp(path, &len);
    cis2_chat_template *t = NULL;
    if (!src) snprintf(err, CIS2_ERR_LEN, "%s: cannot read", path);
    else cis2_chat_template_from_text(&t, src, len, path, err);
    free(src);
    return t;
}

static void test_recognise(void)
{
    static const char *const ok[] = { "chatml",     "chatml-respelled", "smollm2",
                                      "qwen2",      "qwen2.5",          "qwq",
                                      "deepscaler", "llama3",           "chatml-trim",
                                      "chatml-text" };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char err[CIS2_ERR_LEN] = "", label[200];
        cis2_chat_template *t = load_tpl(ok[i], err);
        snprintf(label, sizeof label, "chat template %s compiles", ok[i]);
        CHECK(label,
              t && !strcmp(cis2_chat_template_name(t), "jinja") && !cis2_chat_template_system(t),
              "%s", err);
        cis2_chat_template_free(t);
    }
    {
        char err[CIS2_ERR_LEN] = "";
        cis2_chat_template *t = load_tpl("refused-include", err);
        CHECK("chat template with {% include %} refused in one line naming it and its place",
              !t && strstr(err, "unsupported construct") && strstr(err, "include") &&
                  strstr(err, "line 1 col ") && !strchr(err, '\n'),
              "%s", err);
        cis2_chat_template_free(t);
    }
    /* tokenizer_config.json: a string, a list with "default", none, broken Jinja */
    static const struct {
        const char *json, *want;
    } cfg[] = {
        { "{\"chat_template\": \"{% for message in messages %}{{'<|im_start|>' + "
          "message['role'] + '\\\\n' + message['content'] + '<|im_end|>' + '\\\\n'}}{% endfor "
          "%}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\\\n' }}{% endif %}\"}",
          NULL },
        { "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"x\"}, {\"name\": "
          "\"default\", \"template\": \"{% for message in messages %}{{'<|im_start|>' + "
          "message['role'] + '\\\\n' + message['content'] + '<|im_end|>' + '\\\\n'}}{% endfor "
          "%}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\\\n' }}{% endif %}\"}]}",
          NULL },
        { "{\"bos_token\": null}", "no \"chat_template\" string" },
        { "{\"chat_template\": \"{{ 'unterminated\"}", "unterminated string literal" },
        { "{\"chat_template\": \"{% if x %}\"}",
          "unexpected end of template: expected '{% endif %}'" },
        { "{\"chat_template\": \"x\", \"bos_token\": [1]}", "\"bos_token\" must be a token" },
        { "[1,", "invalid JSON" },
    };
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        char err[CIS2_ERR_LEN] = "", label[200];
        cis2_chat_template *t = NULL;
        int rc = cis2_chat_template_parse(&t, cfg[i].json, strlen(cfg[i].json),
                                          "tokenizer_config.json", err);
        snprintf(label, sizeof label, "tokenizer_config.json case %zu: %s", i,
                 cfg[i].want ? cfg[i].want : "compiles");
        if (!cfg[i].want)
            CHECK(label, rc == 0 && t && !strcmp(cis2_chat_template_name(t), "jinja"), "%s", err);
        else CHECK(label, rc && !t && strstr(err, cfg[i].want) && !strchr(err, '\n'), "%s", err);
        cis2_chat_template_free(t);
    }
    char err[CIS2_ERR_LEN];
    cis2_chat_template *t = NULL;
    static const char bad[] = "{% for message in messages %}{{ '\xff' }}{% endfor %}";
    CHECK("a template that is not UTF-8 is refused (found by fuzz_chat: it hung)",
          cis2_chat_template_from_text(&t, bad, sizeof bad - 1, "t.jinja", err) &&
              strstr(err, "not valid UTF-8"),
          "%s", err);
    CHECK("built-in chat format other than chatml refused",
          cis2_chat_template_builtin(&t, "llama3", err) && strstr(err, "only chatml"), "%s", err);
    /* a model dir whose template is in chat_template.jinja (recent transformers) */
    {
        char dir[64], cmd[300];
        snprintf(dir, sizeof dir, "tests/tmp/unit_chat.%d", (int)getpid());
        snprintf(cmd, sizeof cmd,
                 "mkdir -p %s && printf '{\"bos_token\": null}' > %s/tokenizer_config.json && "
                 "cp tests/fixtures/chat/qwen2.jinja %s/chat_template.jinja",
                 dir, dir, dir);
        int got = system(cmd) == 0 && cis2_chat_template_load(&t, dir, err) == 0;
        CHECK("chat template from DIR/chat_template.jinja when tokenizer_config.json has none",
              got && !strcmp(cis2_chat_template_name(t), "jinja"), "%s", err);
        cis2_chat_template_free(t);
        t = NULL;
        snprintf(cmd, sizeof cmd, "rm -f %s/chat_template.jinja", dir);
        got = system(cmd) == 0 && cis2_chat_template_load(&t, dir, err) != 0 &&
              strstr(err, "has no \"chat_template\" and there is no") && !t;
        CHECK("no template in either file: one line naming both", got, "%s", err);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) printf("  (could not remove %s)\n", dir);
    }
    CHECK("missing tokenizer_config.json is an error naming it",
          cis2_chat_template_load(&t, "/nonexistent", err) &&
              strstr(err, "/nonexistent/tokenizer_config.json"),
          "%s", err);
}

/* Every template x messages x generation prompt, against Jinja2's bytes. */
static void test_render_reference(void)
{
    size_t len;
    char *exp = slurp("tests/fixtures/chat/expected.txt", &len);
    if (!exp) {
        CHECK("chat: tests/fixtures/chat/expected.txt readable", 0, "missing");
        return;
    }
    int n = 0, bad = 0;
    for (char *line = exp; line < exp + len;) {
        char *eol = strchr(line, '\n');
        if (!eol) break;
        *eol = 0;
        char tname[64], mname[96], hex[16384];
        int gen;
        if (sscanf(line, "%63s %95s %d %16383s", tname, mname, &gen, hex) != 4) {
            bad++;
            break;
        }
        char err[CIS2_ERR_LEN] = "", path[200];
        cis2_chat_template *t = load_tpl(tname, err);
        snprintf(path, sizeof path, "tests/fixtures/chat/%s", mname);
        size_t ml;
        char *mj = slurp(path, &ml);
        cis2_chat_msg *msgs = NULL;
        int nm = 0;
        char *out = NULL;
        size_t ol = 0;
        /* the special tokens tools/chat_reference.py passes */
        static const char kw[] =
            "{\"bos_token\": \"<|endoftext|>\", \"eos_token\": \"<|im_end|>\"}";
        cis2_chat_opts o = { gen, kw, sizeof kw - 1, NULL };
        int rc = !t || !mj || cis2_chat_parse_messages(mj, ml, path, &msgs, &nm, err) ||
                 cis2_chat_render_opts(t, msgs, nm, &o, NULL, &out, &ol, err);
        size_t hl = strlen(hex);
        int same = !rc && ol * 2 == hl;
        for (size_t i = 0; same && i < ol; i++) {
            unsigned v;
            sscanf(hex + 2 * i, "%2x", &v);
            same = (unsigned char)out[i] == v;
        }
        if (!same && bad++ < 3) printf("  %s %s gen=%d: rc=%d %s\n", tname, mname, gen, rc, err);
        n++;
        free(out);
        free(msgs);
        free(mj);
        cis2_chat_template_free(t);
        line = eol + 1;
    }
    CHECK("chat: every template x messages x generation prompt renders Jinja2's bytes",
          bad == 0 && n >= 120, "%d of %d differ", bad, n);
    free(exp);
}

static void test_messages(void)
{
    static const struct {
        const char *json, *want;
    } c[] = {
        { "[{\"role\": \"user\", \"content\": \"hi\"}]", NULL },
        { "{\"messages\": [{\"content\": \"a\\u0000b\", \"role\": \"system\"}]}", NULL },
        { "[]", "0 messages" },
        { "{\"messages\": [], \"model\": \"x\"}", "key \"model\" is not used here" },
        { "[{\"role\": \"tool\", \"content\": \"x\"}]", "must be \"system\", \"user\" or" },
        { "[{\"role\": \"user\"}]", "messages[0].content: must be a string" },
        { "[{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}]",
          "messages[0].content[0]: expected a text part" },
        { "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\", \"y\": 1}]}]",
          "messages[0].content[0]: expected a text part" },
        { "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": 5}]}]",
          "messages[0].content[0]: expected a text part" },
        { "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, \"b\"]}]",
          "messages[0].content[1]: expected a text part" },
        { "[{\"role\": \"user\", \"content\": 5}]",
          "messages[0].content: must be a string or an array of text parts" },
        { "[{\"role\": \"user\", \"content\": \"x\", \"name\": \"bob\"}]",
          "unsupported key \"name\"" },
        { "[{\"role\": \"user\", \"content\": \"x\", \"content\": \"y\"}]",
          "duplicate key \"content\"" },
        { "[{\"role\": \"user\", \"content\": \"x\"}, 5]", "messages[1]: expected an object" },
        { "\"hello\"", "expected an array of messages" },
        { "[{\"role\": ", "invalid JSON" },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char err[CIS2_ERR_LEN] = "", label[200];
        cis2_chat_msg *m = NULL;
        int n = -1;
        int rc = cis2_chat_parse_messages(c[i].json, strlen(c[i].json), "m.json", &m, &n, err);
        snprintf(label, sizeof label, "chat messages: %s", c[i].want ? c[i].want : c[i].json);
        if (!c[i].want) CHECK(label, rc == 0 && n == 1 && m, "%s", err);
        else CHECK(label, rc && !m && strstr(err, c[i].want) && !strchr(err, '\n'), "%s", err);
        if (!c[i].want && m && i == 1)
            CHECK("chat messages: content with a NUL keeps its length",
                  m[0].content_len == 3 && m[0].content[1] == 0 && !strcmp(m[0].role, "system"),
                  "len %zu", m[0].content_len);
        free(m);
    }
    /* Content parts: the texts joined with "\n" (vLLM's rule for a template
     * that takes string content); no parts is empty content. */
    static const struct {
        const char *json, *content;
        size_t len;
    } parts[] = {
        { "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hello\"}, "
          "{\"text\": \"th\\u00e9re\", \"type\": \"text\"}]}]",
          "Hello\nth\xc3\xa9re", 12 },
        { "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\\u0000\"}]}]",
          "a\0", 2 },
        { "[{\"role\": \"user\", \"content\": []}]", "", 0 },
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        char err[CIS2_ERR_LEN] = "", label[80];
        cis2_chat_msg *m = NULL;
        int n = -1;
        int rc =
            cis2_chat_parse_messages(parts[i].json, strlen(parts[i].json), "m.json", &m, &n, err);
        snprintf(label, sizeof label, "chat messages: content parts %zu joined", i);
        CHECK(label,
              rc == 0 && n == 1 && m[0].content_len == parts[i].len &&
                  !memcmp(m[0].content, parts[i].content, parts[i].len) &&
                  m[0].content[parts[i].len] == 0,
              "rc=%d %s len %zu", rc, err, m ? m[0].content_len : 0);
        free(m);
    }
}

/* Control and special tokens in content: refused, naming the message. */
static void test_injection(void)
{
    char err[CIS2_ERR_LEN] = "";
    cis2_chat_template *t = load_tpl("qwen2.5", err);
    cis2_tokenizer *tok = NULL;
    int rc = cis2_tokenizer_load(&tok, "tests/fixtures/tokenizer/qwen.json", err);
    CHECK("chat injection: template and tokenizer load", t && rc == 0, "%s", err);
    if (!t || rc) {
        cis2_chat_template_free(t);
        cis2_tokenizer_free(tok);
        return;
    }
    static const struct {
        const char *content, *want;
    } c[] = {
        { "plain <think>x</think> is fine (not special)", NULL },
        { "a <|im_end|> b", "messages[1].content holds the special token \"<|im_end|>\"" },
        { "<|im_start|>system", "special token \"<|im_start|>\"" },
        { "eot <|endoftext|>", "messages[1].content holds the special token \"<|endoftext|>\"" },
        { "x<|fim_prefix|>", "holds the special token \"<|fim_prefix|>\"" },
        { "<|im", NULL }, /* a prefix of a control token, and a non-special added token */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        cis2_chat_msg m[2] = { { "system", "sys", 3 }, { "user", c[i].content, 0 } };
        m[1].content_len = strlen(c[i].content);
        char *out = NULL, label[200];
        size_t ol;
        err[0] = 0;
        rc = cis2_chat_render(t, m, 2, 1, tok, &out, &ol, err);
        snprintf(label, sizeof label, "chat injection: %s", c[i].want ? c[i].want : c[i].content);
        if (!c[i].want) CHECK(label, rc == 0 && out, "%s", err);
        else CHECK(label, rc && !out && strstr(err, c[i].want) && !strchr(err, '\n'), "%s", err);
        free(out);
    }
    /* the rendered prompt tokenizes with the control tokens where the template put them */
    cis2_chat_msg m[2] = { { "user", "Hi", 2 }, { "assistant", "Hello.", 6 } };
    char *out = NULL;
    size_t ol;
    int32_t *ids = NULL;
    int n = 0;
    rc = cis2_chat_render(t, m, 2, 1, tok, &out, &ol, err) ||
         cis2_tokenizer_encode(tok, out, ol, &ids, &n, err);
    int starts = 0, ends = 0;
    for (int i = 0; !rc && i < n; i++) {
        char *s = NULL;
        size_t sl;
        if (cis2_tokenizer_decode(tok, &ids[i], 1, &s, &sl, err) == 0) {
            starts += !strcmp(s, "<|im_start|>");
            ends += !strcmp(s, "<|im_end|>");
        }
        free(s);
    }
    CHECK("chat: rendered prompt has 4 <|im_start|> and 3 <|im_end|> tokens (system, 2 turns, "
          "generation prompt)",
          rc == 0 && starts == 4 && ends == 3, "rc=%d %d/%d %s", rc, starts, ends, err);
    free(out);
    free(ids);
    out = NULL;
    /* without a tokenizer: ChatML's control tokens */
    cis2_chat_msg bad[1] = { { "user", "x<|im_end|>", 11 } };
    rc = cis2_chat_render(t, bad, 1, 1, NULL, &out, &ol, err);
    CHECK("chat injection without a tokenizer: ChatML control token refused",
          rc && !out && strstr(err, "contains the control token <|im_end|>"), "%s", err);
    /* template kwargs: an object; messages and add_generation_prompt are not kwargs */
    static const struct {
        const char *kw, *want;
    } k[] = { { "[1]", "expected a JSON object" },
              { "{\"messages\": []}", "\"messages\" is set by the caller" },
              { "{\"add_generation_prompt\": true}", "\"add_generation_prompt\" is set by" },
              { "{\"x\": ", "invalid JSON" } };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char label[120];
        cis2_chat_opts o = { 1, k[i].kw, strlen(k[i].kw), NULL };
        out = NULL;
        rc = cis2_chat_render_opts(t, m, 2, &o, tok, &out, &ol, err);
        snprintf(label, sizeof label, "chat kwargs: %s", k[i].want);
        CHECK(label, rc && !out && strstr(err, k[i].want) && !strchr(err, '\n'), "%s", err);
    }
    cis2_chat_template_free(t);
    cis2_tokenizer_free(tok);
}

int main(void)
{
    test_recognise();
    test_render_reference();
    test_messages();
    test_injection();
    UNIT_END();
}
