/* config.json → cis2_config (§2.2, §2.3). Everything is read from the file;
 * anything we cannot compute exactly is refused with the field's name. */
#include "model/model.h"
#include "core/json.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const json_doc *d;
    uint32_t root;
    const char *path;
    char *err;
    const char *pre; /* the enclosing object's name and a dot, for a nested field */
} C;

static int bad(C *c, const char *field, const char *why)
{
    snprintf(c->err, CIS2_ERR_LEN, "%s: field \"%s%s\" %s", c->path, c->pre ? c->pre : "", field,
             why);
    return 1;
}

/* Returns node or JSON_NONE; flags duplicates as an error. */
static int field(C *c, const char *key, uint32_t *node)
{
    int dups;
    *node = json_get(c->d, c->root, key, &dups);
    if (dups > 1) return bad(c, key, "appears more than once");
    return 0;
}

static int get_int(C *c, const char *key, int required, int64_t lo, int64_t hi, int dflt, int *out)
{
    uint32_t n;
    if (field(c, key, &n)) return 1;
    if (n == JSON_NONE || c->d->nodes[n].type == JSON_NULL) {
        if (required) return bad(c, key, "is missing");
        *out = dflt;
        return 0;
    }
    int64_t v;
    if (c->d->nodes[n].type != JSON_NUMBER) return bad(c, key, "must be an integer");
    int rc = json_num_i64(c->d, n, &v);
    if (rc == JSON_NUM_RANGE) return bad(c, key, "is beyond the 64-bit integer range");
    if (rc) return bad(c, key, "must be an integer (no fraction or exponent)");
    if (v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "= %lld is out of range [%lld, %lld]", (long long)v,
                 (long long)lo, (long long)hi);
        return bad(c, key, why);
    }
    *out = (int)v;
    return 0;
}

/* §2.3: parse as binary64 (correctly rounded), then one RNE cast to binary32. */
static int get_f32(C *c, const char *key, int required, double dflt, float *out)
{
    uint32_t n;
    double v = dflt;
    if (field(c, key, &n)) return 1;
    if (n == JSON_NONE) {
        if (required) return bad(c, key, "is missing");
    } else {
        if (c->d->nodes[n].type != JSON_NUMBER || json_num_f64(c->d, n, &v))
            return bad(c, key, "must be a number");
    }
    volatile float f = (float)v;
    uint32_t b = cis2_f2u(f);
    if ((b & 0x7F800000u) == 0x7F800000u || (b & 0x7F800000u) == 0 || (b >> 31))
        return bad(c, key, "must be a positive normal binary32 value");
    *out = f;
    return 0;
}

/* binary64 -> binary32 by one RNE rounding for |v| < FLT_MIN, computed on
 * the integer grid of binary32's subnormals (k * 2^-149) so no FTZ setting
 * of the calling thread can flush it. */
static float f64_to_f32_tiny(double v)
{
    double k = nearbyint(fabs(v) * 0x1p149); /* exact scaling; RNE, the default mode */
    return cis2_u2f((signbit(v) ? 0x80000000u : 0u) | (uint32_t)k); /* k = 2^23: FLT_MIN */
}

/* §2.3: rms_norm_eps parsed as binary64 and cast to binary32 by one RNE
 * rounding — zero and subnormal values included, computed as written (§8
 * adds eps under §1.3's DAZ, like any other operand). Negative and
 * overflowing values are refused. */
static int get_eps(C *c, float *out)
{
    uint32_t n;
    double v;
    if (field(c, "rms_norm_eps", &n)) return 1;
    if (n == JSON_NONE) return bad(c, "rms_norm_eps", "is missing");
    if (c->d->nodes[n].type != JSON_NUMBER || json_num_f64(c->d, n, &v))
        return bad(c, "rms_norm_eps", "must be a number");
    if (signbit(v) && v != 0.0) return bad(c, "rms_norm_eps", "must not be negative");
    if (fabs(v) < 0x1p-126) {
        *out = f64_to_f32_tiny(v);
        return 0;
    }
    volatile float f = (float)v;
    if ((cis2_f2u(f) & 0x7F800000u) == 0x7F800000u)
        return bad(c, "rms_norm_eps", "overflows binary32");
    *out = f;
    return 0;
}

/* The test-only fixture architecture "cis2-toy" (docs/architecture.md) is
 * known only while CIS2_TEST_ARCHS=1: a real checkpoint never reaches it. */
static int test_archs_enabled(void)
{
    const char *v = getenv("CIS2_TEST_ARCHS");
    return v && strcmp(v, "1") == 0;
}

/* The architecture: model_type when present (an unknown one is refused by
 * name); otherwise, as the spec reads a config (§2.2 lists no model_type),
 * the Llama family — unless `architectures` names a Qwen2 or Qwen3 class. */
static int arch_of(C *c, cis2_arch *arch)
{
    static const struct {
        const char *model_type, *cls;
        cis2_arch arch;
    } known[] = { { "llama", "LlamaForCausalLM", CIS2_ARCH_LLAMA },
                  { "qwen2", "Qwen2ForCausalLM", CIS2_ARCH_QWEN2 },
                  { "qwen3", "Qwen3ForCausalLM", CIS2_ARCH_QWEN3 },
                  { "cis2-toy", "Cis2ToyForCausalLM", CIS2_ARCH_TOY } };
    const size_t nk = sizeof known / sizeof *known;
    const json_doc *d = c->d;
    uint32_t mt, ar;
    if (field(c, "model_type", &mt) || field(c, "architectures", &ar)) return 1;
    *arch = CIS2_ARCH_LLAMA;
    if (mt != JSON_NONE) {
        if (d->nodes[mt].type != JSON_STRING) return bad(c, "model_type", "must be a string");
        for (size_t i = 0; i < nk; i++)
            if (json_str_eq(d, mt, known[i].model_type) &&
                (known[i].arch != CIS2_ARCH_TOY || test_archs_enabled())) {
                *arch = known[i].arch;
                return 0;
            }
        return bad(c, "model_type",
                   "is not one of the supported architectures (llama, qwen2, qwen3)");
    }
    if (ar == JSON_NONE || d->nodes[ar].type == JSON_NULL) return 0;
    if (d->nodes[ar].type != JSON_ARRAY) return bad(c, "architectures", "must be a list of names");
    for (uint32_t e = d->nodes[ar].first; e != JSON_NONE; e = d->nodes[e].next) {
        if (d->nodes[e].type != JSON_STRING)
            return bad(c, "architectures", "must be a list of names");
        for (size_t i = 0; i < nk; i++)
            if (json_str_eq(d, e, known[i].cls) && known[i].arch != CIS2_ARCH_TOY) {
                *arch = known[i].arch;
                return 0;
            }
    }
    return 0;
}

static int get_bool(C *c, const char *key, int dflt, int *out)
{
    uint32_t n;
    if (field(c, key, &n)) return 1;
    if (n == JSON_NONE || c->d->nodes[n].type == JSON_NULL) {
        *out = dflt;
        return 0;
    }
    uint8_t t = c->d->nodes[n].type;
    if (t != JSON_TRUE && t != JSON_FALSE) return bad(c, key, "must be true or false");
    *out = t == JSON_TRUE;
    return 0;
}

/* A number whose binary32 cast (§2.3) is a positive normal value; *out keeps
 * the binary64 value read (docs/rope_scaling.md computes from both). */
static int get_pos_f64(C *c, const char *key, double *out)
{
    uint32_t n;
    if (field(c, key, &n)) return 1;
    if (n == JSON_NONE) return bad(c, key, "is missing");
    if (c->d->nodes[n].type != JSON_NUMBER || json_num_f64(c->d, n, out))
        return bad(c, key, "must be a number");
    volatile float f = (float)*out;
    uint32_t b = cis2_f2u(f);
    if ((b & 0x7F800000u) == 0x7F800000u || (b & 0x7F800000u) == 0 || (b >> 31))
        return bad(c, key, "must be a positive normal binary32 value");
    return 0;
}

/* rope_scaling: null/absent (plain §7), or Llama 3's "llama3" object, read
 * strictly (docs/rope_scaling.md): every key known, every parameter present
 * and in range. Other kinds of scaling are refused by name. */
static int get_rope_scaling(C *c, cis2_config *cfg)
{
    static const char *const keys[] = { "rope_type",        "type",
                                        "factor",           "low_freq_factor",
                                        "high_freq_factor", "original_max_position_embeddings" };
    const json_doc *d = c->d;
    uint32_t n;
    if (field(c, "rope_scaling", &n)) return 1;
    if (n == JSON_NONE || d->nodes[n].type == JSON_NULL) return 0;
    if (d->nodes[n].type != JSON_OBJECT) return bad(c, "rope_scaling", "must be null or an object");
    C s = { d, n, c->path, c->err, "rope_scaling." };
    char esc[96], why[160];
    for (uint32_t k = d->nodes[n].first; k != JSON_NONE; k = d->nodes[d->nodes[k].next].next) {
        size_t i = 0;
        while (i < sizeof keys / sizeof *keys && !json_str_eq(d, k, keys[i])) i++;
        if (i < sizeof keys / sizeof *keys) continue;
        size_t len;
        char *name = json_str_dup(d, k, &len);
        if (!name) return bad(c, "rope_scaling", "could not be read: out of memory");
        cis2_escape(name, len, esc, sizeof esc, CIS2_ESC_TEXT);
        free(name);
        snprintf(why, sizeof why, "has an unknown key \"%s\" (llama3 takes %s)", esc,
                 "factor, low_freq_factor, high_freq_factor, original_max_position_embeddings");
        return bad(c, "rope_scaling", why);
    }
    /* Transformers' older spelling "type" is the same key; both must agree. */
    uint32_t rt, ty;
    if (field(&s, "rope_type", &rt) || field(&s, "type", &ty)) return 1;
    const char *rname = rt != JSON_NONE ? "rope_type" : "type";
    if (rt == JSON_NONE) rt = ty;
    if (rt == JSON_NONE) return bad(&s, "rope_type", "is missing");
    if (d->nodes[rt].type != JSON_STRING) return bad(&s, rname, "must be a string");
    if (!json_str_eq(d, rt, "llama3")) {
        size_t len;
        char *v = json_str_dup(d, rt, &len);
        if (!v) return bad(c, "rope_scaling", "could not be read: out of memory");
        cis2_escape(v, len, esc, sizeof esc, CIS2_ESC_TEXT);
        free(v);
        snprintf(why, sizeof why, "= \"%s\" is unsupported (supported: llama3)", esc);
        return bad(&s, rname, why);
    }
    if (ty != JSON_NONE && ty != rt && !json_str_eq(d, ty, "llama3"))
        return bad(&s, "type", "differs from rope_scaling.rope_type (the same key, spelled twice)");
    double factor, low, high;
    int old;
    if (get_pos_f64(&s, "factor", &factor) || get_pos_f64(&s, "low_freq_factor", &low) ||
        get_pos_f64(&s, "high_freq_factor", &high) ||
        get_int(&s, "original_max_position_embeddings", 1, 1, 1 << 20, 0, &old))
        return 1;
    if (!(high > low))
        return bad(&s, "high_freq_factor", "must be greater than rope_scaling.low_freq_factor");
    volatile float span = (float)(high - low);
    if ((cis2_f2u(span) & 0x7F800000u) == 0)
        return bad(&s, "high_freq_factor",
                   "minus rope_scaling.low_freq_factor must be a normal binary32 value");
    cfg->rope_scaling = CIS2_ROPE_LLAMA3;
    cfg->rope_factor = factor;
    cfg->rope_low_freq_factor = low;
    cfg->rope_high_freq_factor = high;
    cfg->rope_original_max_pos = old;
    return 0;
}

/* A field that, when present, must be null/absent or equal a given literal. */
static int require_absent_or(C *c, const char *key, json_type want_type, const char *want_str,
                             const char *why)
{
    uint32_t n;
    if (field(c, key, &n)) return 1;
    if (n == JSON_NONE || c->d->nodes[n].type == JSON_NULL) return 0;
    uint8_t t = c->d->nodes[n].type;
    if (t == want_type && (!want_str || json_str_eq(c->d, n, want_str))) return 0;
    return bad(c, key, why);
}

int cis2_config_parse(const char *text, size_t len, const char *path, cis2_config *cfg, char *err)
{
    json_doc d;
    memset(cfg, 0, sizeof *cfg);
    if (json_parse(&d, text, len, path, err)) return 1;
    C c = { &d, 0, path, err, NULL };
    int rc = 1;
    if (d.nodes[0].type != JSON_OBJECT) {
        snprintf(err, CIS2_ERR_LEN, "%s: top level must be a JSON object", path);
        goto out;
    }

    if (arch_of(&c, &cfg->arch)) goto out;

    if (get_int(&c, "hidden_size", 1, 1, 65536, 0, &cfg->hidden) ||
        get_int(&c, "intermediate_size", 1, 1, 1 << 20, 0, &cfg->inter) ||
        get_int(&c, "num_hidden_layers", 1, 1, 1024, 0, &cfg->n_layers) ||
        get_int(&c, "num_attention_heads", 1, 1, 1024, 0, &cfg->n_heads) ||
        get_int(&c, "num_key_value_heads", 0, 1, 1024, cfg->n_heads, &cfg->n_kv_heads) ||
        get_int(&c, "vocab_size", 1, 1, 1 << 24, 0, &cfg->vocab) ||
        get_int(&c, "max_position_embeddings", 0, 1, 1 << 20, 2048, &cfg->max_pos) ||
        get_int(&c, "bos_token_id", 0, 0, 1 << 24, -1, &cfg->bos_id))
        goto out;
    uint32_t hdn;
    if (field(&c, "head_dim", &hdn)) goto out;
    if (hdn != JSON_NONE && d.nodes[hdn].type != JSON_NULL) {
        if (get_int(&c, "head_dim", 1, 2, 4096, 0, &cfg->head_dim)) goto out;
    } else {
        if (cfg->hidden % cfg->n_heads) {
            bad(&c, "hidden_size",
                "is not a multiple of num_attention_heads and no head_dim is given");
            goto out;
        }
        cfg->head_dim = cfg->hidden / cfg->n_heads;
    }
    if (cfg->head_dim % 2) {
        bad(&c, "head_dim", "must be even (rotate-half RoPE, §7.4)");
        goto out;
    }
    if (cfg->n_heads % cfg->n_kv_heads) {
        bad(&c, "num_key_value_heads", "must divide num_attention_heads");
        goto out;
    }
    if ((int64_t)cfg->n_heads * cfg->head_dim > 1 << 20) {
        bad(&c, "head_dim", "times num_attention_heads is too large");
        goto out;
    }

    if (get_eps(&c, &cfg->eps) || get_f32(&c, "rope_theta", 0, 10000.0, &cfg->rope_theta)) goto out;

    uint32_t eos;
    if (field(&c, "eos_token_id", &eos)) goto out;
    if (eos != JSON_NONE && d.nodes[eos].type == JSON_ARRAY) {
        for (uint32_t e = d.nodes[eos].first; e != JSON_NONE; e = d.nodes[e].next) {
            int64_t v;
            if (json_num_i64(&d, e, &v) || v < 0 || v >= (1 << 24)) {
                bad(&c, "eos_token_id", "must hold token ids");
                goto out;
            }
            if (cfg->n_eos == 8) {
                bad(&c, "eos_token_id", "lists more than 8 ids");
                goto out;
            }
            cfg->eos_ids[cfg->n_eos++] = (int)v;
        }
    } else {
        int e1;
        if (get_int(&c, "eos_token_id", 0, 0, 1 << 24, -1, &e1)) goto out;
        if (e1 >= 0) cfg->eos_ids[cfg->n_eos++] = e1;
    }

    /* Special ids must name rows of the embedding (a contradiction otherwise). */
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_ids[i] >= cfg->vocab) {
            bad(&c, "eos_token_id", "is not below vocab_size");
            goto out;
        }
    if (cfg->bos_id >= cfg->vocab) {
        bad(&c, "bos_token_id", "is not below vocab_size");
        goto out;
    }

    /* tie_word_embeddings: absent (-1) lets the checkpoint decide (§11.1,
     * model.c); attention_bias is read for its type only — the q/k/v bias
     * tensors decide (§9.1), and an o_proj bias is refused as an unexpected
     * tensor. */
    int attn_bias;
    if (get_bool(&c, "tie_word_embeddings", -1, &cfg->tied) ||
        get_bool(&c, "attention_bias", 0, &attn_bias))
        goto out;
    cfg->qk_norm = cfg->arch == CIS2_ARCH_QWEN3;

    /* Things CIS-2 v0.3b does not define: refuse rather than guess. */
    if (require_absent_or(&c, "hidden_act", JSON_STRING, "silu", "must be \"silu\" (§10)") ||
        get_rope_scaling(&c, cfg) ||
        require_absent_or(&c, "rope_interleaved", JSON_FALSE, NULL,
                          "must be false: only rotate-half RoPE is defined (§7.4)") ||
        require_absent_or(&c, "mlp_bias", JSON_FALSE, NULL,
                          "must be false: MLP biases are not part of CIS-2 §10") ||
        require_absent_or(&c, "use_sliding_window", JSON_FALSE, NULL,
                          "must be false: sliding-window attention is not part of CIS-2 §9"))
        goto out;
    /* Transformers rotates only head_dim * partial_rotary_factor dims; §7.4
     * rotates all of them. */
    float prf = 1.0f;
    if (get_f32(&c, "partial_rotary_factor", 0, 1.0, &prf)) goto out;
    if (prf != 1.0f) {
        bad(&c, "partial_rotary_factor", "must be 1: §7.4 rotates every dimension of a head");
        goto out;
    }
    rc = 0;
out:
    json_free(&d);
    return rc;
}

const char *cis2_arch_name(cis2_arch a)
{
    return a == CIS2_ARCH_LLAMA   ? "llama"
           : a == CIS2_ARCH_QWEN2 ? "qwen2"
           : a == CIS2_ARCH_QWEN3 ? "qwen3"
           : a == CIS2_ARCH_TOY   ? "cis2-toy"
                                  : "unknown";
}
