/* Chat prompts: OpenAI-style messages rendered with the model's own Jinja
 * chat template (tokenizer_config.json's "chat_template", or
 * chat_template.jinja) by the Jinja subset in jinja_*.c, byte for byte what
 * HF transformers' apply_chat_template renders (docs/chat_templates.md), or
 * with the built-in plain ChatML template. The template sees what
 * transformers passes it: messages, add_generation_prompt, tools and
 * documents (None), the tokenizer's special tokens (bos_token, eos_token,
 * ...) and the caller's template kwargs (enable_thinking, date_string, ...). */
#include "model/model.h"
#include "core/json.h"
#include "model/jinja.h"
#include "model/pretok.h"
#include "model/unicode_tables.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* HF's classic ChatML example: what --chat-format chatml renders. */
static const char CHATML[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* The special-token variables transformers passes (special_tokens_map): the
 * ones tokenizer_config.json sets. */
static const char *const SPECIAL_KEYS[] = { "bos_token",  "eos_token",
                                            "unk_token",  "sep_token",
                                            "pad_token",  "cls_token",
                                            "mask_token", "additional_special_tokens" };
#define NSPECIAL (sizeof SPECIAL_KEYS / sizeof SPECIAL_KEYS[0])

struct cis2_chat_template {
    const char *name; /* "chatml" (built in) or "jinja" */
    jinja_tpl *jt;
    char *special; /* ",\"bos_token\": \"...\"..." JSON members, or NULL */
};

static int cerr(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cerr(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, CIS2_ERR_LEN, fmt, ap);
    va_end(ap);
    return 1;
}

/* A compiled template; `path` names the source in messages. */
static int compile(cis2_chat_template **out, const char *src, size_t len, const char *path,
                   const char *name, char *err)
{
    char jerr[CIS2_ERR_LEN];
    *out = NULL;
    cis2_chat_template *t = calloc(1, sizeof *t);
    if (!t) return cerr(err, "out of memory");
    if (jinja_compile(&t->jt, src, len, jerr)) {
        free(t);
        return cerr(err, "%s: chat_template: %s", path, jerr);
    }
    t->name = name;
    *out = t;
    return 0;
}

static int cis2_chat_template_from_text_impl(cis2_chat_template **out, const char *src, size_t len,
                                             const char *path, char *err)
{
    return compile(out, src, len, path, "jinja", err);
}

static int cis2_chat_template_builtin_impl(cis2_chat_template **out, const char *name, char *err)
{
    *out = NULL;
    if (strcmp(name, "chatml") != 0) {
        char q[200];
        return cerr(err, "unknown chat format %s (only chatml is built in)",
                    cis2_utf8_quote(name, strlen(name), q));
    }
    return compile(out, CHATML, sizeof CHATML - 1, "chatml", "chatml", err);
}

/* tokenizer_config.json's special tokens (a string, or an AddedToken
 * object's "content"; additional_special_tokens a list of them) as JSON
 * members ",\"key\": value" into *out (malloc'd; NULL when none). */
static int special_tokens(const json_doc *d, const char *path, char **out, char *err)
{
    cis2_sb sb = { 0 };
    *out = NULL;
    for (size_t k = 0; k < NSPECIAL; k++) {
        uint32_t v = json_get(d, 0, SPECIAL_KEYS[k], NULL);
        if (v == JSON_NONE || d->nodes[v].type == JSON_NULL) continue;
        int list = d->nodes[v].type == JSON_ARRAY;
        if (list != (k == NSPECIAL - 1)) {
            cis2_sb_free(&sb);
            return cerr(err, "%s: \"%s\" must be %s", path, SPECIAL_KEYS[k],
                        list ? "a token" : "a list of tokens");
        }
        cis2_sb_printf(&sb, ", \"%s\": %s", SPECIAL_KEYS[k], list ? "[" : "");
        uint32_t e = list ? d->nodes[v].first : v;
        for (int i = 0; e != JSON_NONE; e = list ? d->nodes[e].next : JSON_NONE, i++) {
            uint32_t s = e;
            if (d->nodes[s].type == JSON_OBJECT) s = json_get(d, s, "content", NULL);
            if (s == JSON_NONE || d->nodes[s].type != JSON_STRING) {
                cis2_sb_free(&sb);
                return cerr(err, "%s: \"%s\": a token is a string or {\"content\": string}", path,
                            SPECIAL_KEYS[k]);
            }
            size_t l;
            char *str = json_str_dup(d, s, &l);
            if (!str) break;
            if (i) cis2_sb_str(&sb, ", ");
            cis2_sb_json_str(&sb, str, l);
            free(str);
        }
        if (list) cis2_sb_str(&sb, "]");
    }
    if (sb.oom) {
        cis2_sb_free(&sb);
        return cerr(err, "out of memory");
    }
    size_t l;
    *out = sb.b ? cis2_sb_take(&sb, &l) : NULL;
    return 0;
}

/* tokenizer_config.json: its "chat_template", a string or a list of
 * {"name", "template"} (the one named "default"), compiled unless
 * `override` gives the template's source; and its special tokens. Returns
 * 2 (err set) when it has no template and none is given. */
static int parse_config(cis2_chat_template **out, const char *json, size_t len, const char *path,
                        const char *override, size_t override_len, const char *override_path,
                        char *err)
{
    *out = NULL;
    json_doc d;
    if (json_parse(&d, json, len, path, err)) return 1;
    int rc = 1;
    char *special = NULL;
    if (d.nodes[0].type != JSON_OBJECT) {
        cerr(err, "%s: expected a JSON object", path);
        goto out;
    }
    if (special_tokens(&d, path, &special, err)) goto out;
    if (override) {
        rc = compile(out, override, override_len, override_path, "jinja", err);
    } else {
        uint32_t ct = json_get(&d, 0, "chat_template", NULL);
        if (ct != JSON_NONE && d.nodes[ct].type == JSON_ARRAY) {
            uint32_t pick = JSON_NONE;
            for (uint32_t e = d.nodes[ct].first; e != JSON_NONE; e = d.nodes[e].next) {
                uint32_t nm =
                    d.nodes[e].type == JSON_OBJECT ? json_get(&d, e, "name", NULL) : JSON_NONE;
                if (nm != JSON_NONE && json_str_eq(&d, nm, "default"))
                    pick = json_get(&d, e, "template", NULL);
            }
            ct = pick;
        }
        if (ct == JSON_NONE || d.nodes[ct].type != JSON_STRING) {
            cerr(err, "%s: no \"chat_template\" string", path);
            rc = 2;
            goto out;
        }
        size_t l;
        char *src = json_str_dup(&d, ct, &l);
        if (!src) {
            cerr(err, "out of memory");
            goto out;
        }
        rc = compile(out, src, l, path, "jinja", err);
        free(src);
    }
    if (!rc) {
        (*out)->special = special;
        special = NULL;
    }
out:
    free(special);
    json_free(&d);
    return rc;
}

static int cis2_chat_template_parse_impl(cis2_chat_template **out, const char *json, size_t len,
                                         const char *path, char *err)
{
    return parse_config(out, json, len, path, NULL, 0, NULL, err) ? 1 : 0;
}

/* DIR/tokenizer_config.json's template, or (when it has none, as files saved
 * by recent transformers) DIR/chat_template.jinja; or the template in the
 * file `tpl_path` when given, with DIR's special tokens. */
static int cis2_chat_template_load_impl(cis2_chat_template **out, const char *dir,
                                        const char *tpl_path, char *err)
{
    char cfg[1100], jin[1100], err2[CIS2_ERR_LEN];
    char *buf, *tbuf = NULL;
    size_t len, tlen = 0;
    *out = NULL;
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    snprintf(jin, sizeof jin, "%s/chat_template.jinja", dir);
    if (tpl_path && cis2_read_file_max(tpl_path, (size_t)16 << 20, &tbuf, &tlen, err)) return 1;
    int rc = cis2_read_file_max(cfg, (size_t)64 << 20, &buf, &len, err);
    if (!rc) {
        rc = parse_config(out, buf, len, cfg, tbuf, tlen, tpl_path, err);
        free(buf);
        free(tbuf);
        if (rc != 2) return rc;
    } else {
        /* no tokenizer_config.json: the template alone (the given file, else
         * chat_template.jinja), with no special tokens; neither: err is
         * tokenizer_config.json's own problem */
        if (tpl_path) rc = compile(out, tbuf, tlen, tpl_path, "jinja", err);
        else if (!cis2_read_file_max(jin, (size_t)16 << 20, &buf, &len, err2)) {
            rc = compile(out, buf, len, jin, "jinja", err);
            free(buf);
        }
        free(tbuf);
        return rc;
    }
    if (cis2_read_file_max(jin, (size_t)16 << 20, &buf, &len, err2)) {
        cerr(err, "%s has no \"chat_template\" and there is no %s", cfg, jin);
        return 1;
    }
    /* the special tokens of tokenizer_config.json with chat_template.jinja */
    rc = cis2_read_file_max(cfg, (size_t)64 << 20, &tbuf, &tlen, err);
    if (!rc) rc = parse_config(out, tbuf, tlen, cfg, buf, len, jin, err);
    free(tbuf);
    free(buf);
    return rc;
}

const char *cis2_chat_template_name(const cis2_chat_template *t) { return t->name; }
const char *cis2_chat_template_system(const cis2_chat_template *t)
{
    (void)t;
    return NULL;
}

void cis2_chat_template_free(cis2_chat_template *t)
{
    if (!t) return;
    jinja_free(t->jt);
    free(t->special);
    free(t);
}

/* ------------------------------------------------------------- messages */

/* Content as OpenAI's array of parts: each {"type": "text", "text": STRING}
 * (any other part, image or audio, is refused), the texts joined with "\n" —
 * what vLLM passes to a template that takes string content, as every
 * template here does — into out (the parts' raw text is longer than that). */
static int text_parts(const json_doc *d, uint32_t arr, const char *path, uint32_t i, char *out,
                      size_t *len, char *err)
{
    size_t at = 0;
    uint32_t j = 0;
    for (uint32_t p = d->nodes[arr].first; p != JSON_NONE; p = d->nodes[p].next, j++) {
        uint32_t type = JSON_NONE, text = JSON_NONE;
        int ok = d->nodes[p].type == JSON_OBJECT && d->nodes[p].count == 2;
        if (ok) {
            int dt = 0, dx = 0;
            type = json_get(d, p, "type", &dt);
            text = json_get(d, p, "text", &dx);
            ok = dt == 1 && dx == 1 && d->nodes[type].type == JSON_STRING &&
                 json_str_eq(d, type, "text") && d->nodes[text].type == JSON_STRING;
        }
        if (!ok) {
            cerr(err,
                 "%s: messages[%u].content[%u]: expected a text part {\"type\": \"text\", "
                 "\"text\": \"...\"} (this model reads text only)",
                 path, i, j);
            return 1;
        }
        if (j) out[at++] = '\n';
        json_str_decode(d, text, out + at);
        at += json_str_len(d, text);
    }
    *len = at;
    return 0;
}

static int cis2_chat_parse_messages_impl(const char *json, size_t len, const char *path,
                                         cis2_chat_msg **out, int *n_out, char *err)
{
    *out = NULL;
    *n_out = 0;
    json_doc d;
    int rc = json_parse(&d, json, len, path, err);
    if (rc) return rc;
    rc = 1;
    uint32_t arr = 0; /* the root (node 0) itself when it is the array */
    if (d.nodes[0].type == JSON_OBJECT) {
        for (uint32_t k = d.nodes[0].first; k != JSON_NONE; k = d.nodes[d.nodes[k].next].next)
            if (!json_str_eq(&d, k, "messages")) {
                size_t kl = 0;
                char *key = json_str_dup(&d, k, &kl), q[200];
                cerr(err, "%s: key %s is not used here (only \"messages\")", path,
                     key ? cis2_utf8_quote(key, kl, q) : "?");
                free(key);
                goto out;
            }
        arr = json_get(&d, 0, "messages", NULL);
        if (arr == JSON_NONE) arr = UINT32_MAX;
    }
    if (arr == UINT32_MAX || d.nodes[arr].type != JSON_ARRAY) {
        cerr(err, "%s: expected an array of messages or {\"messages\": [...]}", path);
        goto out;
    }
    uint32_t n = d.nodes[arr].count;
    if (n == 0 || n > 100000) {
        cerr(err, "%s: %u messages (1 to 100000)", path, n);
        goto out;
    }
    size_t bytes = n * sizeof(cis2_chat_msg);
    for (uint32_t m = d.nodes[arr].first; m != JSON_NONE; m = d.nodes[m].next)
        bytes += d.nodes[m].len + 16; /* decoded strings are never longer than the raw text */
    cis2_chat_msg *msgs = calloc(1, bytes);
    if (!msgs) {
        cerr(err, "out of memory");
        rc = -1;
        goto out;
    }
    char *arena = (char *)(msgs + n);
    uint32_t i = 0;
    for (uint32_t m = d.nodes[arr].first; m != JSON_NONE; m = d.nodes[m].next, i++) {
        if (d.nodes[m].type != JSON_OBJECT) {
            cerr(err, "%s: messages[%u]: expected an object", path, i);
            break;
        }
        uint32_t role = JSON_NONE, content = JSON_NONE;
        int bad = 0;
        for (uint32_t k = d.nodes[m].first; k != JSON_NONE && !bad;
             k = d.nodes[d.nodes[k].next].next) {
            uint32_t *slot = json_str_eq(&d, k, "role")      ? &role
                             : json_str_eq(&d, k, "content") ? &content
                                                             : NULL;
            if (!slot || *slot != JSON_NONE) {
                size_t kl = 0;
                char *key = json_str_dup(&d, k, &kl), q[200];
                cerr(err, "%s: messages[%u]: %s key %s (a message is {\"role\", \"content\"})",
                     path, i, slot ? "duplicate" : "unsupported",
                     key ? cis2_utf8_quote(key, kl, q) : "?");
                free(key);
                bad = 1;
            } else *slot = d.nodes[k].next;
        }
        if (bad) break;
        if (role == JSON_NONE || d.nodes[role].type != JSON_STRING ||
            !(json_str_eq(&d, role, "system") || json_str_eq(&d, role, "user") ||
              json_str_eq(&d, role, "assistant"))) {
            cerr(err, "%s: messages[%u].role: must be \"system\", \"user\" or \"assistant\"", path,
                 i);
            break;
        }
        if (content == JSON_NONE ||
            (d.nodes[content].type != JSON_STRING && d.nodes[content].type != JSON_ARRAY)) {
            cerr(err, "%s: messages[%u].content: must be a string or an array of text parts", path,
                 i);
            break;
        }
        msgs[i].role = json_str_eq(&d, role, "system") ? "system"
                       : json_str_eq(&d, role, "user") ? "user"
                                                       : "assistant";
        msgs[i].content = arena;
        if (d.nodes[content].type == JSON_STRING) {
            json_str_decode(&d, content, arena);
            msgs[i].content_len = json_str_len(&d, content);
        } else if (text_parts(&d, content, path, i, arena, &msgs[i].content_len, err)) break;
        arena[msgs[i].content_len] = 0;
        arena += msgs[i].content_len + 1;
    }
    if (i < n) {
        free(msgs);
        goto out;
    }
    *out = msgs;
    *n_out = (int)n;
    rc = 0;
out:
    json_free(&d);
    return rc;
}

/* -------------------------------------------------------------- rendering */

static const char *find(const char *h, size_t hl, const char *needle, size_t nl)
{
    if (!nl) return NULL;
    for (size_t i = 0; i + nl <= hl; i++)
        if (h[i] == needle[0] && memcmp(h + i, needle, nl) == 0) return h + i;
    return NULL;
}

static int first_special(void *ctx, const char *content, int special, int pass, size_t start,
                         size_t end)
{
    (void)pass, (void)start, (void)end;
    if (!special) return 0;
    *(const char **)ctx = content;
    return 1;
}

/* The template's variables as one JSON object: messages,
 * add_generation_prompt, tools and documents (None, as transformers passes
 * them without tools), the special tokens, then the caller's kwargs (which
 * override the special tokens, as in transformers). */
static int context_json(const cis2_chat_template *t, const cis2_chat_msg *m, int n,
                        const cis2_chat_opts *o, cis2_sb *sb, char *err)
{
    cis2_sb_str(sb, "{\"messages\": [");
    for (int i = 0; i < n; i++) {
        cis2_sb_str(sb, i ? ", {\"role\": " : "{\"role\": ");
        cis2_sb_json_str(sb, m[i].role, strlen(m[i].role));
        cis2_sb_str(sb, ", \"content\": ");
        cis2_sb_json_str(sb, m[i].content ? m[i].content : "", m[i].content_len);
        cis2_sb_str(sb, "}");
    }
    cis2_sb_printf(sb, "], \"add_generation_prompt\": %s, \"tools\": null, \"documents\": null",
                   o->add_generation_prompt ? "true" : "false");
    if (t->special) cis2_sb_str(sb, t->special);
    if (o->kwargs && o->kwargs_len) {
        json_doc d;
        if (json_parse(&d, o->kwargs, o->kwargs_len, "chat template kwargs", err)) return 1;
        int bad = d.nodes[0].type != JSON_OBJECT;
        if (bad) cerr(err, "chat template kwargs: expected a JSON object");
        for (uint32_t k = bad ? JSON_NONE : d.nodes[0].first; k != JSON_NONE && !bad;
             k = d.nodes[d.nodes[k].next].next) {
            static const char *const reserved[] = { "messages", "add_generation_prompt" };
            for (size_t r = 0; r < 2 && !bad; r++)
                if (json_str_eq(&d, k, reserved[r])) {
                    cerr(err, "chat template kwargs: \"%s\" is set by the caller, not a kwarg%s",
                         reserved[r], r ? " (give add_generation_prompt itself)" : "");
                    bad = 1;
                }
        }
        if (!bad) { /* the object's members, as written */
            const char *a = o->kwargs + d.nodes[0].start, *e = a + d.nodes[0].len;
            while (a < e && *a != '{') a++;
            a++;
            while (e > a && e[-1] != '}') e--;
            e--;
            const char *p = a;
            while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
            if (p < e) {
                cis2_sb_str(sb, ", ");
                cis2_sb_put(sb, a, (size_t)(e - a));
            }
        }
        json_free(&d);
        if (bad) return 1;
    }
    cis2_sb_str(sb, "}");
    return 0;
}

static int cis2_chat_render_impl(const cis2_chat_template *t, const cis2_chat_msg *m, int n,
                                 const cis2_chat_opts *o, const cis2_tokenizer *tok, char **out,
                                 size_t *out_len, char *err)
{
    *out = NULL;
    *out_len = 0;
    if (n < 1) return cerr(err, "chat: no messages");
    /* Content is pasted into the prompt as is (templates do not escape): a
     * special token in it would be read as one, so it is refused. */
    for (int i = 0; i < n; i++) {
        const char *c = m[i].content;
        size_t cl = m[i].content_len;
        if (!m[i].role || (strcmp(m[i].role, "system") && strcmp(m[i].role, "user") &&
                           strcmp(m[i].role, "assistant")))
            return cerr(err, "chat: messages[%d]: role must be system, user or assistant", i);
        if (!c && cl) return cerr(err, "chat: messages[%d]: no content", i);
        if (cl && cis2_utf8_check(c, cl) < cl)
            return cerr(err, "chat: messages[%d].content is not valid UTF-8", i);
        if (!tok) { /* without a tokenizer: ChatML's own control tokens */
            static const char *const ctl[] = { "<|im_start|>", "<|im_end|>" };
            for (int k = 0; k < 2; k++)
                if (find(c, cl, ctl[k], strlen(ctl[k])))
                    return cerr(err,
                                "chat: messages[%d].content contains the control token %s (the "
                                "template would not escape it; refusing)",
                                i, ctl[k]);
            continue;
        }
        const char *bad = NULL;
        int rc = cl ? cis2_tokenizer_scan_added(tok, c, cl, first_special, &bad) : 0;
        if (rc < 0) return cerr(err, "out of memory");
        if (rc) {
            char q[200];
            return cerr(err,
                        "chat: messages[%d].content holds the special token %s (the template "
                        "would not escape it; refusing)",
                        i, cis2_utf8_quote(bad, strlen(bad), q));
        }
    }
    cis2_sb ctx = { 0 };
    if (context_json(t, m, n, o, &ctx, err)) {
        cis2_sb_free(&ctx);
        return 1;
    }
    if (ctx.oom) {
        cis2_sb_free(&ctx);
        return cerr(err, "out of memory");
    }
    char jerr[CIS2_ERR_LEN];
    int rc = jinja_render(t->jt, ctx.b, ctx.len, o->date, out, out_len, jerr);
    cis2_sb_free(&ctx);
    if (rc) return cerr(err, "chat template (%s): %s", t->name, jerr);
    return 0;
}

/* ---- public entry points: the message stays one line whatever the caller's
 * strings (paths, names) held (docs/errors.md: file names are escaped;
 * SANITIZE leaves what is escaped already as it is). */
int cis2_chat_template_load(cis2_chat_template **t, const char *model_dir, char *err)
{
    int rc = cis2_chat_template_load_impl(t, model_dir, NULL, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_chat_template_load_file(cis2_chat_template **t, const char *model_dir,
                                 const char *template_path, char *err)
{
    int rc = cis2_chat_template_load_impl(t, model_dir, template_path, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_chat_template_parse(cis2_chat_template **t, const char *json, size_t len, const char *path,
                             char *err)
{
    int rc = cis2_chat_template_parse_impl(t, json, len, path, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_chat_template_from_text(cis2_chat_template **t, const char *src, size_t len,
                                 const char *path, char *err)
{
    int rc = cis2_chat_template_from_text_impl(t, src, len, path, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_chat_template_builtin(cis2_chat_template **t, const char *name, char *err)
{
    int rc = cis2_chat_template_builtin_impl(t, name, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_chat_parse_messages(const char *json, size_t len, const char *path, cis2_chat_msg **msgs,
                             int *n, char *err)
{
    int rc = cis2_chat_parse_messages_impl(json, len, path, msgs, n, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_chat_render_opts(const cis2_chat_template *t, const cis2_chat_msg *msgs, int n,
                          const cis2_chat_opts *o, const cis2_tokenizer *tok, char **out,
                          size_t *out_len, char *err)
{
    int rc = cis2_chat_render_impl(t, msgs, n, o, tok, out, out_len, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}

int cis2_chat_render(const cis2_chat_template *t, const cis2_chat_msg *msgs, int n,
                     int add_generation_prompt, const cis2_tokenizer *tok, char **out,
                     size_t *out_len, char *err)
{
    cis2_chat_opts o = { add_generation_prompt, NULL, 0, NULL };
    return cis2_chat_render_opts(t, msgs, n, &o, tok, out, out_len, err);
}
