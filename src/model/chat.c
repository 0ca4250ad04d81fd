/* Chat prompts: OpenAI-style messages rendered as ChatML, byte for byte what
 * the model's own Jinja chat template (tokenizer_config.json) renders with
 * HF transformers' settings (trim_blocks, lstrip_blocks). There is no Jinja
 * engine: a template is recognised by its structure (its tags and text after
 * Jinja's whitespace control, its expressions token by token with quoting,
 * spacing and x['k'] vs x.k normalized) as one of the ChatML templates below,
 * whose output we then produce directly; anything else is refused. */
#include "model/model.h"
#include "core/json.h"
#include "model/pretok.h"
#include "model/unicode_tables.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The recognised templates. \x01 marks where the default system prompt may
 * be any string (the same wherever \x01 appears); \x02 any string unused
 * here (Qwen2.5's system prompt for tool calls). */
static const struct {
    const char *name, *src;
} KNOWN[] = {
    /* HF's classic ChatML example; Qwen3's output for system/user turns. */
    { "chatml",
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\\n' }}{% endif %}" },
    /* SmolLM2-Instruct, Qwen1.5/Qwen2-Instruct and their fine-tunes: ChatML
     * plus a default system turn when the first message is not one. */
    { "chatml+default-system",
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\\n\x01<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
      "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}" },
    /* Qwen2.5-Instruct (and QwQ, DeepScaleR, ...): tool-aware; without tools,
     * tool calls or tool turns it renders as chatml+default-system. */
    { "qwen2.5",
      "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n"
      "    {%- if messages[0]['role'] == 'system' %}\n        {{- messages[0]['content'] }}\n"
      "    {%- else %}\n        {{- '\x02' }}\n    {%- endif %}\n"
      "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user "
      "query.\\n\\nYou are provided with function signatures within <tools></tools> XML "
      "tags:\\n<tools>\" }}\n"
      "    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n"
      "    {%- endfor %}\n"
      "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function "
      "name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
      "{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n"
      "</tool_call><|im_end|>\\n\" }}\n"
      "{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n"
      "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
      "    {%- else %}\n        {{- '<|im_start|>system\\n\x01<|im_end|>\\n' }}\n"
      "    {%- endif %}\n{%- endif %}\n"
      "{%- for message in messages %}\n"
      "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) "
      "or (message.role == \"assistant\" and not message.tool_calls) %}\n"
      "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + "
      "'\\n' }}\n"
      "    {%- elif message.role == \"assistant\" %}\n"
      "        {{- '<|im_start|>' + message.role }}\n"
      "        {%- if message.content %}\n            {{- '\\n' + message.content }}\n"
      "        {%- endif %}\n"
      "        {%- for tool_call in message.tool_calls %}\n"
      "            {%- if tool_call.function is defined %}\n"
      "                {%- set tool_call = tool_call.function %}\n            {%- endif %}\n"
      "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n            {{- tool_call.name }}\n"
      "            {{- '\", \"arguments\": ' }}\n"
      "            {{- tool_call.arguments | tojson }}\n            {{- '}\\n</tool_call>' }}\n"
      "        {%- endfor %}\n        {{- '<|im_end|>\\n' }}\n"
      "    {%- elif message.role == \"tool\" %}\n"
      "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
      "            {{- '<|im_start|>user' }}\n        {%- endif %}\n"
      "        {{- '\\n<tool_response>\\n' }}\n        {{- message.content }}\n"
      "        {{- '\\n</tool_response>' }}\n"
      "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
      "            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n    {%- endif %}\n"
      "{%- endfor %}\n{%- if add_generation_prompt %}\n"
      "    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n" },
};
#define NKNOWN (int)(sizeof KNOWN / sizeof KNOWN[0])

struct cis2_chat_template {
    const char *name;
    char *system; /* the default system prompt, or NULL */
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

/* --------------------------------------------------- template canonical form */

static void sb_c(cis2_sb *o, char c) { cis2_sb_put(o, &c, 1); }

/* Append a string token: quoted, with every byte outside printable ASCII
 * (and the quote and backslash) as \xNN, so holes never see a bare quote. */
static void put_str(cis2_sb *o, const char *s, size_t n)
{
    sb_c(o, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 1 || c == 2) sb_c(o, (char)c); /* hole markers stay one byte */
        else if (c < 0x20 || c == '"' || c == '\\' || c == 0x7F) cis2_sb_printf(o, "\\x%02x", c);
        else sb_c(o, (char)c);
    }
    sb_c(o, '"');
}

static int is_ident_start(char c) { return c == '_' || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }
static int is_ident(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

/* A Jinja (Python-style) string literal at s[0] (the quote); decodes into
 * *out, returns the bytes consumed or 0 when unterminated. */
static size_t str_lit(const char *s, size_t n, cis2_sb *out)
{
    char q = s[0];
    size_t i = 1;
    while (i < n && s[i] != q) {
        char c = s[i++];
        if (c != '\\') {
            sb_c(out, c);
            continue;
        }
        if (i >= n) return 0;
        char e = s[i++];
        const char *simple = strchr("nrtabfv\\'\"", e);
        if (simple && e) {
            static const char val[] = "\n\r\t\a\b\f\v\\'\"";
            sb_c(out, val[simple - "nrtabfv\\'\""]);
        } else if (e == 'x' || e == 'u' || e == 'U') {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t v = 0;
            for (int k = 0; k < digits; k++, i++) {
                char h = i < n ? s[i] : 0;
                int d = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
                if (d < 0) return 0;
                v = v << 4 | (uint32_t)d;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
            uint8_t b[4];
            size_t l = cis2_utf8_enc(v, b);
            for (size_t k = 0; k < l; k++) sb_c(out, (char)b[k]);
        } else { /* Python keeps unknown escapes as written */
            sb_c(out, '\\');
            sb_c(out, e);
        }
    }
    return i < n ? i + 1 : 0;
}

/* One tag's inner text as tokens: identifiers, numbers, strings, operators;
 * x['name'] becomes x.name. */
static int canon_expr(const char *s, size_t n, cis2_sb *o)
{
    cis2_sb lit = { 0 };
    int prev_value = 0; /* the previous token can be subscripted */
    size_t i = 0;
    int rc = 0;
    while (i < n && !rc) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            i++;
            continue;
        }
        sb_c(o, ' ');
        if (is_ident_start(c)) {
            size_t j = i;
            while (j < n && is_ident(s[j])) j++;
            cis2_sb_put(o, s + i, j - i);
            i = j;
            prev_value = 1;
        } else if (c >= '0' && c <= '9') {
            size_t j = i;
            while (j < n && (is_ident(s[j]) || s[j] == '.')) j++;
            cis2_sb_put(o, s + i, j - i);
            i = j;
            prev_value = 1;
        } else if (c == '\'' || c == '"') {
            lit.len = 0;
            size_t l = str_lit(s + i, n - i, &lit);
            if (!l) rc = 1;
            else put_str(o, lit.b ? lit.b : "", lit.len);
            i += l;
            prev_value = 1;
        } else if (c == '[' && prev_value) { /* x['name'] -> x.name */
            size_t j = i + 1;
            while (j < n && s[j] == ' ') j++;
            lit.len = 0;
            size_t l = j < n && (s[j] == '\'' || s[j] == '"') ? str_lit(s + j, n - j, &lit) : 0;
            size_t k = j + l;
            while (k < n && s[k] == ' ') k++;
            int ident = l && lit.len && is_ident_start(lit.b[0]);
            for (size_t q = 0; ident && q < lit.len; q++) ident = is_ident(lit.b[q]);
            if (ident && k < n && s[k] == ']') {
                sb_c(o, '.');
                sb_c(o, ' ');
                cis2_sb_put(o, lit.b, lit.len);
                i = k + 1;
            } else {
                sb_c(o, '[');
                i++;
                prev_value = 0;
            }
        } else {
            static const char *const two[] = { "==", "!=", "<=", ">=", "//", "**", "::", NULL };
            size_t l = 1;
            for (int k = 0; two[k]; k++)
                if (i + 1 < n && s[i] == two[k][0] && s[i + 1] == two[k][1]) l = 2;
            cis2_sb_put(o, s + i, l);
            prev_value = c == ')' || c == ']';
            i += l;
        }
    }
    free(lit.b);
    return rc;
}

/* Jinja's lexer with HF's environment (trim_blocks, lstrip_blocks; a single
 * trailing newline dropped): the template as canonical tokens. */
static int canon_template(const char *s, size_t n, cis2_sb *o)
{
    if (n && s[n - 1] == '\n') n--; /* keep_trailing_newline=False */
    size_t i = 0;
    int strip_next = 0, trim_nl = 0; /* from the previous tag's end */
    while (i < n) {
        /* the next tag */
        size_t t = i;
        while (t + 1 < n &&
               !(s[t] == '{' && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#')))
            t++;
        if (t + 1 >= n) t = n;
        size_t a = i, b = t; /* the text before it */
        if (trim_nl && a < b && s[a] == '\n') a++;
        if (strip_next)
            while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\n' || s[a] == '\r')) a++;
        char kind = t < n ? s[t + 1] : 0;
        char lmark = t + 2 < n ? s[t + 2] : 0;
        if (kind && lmark == '-') {
            while (b > a &&
                   (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\n' || s[b - 1] == '\r'))
                b--;
        } else if ((kind == '%' || kind == '#') && lmark != '+') { /* lstrip_blocks */
            size_t k = b;
            while (k > a && (s[k - 1] == ' ' || s[k - 1] == '\t')) k--;
            if (k == 0 || s[k - 1] == '\n' || (k == a && a > i) || k == i) {
                if (k == a || s[k - 1] == '\n') b = k;
            }
        }
        if (b > a) {
            cis2_sb_str(o, " T");
            put_str(o, s + a, b - a);
        }
        if (!kind) break;
        /* the tag itself */
        const char *close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
        size_t in = t + 2 + (lmark == '-' || lmark == '+');
        size_t e = in;
        while (e + 1 < n && !(s[e] == close[0] && s[e + 1] == close[1])) {
            if (kind != '#' && (s[e] == '\'' || s[e] == '"')) { /* skip strings */
                cis2_sb skip = { 0 };
                size_t l = str_lit(s + e, n - e, &skip);
                free(skip.b);
                if (!l) return 1;
                e += l;
                continue;
            }
            e++;
        }
        if (e + 1 >= n) return 1; /* unterminated tag */
        size_t end = e;
        char rmark = end > in ? s[end - 1] : 0;
        if (rmark == '-' || rmark == '+') end--;
        if (kind != '#') {
            cis2_sb_str(o, kind == '{' ? " {{" : " {%");
            if (canon_expr(s + in, end - in, o)) return 1;
            cis2_sb_str(o, kind == '{' ? " }}" : " %}");
        }
        strip_next = rmark == '-';
        trim_nl = kind != '{' && rmark != '+'; /* trim_blocks */
        i = e + 2;
    }
    return 0;
}

/* Does canonical `tpl` equal canonical `skel`? In skel, \x01 and \x02 stand
 * for any text inside a string literal, the same text wherever the same
 * marker appears; hole[0] gets \x01's (malloc'd), \x02's is not kept. */
static int match(const char *tpl, const char *skel, char **hole)
{
    char *got[2] = { NULL, NULL };
    const char *t = tpl, *k = skel;
    while (*k) {
        if (*k != 1 && *k != 2) {
            if (*t != *k) goto no;
            t++, k++;
            continue;
        }
        /* the hole runs to the text that follows it in the skeleton, up to
         * its string's closing quote */
        int h = *k++ - 1;
        const char *q = strchr(k, '"');
        if (!q) goto no;
        size_t tail = (size_t)(q - k);
        const char *tq = strchr(t, '"'); /* holes never hold a bare quote */
        if (!tq || (size_t)(tq - t) < tail || memcmp(tq - tail, k, tail)) goto no;
        size_t hl = (size_t)(tq - tail - t);
        if (got[h]) {
            if (strlen(got[h]) != hl || memcmp(got[h], t, hl)) goto no;
        } else {
            got[h] = malloc(hl + 1);
            if (!got[h]) goto no;
            memcpy(got[h], t, hl);
            got[h][hl] = 0;
        }
        t = tq - tail;
    }
    if (*t) goto no;
    free(got[1]);
    *hole = got[0];
    return 1;
no:
    free(got[0]);
    free(got[1]);
    *hole = NULL;
    return 0;
}

/* The canonical hole text back to bytes (undo put_str's \xNN). */
static char *unescape_hole(const char *h)
{
    size_t n = strlen(h), o = 0;
    char *r = malloc(n + 1);
    if (!r) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (h[i] == '\\' && i + 3 < n + 1 && h[i + 1] == 'x') {
            unsigned v;
            if (sscanf(h + i + 2, "%2x", &v) == 1) {
                r[o++] = (char)v;
                i += 3;
                continue;
            }
        }
        r[o++] = h[i];
    }
    r[o] = 0;
    return r;
}

static int cis2_chat_template_from_text_impl(cis2_chat_template **out, const char *src, size_t len,
                                             const char *path, char *err)
{
    *out = NULL;
    cis2_sb c = { 0 }, k = { 0 };
    int rc = 1;
    if (cis2_utf8_check(src, len) < len) {
        cerr(err, "%s: chat_template is not valid UTF-8", path);
        goto out;
    }
    if (canon_template(src, len, &c) || !c.b) {
        cerr(err, "%s: chat_template: not a Jinja template this library can read", path);
        goto out;
    }
    for (int i = 0; i < NKNOWN && rc; i++) {
        k.len = 0;
        if (canon_template(KNOWN[i].src, strlen(KNOWN[i].src), &k) || !k.b) continue;
        char *hole;
        if (!match(c.b, k.b, &hole)) continue;
        cis2_chat_template *t = calloc(1, sizeof *t);
        if (!t || (hole && !(t->system = unescape_hole(hole)))) {
            free(t);
            free(hole);
            cerr(err, "out of memory");
            goto out;
        }
        free(hole);
        t->name = KNOWN[i].name;
        *out = t;
        rc = 0;
    }
    if (rc)
        cerr(err,
             "%s: chat_template is not a ChatML template this library renders exactly "
             "(known: plain ChatML, SmolLM2/Qwen2's, Qwen2.5's); there is no general Jinja "
             "engine",
             path);
out:
    free(c.b);
    free(k.b);
    return rc;
}

static int cis2_chat_template_builtin_impl(cis2_chat_template **out, const char *name, char *err)
{
    *out = NULL;
    if (strcmp(name, "chatml") != 0) {
        char q[200];
        return cerr(err, "unknown chat format %s (only chatml is built in)",
                    cis2_utf8_quote(name, strlen(name), q));
    }
    cis2_chat_template *t = calloc(1, sizeof *t);
    if (!t) return cerr(err, "out of memory");
    t->name = "chatml";
    *out = t;
    return 0;
}

/* tokenizer_config.json: its "chat_template", a string or a list of
 * {"name", "template"} (the one named "default"). Returns 2 (err set) when it
 * has none. */
static int parse_config(cis2_chat_template **out, const char *json, size_t len, const char *path,
                        char *err)
{
    *out = NULL;
    json_doc d;
    if (json_parse(&d, json, len, path, err)) return 1;
    int rc = 1;
    uint32_t ct =
        d.nodes[0].type == JSON_OBJECT ? json_get(&d, 0, "chat_template", NULL) : JSON_NONE;
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
    rc = cis2_chat_template_from_text(out, src, l, path, err);
    free(src);
out:
    json_free(&d);
    return rc;
}

static int cis2_chat_template_parse_impl(cis2_chat_template **out, const char *json, size_t len,
                                         const char *path, char *err)
{
    return parse_config(out, json, len, path, err) ? 1 : 0;
}

/* DIR/tokenizer_config.json's template, or (when it has none, as files saved
 * by recent transformers) DIR/chat_template.jinja. */
static int cis2_chat_template_load_impl(cis2_chat_template **out, const char *dir, char *err)
{
    char cfg[1100], jin[1100], err2[CIS2_ERR_LEN];
    char *buf;
    size_t len;
    *out = NULL;
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    snprintf(jin, sizeof jin, "%s/chat_template.jinja", dir);
    int rc = cis2_read_file_max(cfg, (size_t)64 << 20, &buf, &len, err);
    if (!rc) {
        rc = parse_config(out, buf, len, cfg, err);
        free(buf);
        if (rc != 2) return rc;
    }
    if (cis2_read_file_max(jin, (size_t)16 << 20, &buf, &len, err2)) {
        if (rc == 2) cerr(err, "%s has no \"chat_template\" and there is no %s", cfg, jin);
        return 1; /* err: tokenizer_config.json's own problem */
    }
    rc = cis2_chat_template_from_text(out, buf, len, jin, err);
    free(buf);
    return rc;
}

const char *cis2_chat_template_name(const cis2_chat_template *t) { return t->name; }
const char *cis2_chat_template_system(const cis2_chat_template *t) { return t->system; }

void cis2_chat_template_free(cis2_chat_template *t)
{
    if (!t) return;
    free(t->system);
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

/* Where the renderer put its control tokens and each message's content. */
typedef struct {
    size_t *ctl; /* start offsets of <|im_start|> / <|im_end|> written by the template */
    int n_ctl;
    size_t *content; /* start offset of message i's content */
    int n_msg;
    size_t bad_at;
    const char *bad;
} spans;

static int check_special(void *ctx, const char *content, int special, int pass, size_t start,
                         size_t end)
{
    spans *sp = ctx;
    (void)pass;
    if (!special) return 0;
    int lo = 0, hi = sp->n_ctl; /* ctl is sorted */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (sp->ctl[mid] < start) lo = mid + 1;
        else hi = mid;
    }
    if (lo < sp->n_ctl && sp->ctl[lo] == start && end - start == strlen(content) &&
        (!strcmp(content, "<|im_start|>") || !strcmp(content, "<|im_end|>")))
        return 0; /* one of the template's own, matched where it put it */
    sp->bad_at = start;
    sp->bad = content;
    return 1;
}

static int cis2_chat_render_impl(const cis2_chat_template *t, const cis2_chat_msg *m, int n,
                                 int add_generation_prompt, const cis2_tokenizer *tok, char **out,
                                 size_t *out_len, char *err)
{
    *out = NULL;
    *out_len = 0;
    if (n < 1) return cerr(err, "chat: no messages");
    /* Content is pasted into the prompt as is (the templates do not escape):
     * a control token in it would be read as one, so it is refused. */
    for (int i = 0; i < n; i++) {
        static const char *const ctl[] = { "<|im_start|>", "<|im_end|>" };
        const char *c = m[i].content;
        size_t cl = m[i].content_len;
        if (!m[i].role || (strcmp(m[i].role, "system") && strcmp(m[i].role, "user") &&
                           strcmp(m[i].role, "assistant")))
            return cerr(err, "chat: messages[%d]: role must be system, user or assistant", i);
        if (!c && cl) return cerr(err, "chat: messages[%d]: no content", i);
        if (cl && cis2_utf8_check(c, cl) < cl)
            return cerr(err, "chat: messages[%d].content is not valid UTF-8", i);
        for (int k = 0; k < 2; k++)
            if (find(c, cl, ctl[k], strlen(ctl[k])))
                return cerr(err,
                            "chat: messages[%d].content contains the control token %s (the "
                            "template would not escape it; refusing)",
                            i, ctl[k]);
    }
    spans sp = { malloc((2 * (size_t)n + 4) * sizeof(size_t)),
                 0,
                 malloc((size_t)n * sizeof(size_t)),
                 n,
                 0,
                 NULL };
    cis2_sb o = { 0 };
    if (!sp.ctl || !sp.content) o.oom = 1;
#define CTL(s)                                                                                     \
    do {                                                                                           \
        if (sp.ctl) sp.ctl[sp.n_ctl++] = o.len;                                                    \
        cis2_sb_str(&o, s);                                                                        \
    } while (0)
    if (t->system && strcmp(m[0].role, "system")) {
        CTL("<|im_start|>");
        cis2_sb_str(&o, "system\n");
        cis2_sb_str(&o, t->system);
        CTL("<|im_end|>");
        cis2_sb_str(&o, "\n");
    }
    for (int i = 0; i < n; i++) {
        CTL("<|im_start|>");
        cis2_sb_str(&o, m[i].role);
        cis2_sb_str(&o, "\n");
        if (sp.content) sp.content[i] = o.len;
        if (m[i].content_len) cis2_sb_put(&o, m[i].content, m[i].content_len);
        CTL("<|im_end|>");
        cis2_sb_str(&o, "\n");
    }
    if (add_generation_prompt) {
        CTL("<|im_start|>");
        cis2_sb_str(&o, "assistant\n");
    }
#undef CTL
    size_t len = 0;
    char *text = o.oom ? NULL : cis2_sb_take(&o, &len);
    cis2_sb_free(&o);
    int rc = !text ? -1 : tok ? cis2_tokenizer_scan_added(tok, text, len, check_special, &sp) : 0;
    if (rc > 0) {
        int i = 0;
        char q[200];
        while (i + 1 < n && sp.content[i + 1] <= sp.bad_at) i++;
        cerr(err,
             "chat: messages[%d].content holds the special token %s (the template would not "
             "escape it; refusing)",
             i, cis2_utf8_quote(sp.bad, strlen(sp.bad), q));
    } else if (rc) cerr(err, "out of memory");
    free(sp.ctl);
    free(sp.content);
    if (rc) {
        free(text);
        return rc > 0 ? 1 : -1;
    }
    *out = text;
    *out_len = len;
    return 0;
}

/* ---- public entry points: the message stays one line whatever the caller's
 * strings (paths, names) held (docs/errors.md: file names are escaped;
 * SANITIZE leaves what is escaped already as it is). */
int cis2_chat_template_load(cis2_chat_template **t, const char *model_dir, char *err)
{
    int rc = cis2_chat_template_load_impl(t, model_dir, err);
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

int cis2_chat_render(const cis2_chat_template *t, const cis2_chat_msg *msgs, int n,
                     int add_generation_prompt, const cis2_tokenizer *tok, char **out,
                     size_t *out_len, char *err)
{
    int rc = cis2_chat_render_impl(t, msgs, n, add_generation_prompt, tok, out, out_len, err);
    if (rc) cis2_err_one_line(err);
    return rc;
}
