/* config.json's quantization_config (the compressed-tensors convention of
 * published W8A16 checkpoints) -> cis2_quant_config, and the object
 * `cis2 quantize` writes. Only what cis2 computes exactly is accepted —
 * int8, symmetric, one scale per output row, weights only
 * (docs/quantization.md §4); everything else is refused by name. */
#include "model/quant.h"
#include "core/json.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    const json_doc *d;
    const char *path;
    char *err;
    cis2_quant_config *q;
} P;

/* A key or string value for a message: at most 40 bytes, control bytes as '?'. */
static void shown(const json_doc *d, uint32_t n, char out[48])
{
    char *s = json_str_dup(d, n, NULL);
    size_t i = 0;
    for (; s && s[i] && i < 40; i++) out[i] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    out[i] = 0;
    free(s);
}

static int refuse(P *p, const char *field, const char *why)
{
    snprintf(p->err, CIS2_ERR_LEN, "%s: quantization_config%s%s: %s", p->path, *field ? "." : "",
             field, why);
    return 1;
}

static int is_null(const json_doc *d, uint32_t v) { return d->nodes[v].type == JSON_NULL; }
static int is_str(const json_doc *d, uint32_t v, const char *lit)
{
    return d->nodes[v].type == JSON_STRING && json_str_eq(d, v, lit);
}

/* Every key of object `o` once; fills `field` with "prefix.key". */
static int dup_key(P *p, uint32_t o, uint32_t k, const char *field)
{
    int dups;
    char *key = json_str_dup(p->d, k, NULL);
    if (!key) return refuse(p, field, "out of memory");
    json_get(p->d, o, key, &dups);
    free(key);
    return dups > 1 ? refuse(p, field, "appears more than once") : 0;
}

static int parse_weights(P *p, uint32_t w, const char *pre)
{
    const json_doc *d = p->d;
    char f[160], ks[48];
    if (d->nodes[w].type != JSON_OBJECT) {
        snprintf(f, sizeof f, "%s.weights", pre);
        return refuse(p, f,
                      is_null(d, w) ? "is null: only weight quantization is supported"
                                    : "must be an object");
    }
    int strategy_seen = 0, channel = 0, gs_minus1 = 0;
    for (uint32_t k = d->nodes[w].first; k != JSON_NONE; k = d->nodes[d->nodes[k].next].next) {
        uint32_t v = d->nodes[k].next;
        shown(d, k, ks);
        snprintf(f, sizeof f, "%s.weights.%s", pre, ks);
        if (dup_key(p, w, k, f)) return 1;
        int64_t iv;
        if (json_str_eq(d, k, "num_bits")) {
            if (d->nodes[v].type != JSON_NUMBER || json_num_i64(d, v, &iv))
                return refuse(p, f, "must be an integer");
            if (iv != 8) return refuse(p, f, "is not 8: only 8-bit weights are supported");
        } else if (json_str_eq(d, k, "type")) {
            if (!is_str(d, v, "int"))
                return refuse(p, f, "is not \"int\": float (fp8/fp4) weights are not supported");
        } else if (json_str_eq(d, k, "symmetric")) {
            if (d->nodes[v].type != JSON_TRUE)
                return refuse(p, f,
                              "is not true: zero points (asymmetric weights) are not supported");
        } else if (json_str_eq(d, k, "strategy")) {
            strategy_seen = 1;
            if (is_str(d, v, "channel")) channel = 1;
            else if (is_str(d, v, "group") || is_str(d, v, "tensor_group"))
                return refuse(p, f, "is group-wise: one scale per row (channel) only");
            else if (is_str(d, v, "tensor"))
                return refuse(p, f, "is per-tensor: one scale per row (channel) only");
            else if (is_str(d, v, "block"))
                return refuse(p, f, "is block-wise: one scale per row (channel) only");
            else return refuse(p, f, "is not \"channel\": one scale per row only");
        } else if (json_str_eq(d, k, "group_size")) {
            if (is_null(d, v)) continue;
            if (d->nodes[v].type != JSON_NUMBER || json_num_i64(d, v, &iv))
                return refuse(p, f, "must be an integer or null");
            if (iv != -1)
                return refuse(p, f, "is set: group-wise scales are not supported (null or -1)");
            gs_minus1 = 1;
        } else if (json_str_eq(d, k, "block_structure")) {
            if (!is_null(d, v)) return refuse(p, f, "is set: block-wise scales are not supported");
        } else if (json_str_eq(d, k, "dynamic")) {
            if (d->nodes[v].type != JSON_FALSE)
                return refuse(p, f, "is not false: dynamic weight scales are not supported");
        } else if (json_str_eq(d, k, "actorder")) {
            if (!is_null(d, v) && d->nodes[v].type != JSON_FALSE)
                return refuse(p, f, "is set: activation ordering (g_idx) is not supported");
        } else if (json_str_eq(d, k, "scale_dtype")) {
            if (!is_null(d, v) && !is_str(d, v, "torch.float32") &&
                !is_str(d, v, "torch.bfloat16") && !is_str(d, v, "torch.float16"))
                return refuse(p, f, "is not float32, bfloat16 or float16");
            if (!is_null(d, v)) { /* one of the three names above: fits */
                json_str_decode(d, v, p->q->scale_dtype);
                p->q->scale_dtype[json_str_len(d, v)] = 0;
            }
        } else if (json_str_eq(d, k, "zp_dtype") || json_str_eq(d, k, "observer") ||
                   json_str_eq(d, k, "observer_kwargs")) {
            continue; /* informational for a symmetric static scheme */
        } else return refuse(p, f, "is an unknown key (cannot tell whether it changes the values)");
    }
    snprintf(f, sizeof f, "%s.weights.strategy", pre);
    if (!strategy_seen && !gs_minus1)
        return refuse(p, f, "is missing (and group_size is not -1): per-tensor scales");
    if (strategy_seen && !channel) return refuse(p, f, "is not \"channel\"");
    return 0;
}

static int parse_group(P *p, uint32_t key, uint32_t g, int *linear)
{
    const json_doc *d = p->d;
    char f[160], gs[48], ks[48];
    shown(d, key, gs);
    snprintf(f, sizeof f, "config_groups.%s", gs);
    if (d->nodes[g].type == JSON_ARRAY)
        return refuse(p, f, "is a preset scheme name: give the scheme explicitly");
    if (d->nodes[g].type != JSON_OBJECT) return refuse(p, f, "must be an object");
    char pre[80];
    snprintf(pre, sizeof pre, "config_groups.%s", gs);
    int have_w = 0, have_t = 0;
    for (uint32_t k = d->nodes[g].first; k != JSON_NONE; k = d->nodes[d->nodes[k].next].next) {
        uint32_t v = d->nodes[k].next;
        shown(d, k, ks);
        snprintf(f, sizeof f, "%s.%s", pre, ks);
        if (dup_key(p, g, k, f)) return 1;
        if (json_str_eq(d, k, "weights")) {
            have_w = 1;
            if (parse_weights(p, v, pre)) return 1;
        } else if (json_str_eq(d, k, "input_activations") ||
                   json_str_eq(d, k, "output_activations")) {
            if (!is_null(d, v))
                return refuse(p, f, "is set: activation quantization is not supported (W8A16)");
        } else if (json_str_eq(d, k, "format")) {
            if (!is_null(d, v) && !is_str(d, v, "int-quantized") &&
                !is_str(d, v, "naive-quantized"))
                return refuse(p, f, "is not int-quantized or naive-quantized");
        } else if (json_str_eq(d, k, "targets")) {
            have_t = 1;
            if (d->nodes[v].type != JSON_ARRAY || !d->nodes[v].count)
                return refuse(p, f, "must be a non-empty array of strings");
            for (uint32_t e = d->nodes[v].first; e != JSON_NONE; e = d->nodes[e].next) {
                if (is_str(d, e, "Linear")) *linear = 1;
                else if (is_str(d, e, "Embedding")) p->q->embed = 1;
                else {
                    char ts[48], why[120];
                    if (d->nodes[e].type != JSON_STRING) return refuse(p, f, "must hold strings");
                    shown(d, e, ts);
                    snprintf(why, sizeof why,
                             "\"%s\" is not supported (only the classes Linear and Embedding)", ts);
                    return refuse(p, f, why);
                }
            }
        } else return refuse(p, f, "is an unknown key (cannot tell whether it changes the values)");
    }
    snprintf(f, sizeof f, "%s", pre);
    if (!have_t) return refuse(p, f, "has no targets");
    if (!have_w) return refuse(p, f, "has no weights scheme");
    return 0;
}

int cis2_quant_config_parse(const char *json, size_t len, const char *path, cis2_quant_config *q,
                            char *err)
{
    memset(q, 0, sizeof *q);
    json_doc d;
    if (json_parse(&d, json, len, path, err)) return 1;
    P p = { &d, path, err, q };
    int rc = 1, dups;
    if (d.nodes[0].type != JSON_OBJECT) {
        snprintf(err, CIS2_ERR_LEN, "%s: top level must be a JSON object", path);
        goto out;
    }
    uint32_t qc = json_get(&d, 0, "quantization_config", &dups);
    if (dups > 1) {
        refuse(&p, "", "appears more than once");
        goto out;
    }
    if (qc == JSON_NONE || is_null(&d, qc)) {
        rc = 0;
        goto out;
    }
    if (d.nodes[qc].type != JSON_OBJECT) {
        refuse(&p, "", "must be an object");
        goto out;
    }
    q->present = 1;
    q->lm_head = 1;
    int have_method = 0, have_format = 0, have_groups = 0, linear = 0;
    char f[160], ks[48];
    for (uint32_t k = d.nodes[qc].first; k != JSON_NONE; k = d.nodes[d.nodes[k].next].next) {
        uint32_t v = d.nodes[k].next;
        shown(&d, k, ks);
        snprintf(f, sizeof f, "%s", ks);
        if (dup_key(&p, qc, k, f)) goto out;
        if (json_str_eq(&d, k, "quant_method")) {
            have_method = 1;
            if (!is_str(&d, v, "compressed-tensors")) {
                char m[48], why[160];
                if (d.nodes[v].type == JSON_STRING) shown(&d, v, m);
                else snprintf(m, sizeof m, "?");
                snprintf(why, sizeof why,
                         "\"%s\" is not supported (only compressed-tensors int8 checkpoints)", m);
                refuse(&p, f, why);
                goto out;
            }
        } else if (json_str_eq(&d, k, "format")) {
            have_format = 1;
            if (is_str(&d, v, "int-quantized") || is_str(&d, v, "naive-quantized")) {
                json_str_decode(&d, v, q->format);
                q->format[json_str_len(&d, v)] = 0;
            } else {
                char m[48], why[160];
                if (d.nodes[v].type == JSON_STRING) shown(&d, v, m);
                else snprintf(m, sizeof m, "?");
                snprintf(why, sizeof why,
                         "\"%s\" is not supported (int-quantized or naive-quantized: int8 "
                         "tensors)",
                         m);
                refuse(&p, f, why);
                goto out;
            }
        } else if (json_str_eq(&d, k, "quantization_status")) {
            if (!is_null(&d, v) && !is_str(&d, v, "compressed")) {
                refuse(&p, f, "is not \"compressed\": the weights are not stored as int8");
                goto out;
            }
        } else if (json_str_eq(&d, k, "config_groups")) {
            have_groups = 1;
            if (d.nodes[v].type != JSON_OBJECT || !d.nodes[v].count) {
                refuse(&p, f, "must be a non-empty object");
                goto out;
            }
            for (uint32_t g = d.nodes[v].first; g != JSON_NONE; g = d.nodes[d.nodes[g].next].next) {
                shown(&d, g, ks);
                snprintf(f, sizeof f, "config_groups.%s", ks);
                if (dup_key(&p, v, g, f) || parse_group(&p, g, d.nodes[g].next, &linear)) goto out;
            }
        } else if (json_str_eq(&d, k, "ignore")) {
            if (is_null(&d, v)) continue;
            if (d.nodes[v].type != JSON_ARRAY) {
                refuse(&p, f, "must be an array of module names");
                goto out;
            }
            for (uint32_t e = d.nodes[v].first; e != JSON_NONE; e = d.nodes[e].next) {
                if (d.nodes[e].type != JSON_STRING) {
                    refuse(&p, f, "must hold strings");
                    goto out;
                }
                if (is_str(&d, e, "lm_head")) {
                    q->lm_head = 0;
                    continue;
                }
                char *name = json_str_dup(&d, e, NULL);
                if (!name) {
                    refuse(&p, f, "out of memory");
                    goto out;
                }
                if (!strncmp(name, "re:", 3) || q->n_ignore == CIS2_QC_MAX_IGNORE) {
                    char m[48], why[160];
                    shown(&d, e, m);
                    snprintf(why, sizeof why, "\"%s\": %s", m,
                             !strncmp(name, "re:", 3)
                                 ? "regular expressions are not supported (list module names)"
                                 : "too many entries");
                    free(name);
                    refuse(&p, f, why);
                    goto out;
                }
                q->ignore[q->n_ignore++] = name;
            }
        } else if (json_str_eq(&d, k, "kv_cache_scheme") ||
                   json_str_eq(&d, k, "transform_config")) {
            if (!is_null(&d, v)) {
                refuse(&p, f, "is set: not supported (exact int8 weights only)");
                goto out;
            }
        } else if (json_str_eq(&d, k, "sparsity_config")) {
            if (!is_null(&d, v) && !(d.nodes[v].type == JSON_OBJECT && !d.nodes[v].count)) {
                refuse(&p, f, "is set: sparse (compressed) weights are not supported");
                goto out;
            }
        } else if (json_str_eq(&d, k, "global_compression_ratio") ||
                   json_str_eq(&d, k, "version") || json_str_eq(&d, k, "provider") ||
                   json_str_eq(&d, k, "run_compressed")) {
            continue; /* informational */
        } else {
            refuse(&p, f, "is an unknown key (cannot tell whether it changes the values)");
            goto out;
        }
    }
    if (!have_method) refuse(&p, "quant_method", "is missing");
    else if (!have_format) refuse(&p, "format", "is missing (the weights would be float)");
    else if (!have_groups) refuse(&p, "config_groups", "is missing");
    else if (!linear) refuse(&p, "config_groups", "no group targets Linear");
    else rc = 0;
out:
    json_free(&d);
    if (rc) cis2_quant_config_free(q);
    return rc;
}

void cis2_quant_config_free(cis2_quant_config *q)
{
    for (int i = 0; i < q->n_ignore; i++) free(q->ignore[i]);
    memset(q, 0, sizeof *q);
}

char *cis2_quant_config_json(int lm_head, int embed, int indent)
{
    static const char *const L[] = {
        "{",
        "  \"config_groups\": {",
        "    \"group_0\": {",
        "      \"input_activations\": null,",
        "      \"output_activations\": null,",
        NULL, /* targets */
        "      \"weights\": {",
        "        \"actorder\": null,",
        "        \"block_structure\": null,",
        "        \"dynamic\": false,",
        "        \"group_size\": null,",
        "        \"num_bits\": 8,",
        "        \"observer\": \"minmax\",",
        "        \"observer_kwargs\": {},",
        "        \"strategy\": \"channel\",",
        "        \"symmetric\": true,",
        "        \"type\": \"int\"",
        "      }",
        "    }",
        "  },",
        "  \"format\": \"int-quantized\",",
        "  \"global_compression_ratio\": null,",
        NULL, /* ignore */
        "  \"kv_cache_scheme\": null,",
        "  \"quant_method\": \"compressed-tensors\",",
        "  \"quantization_status\": \"compressed\"",
        "}",
    };
    cis2_sb s = { 0 };
    int nl = (int)(sizeof L / sizeof *L), nulls = 0;
    for (int i = 0; i < nl; i++) {
        if (i) cis2_sb_printf(&s, "\n%*s", indent, "");
        if (L[i]) cis2_sb_str(&s, L[i]);
        else if (nulls++ == 0)
            cis2_sb_str(&s, embed ? "      \"targets\": [\"Linear\", \"Embedding\"],"
                                  : "      \"targets\": [\"Linear\"],");
        else cis2_sb_str(&s, lm_head ? "  \"ignore\": []," : "  \"ignore\": [\"lm_head\"],");
    }
    return cis2_sb_take(&s, NULL);
}
