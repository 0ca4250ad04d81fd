/* The int8 quantizer's pieces (docs/quantization.md): the pinned row rule
 * against hand-derived values and numpy's (the values below were computed
 * with numpy float32 division and rint, a second reading), its independence
 * of the FP environment; the quantization_config parser (what it accepts,
 * and each refusal by name) and writer; the safetensors writer; the output
 * directory swapped in whole (quant_outdir.c) and the recorded source
 * (quant_source.c). */
#include "unit.h"
#include "core/json.h"
#include "model/model.h"
#include "model/quant.h"
#include "model/st_write.h"
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int row_is(const float *w, int n, const int8_t *want_q, uint32_t want_s)
{
    int8_t q[64];
    float s;
    if (cis2_quantize_row(w, n, q, &s) != -1) return 0;
    if (cis2_f2u(s) != want_s) return 0;
    return memcmp(q, want_q, (size_t)n) == 0;
}

static void test_rule(void)
{
    const float w1[5] = { 2.5f, 3.5f, -2.5f, 127.0f, -0.0f };
    const int8_t q1[5] = { 2, 4, -2, 127, 0 };
    CHECK("quantize_row: s = 127/127 = 1, ties to even (2.5 -> 2, 3.5 -> 4, -2.5 -> -2)",
          row_is(w1, 5, q1, 0x3F800000u), "differs");
    /* numpy: s = float32(0.5 / 127) = 0x3b810204; q = rint(w / s) */
    const float w2[8] = { 0.1f, -0.2f, 0.33f, 0.0125f, -0.07f, 0.19999f, 0.5f, -0.49f };
    const int8_t q2[8] = { 25, -51, 84, 3, -18, 51, 127, -124 };
    CHECK("quantize_row: 8 values = numpy's float32 reading (s 0x3b810204)",
          row_is(w2, 8, q2, 0x3B810204u), "differs");
    const float w3[2] = { 1.0f, 0.3f }; /* 0.3 / s = 38.100002 */
    const int8_t q3[2] = { 127, 38 };
    CHECK("quantize_row: s = 1/127 (0x3c010204), 0.3/s = 38.1 -> 38",
          row_is(w3, 2, q3, 0x3C010204u), "differs");
    const float w4[3] = { -0.75f, 0.25f, 0.0f }; /* the max in magnitude is negative */
    const int8_t q4[3] = { -127, 42, 0 };        /* 0.25 / (0.75/127) = 42.33 */
    int8_t q[64];
    float s;
    cis2_quantize_row(w4, 3, q, &s);
    CHECK("quantize_row: a negative extreme gives -127", q[0] == q4[0] && q[1] == q4[1] && !q[2],
          "q = %d %d %d", q[0], q[1], q[2]);
    const float z[4] = { 0.0f, -0.0f, 0.0f, 0.0f };
    const int8_t q0[4] = { 0, 0, 0, 0 };
    CHECK("quantize_row: an all-zero row gets s = 0, q = 0", row_is(z, 4, q0, 0u), "differs");
    const float sub[3] = { cis2_u2f(0x00400000u), -cis2_u2f(0x00000001u), 0.0f };
    CHECK("quantize_row: subnormal weights read as zero (DAZ): s = 0, q = 0",
          row_is(sub, 3, q0, 0u), "differs");
    const float tiny[2] = { 1e-37f, -5e-38f }; /* max/127 is subnormal: FTZ */
    CHECK("quantize_row: a scale that would be subnormal flushes to 0 (FTZ), q = 0",
          row_is(tiny, 2, q0, 0u), "differs");
    float bad[4] = { 1.0f, 2.0f, cis2_u2f(0x7FC00000u), 3.0f };
    memset(q, 0x55, sizeof q);
    int at = cis2_quantize_row(bad, 4, q, &s);
    CHECK("quantize_row: NaN refused with its index, nothing written", at == 2 && q[0] == 0x55,
          "at=%d", at);
    bad[2] = 1.0f;
    bad[3] = cis2_u2f(0xFF800000u);
    CHECK("quantize_row: -Inf refused with its index", cis2_quantize_row(bad, 4, q, &s) == 3,
          "not refused");
    /* same bytes pinned and unpinned: the rule does DAZ/FTZ by bit pattern */
    uint64_t st = 99;
    int same = 1;
    for (int r = 0; r < 200 && same; r++) {
        float w[64];
        for (int i = 0; i < 64; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t b = (uint32_t)(st >> 32);
            if (r % 3 == 0) b &= 0x80FFFFFFu; /* tiny values and subnormals */
            if ((b & 0x7F800000u) == 0x7F800000u) b &= 0xBFFFFFFFu;
            w[i] = cis2_u2f(b);
        }
        int8_t qa[64], qb[64];
        float sa, sb;
        uint64_t saved = cis2_fpenv_read();
        cis2_fpenv_unpin();
        int ra = cis2_quantize_row(w, 64, qa, &sa);
        cis2_fpenv_write(saved);
        int rb = cis2_quantize_row(w, 64, qb, &sb);
        same = ra == rb && cis2_f2u(sa) == cis2_f2u(sb) && !memcmp(qa, qb, 64);
    }
    CHECK("quantize_row: identical bytes with FTZ/DAZ pinned and unpinned (200 rows)", same,
          "differs");
}

/* ------------------------------------------------------- quantization_config */
static int qc_parse(const char *qc, cis2_quant_config *q, char *err)
{
    char buf[8192];
    snprintf(buf, sizeof buf, "{\"model_type\": \"llama\", \"quantization_config\": %s}", qc);
    return cis2_quant_config_parse(buf, strlen(buf), "config.json", q, err);
}

/* A published W8A16 config as llm-compressor writes it (field set from the
 * compressed-tensors QuantizationArgs/QuantizationConfig models). */
#define PUBLISHED                                                                                  \
    "{\"config_groups\": {\"group_0\": {\"input_activations\": null, \"output_activations\": "     \
    "null, \"targets\": [\"Linear\"], \"weights\": {\"actorder\": null, \"block_structure\": "     \
    "null, \"dynamic\": false, \"group_size\": null, \"num_bits\": 8, \"observer\": \"minmax\", "  \
    "\"observer_kwargs\": {}, \"strategy\": \"channel\", \"symmetric\": true, \"type\": \"int\", " \
    "\"zp_dtype\": null, \"scale_dtype\": null}}}, \"format\": \"naive-quantized\", "              \
    "\"global_compression_ratio\": 1.4, \"ignore\": [\"lm_head\"], \"kv_cache_scheme\": null, "    \
    "\"quant_method\": \"compressed-tensors\", \"quantization_status\": \"compressed\", "          \
    "\"sparsity_config\": {}, \"version\": \"0.9.1\"}"

static void expect_refusal(const char *name, const char *from, const char *to, const char *want)
{
    char qc[4096], err[CIS2_ERR_LEN] = "";
    const char *p = strstr(PUBLISHED, from);
    if (!p) {
        CHECK(name, 0, "test bug: '%s' not in the template", from);
        return;
    }
    snprintf(qc, sizeof qc, "%.*s%s%s", (int)(p - PUBLISHED), PUBLISHED, to, p + strlen(from));
    cis2_quant_config q;
    int rc = qc_parse(qc, &q, err);
    CHECK(name, rc == 1 && strstr(err, want) && !strchr(err, '\n'), "rc=%d err=%s", rc, err);
}

static void test_config(void)
{
    char err[CIS2_ERR_LEN] = "";
    cis2_quant_config q;
    for (int lm = 0; lm < 2; lm++)
        for (int em = 0; em < 2; em++) {
            char *j = cis2_quant_config_json(lm, em, 2), name[160];
            int rc = j ? qc_parse(j, &q, err) : 1;
            snprintf(name, sizeof name,
                     "quant_config: what cis2 quantize writes parses back (lm_head %d, embed %d)",
                     lm, em);
            CHECK(name,
                  rc == 0 && q.present && q.lm_head == lm && q.embed == em &&
                      !strcmp(q.format, "int-quantized") && q.n_ignore == 0,
                  "rc=%d err=%s", rc, err);
            cis2_quant_config_free(&q);
            free(j);
        }
    int rc = qc_parse(PUBLISHED, &q, err);
    CHECK("quant_config: a published W8A16 (naive-quantized, informational keys) is accepted",
          rc == 0 && q.present && !q.lm_head && !q.embed && !strcmp(q.format, "naive-quantized"),
          "rc=%d err=%s", rc, err);
    cis2_quant_config_free(&q);
    const char *none = "{\"model_type\": \"llama\"}";
    rc = cis2_quant_config_parse(none, strlen(none), "config.json", &q, err);
    CHECK("quant_config: absent -> not quantized", rc == 0 && !q.present, "rc=%d", rc);
    rc = qc_parse("null", &q, err);
    CHECK("quant_config: null -> not quantized", rc == 0 && !q.present, "rc=%d", rc);
    rc = qc_parse("{\"config_groups\": {\"g\": {\"targets\": [\"Linear\"], \"weights\": "
                  "{\"num_bits\": 8, \"group_size\": -1, \"scale_dtype\": \"torch.bfloat16\"}}},"
                  " \"format\": \"int-quantized\", \"quant_method\": \"compressed-tensors\","
                  " \"ignore\": [\"lm_head\", \"model.layers.0.mlp.down_proj\"]}",
                  &q, err);
    CHECK("quant_config: defaults (int, symmetric), group_size -1 = channel, bf16 scales, "
          "per-module ignore kept",
          rc == 0 && q.n_ignore == 1 && !strcmp(q.ignore[0], "model.layers.0.mlp.down_proj") &&
              !strcmp(q.scale_dtype, "torch.bfloat16"),
          "rc=%d err=%s", rc, err);
    cis2_quant_config_free(&q);

    expect_refusal("quant_config refuses 4-bit weights", "\"num_bits\": 8", "\"num_bits\": 4",
                   "weights.num_bits: is not 8");
    expect_refusal("quant_config refuses float (fp8) weights", "\"type\": \"int\"",
                   "\"type\": \"float\"", "weights.type: is not \"int\"");
    expect_refusal("quant_config refuses zero points (asymmetric)", "\"symmetric\": true",
                   "\"symmetric\": false", "zero points");
    expect_refusal("quant_config refuses group-wise scales",
                   "\"group_size\": null, \"num_bits\": 8, \"observer\": \"minmax\", "
                   "\"observer_kwargs\": {}, \"strategy\": \"channel\"",
                   "\"group_size\": 128, \"num_bits\": 8, \"observer\": \"minmax\", "
                   "\"observer_kwargs\": {}, \"strategy\": \"group\"",
                   "weights.group_size: is set");
    expect_refusal("quant_config refuses per-tensor scales", "\"strategy\": \"channel\"",
                   "\"strategy\": \"tensor\"", "is per-tensor");
    expect_refusal("quant_config refuses block-wise scales", "\"block_structure\": null",
                   "\"block_structure\": [128, 128]", "block-wise");
    expect_refusal(
        "quant_config refuses activation quantization (W8A8)", "\"input_activations\": null",
        "\"input_activations\": {\"num_bits\": 8, \"strategy\": \"token\", \"dynamic\": true}",
        "input_activations: is set: activation quantization");
    expect_refusal("quant_config refuses output activation quantization",
                   "\"output_activations\": null", "\"output_activations\": {}",
                   "output_activations: is set");
    expect_refusal("quant_config refuses dynamic weight scales", "\"dynamic\": false",
                   "\"dynamic\": true", "weights.dynamic");
    expect_refusal("quant_config refuses activation ordering (g_idx)", "\"actorder\": null",
                   "\"actorder\": \"group\"", "weights.actorder");
    expect_refusal("quant_config refuses packed weights", "\"naive-quantized\"",
                   "\"pack-quantized\"", "format: \"pack-quantized\" is not supported");
    expect_refusal("quant_config refuses other methods", "\"compressed-tensors\"", "\"gptq\"",
                   "quant_method: \"gptq\" is not supported");
    expect_refusal("quant_config refuses weights not stored as int8", "\"compressed\"",
                   "\"frozen\"", "quantization_status");
    expect_refusal("quant_config refuses regex targets", "\"targets\": [\"Linear\"]",
                   "\"targets\": [\"Linear\", \"re:.*q_proj\"]",
                   "\"re:.*q_proj\" is not supported");
    expect_refusal("quant_config refuses regex ignores", "\"ignore\": [\"lm_head\"]",
                   "\"ignore\": [\"re:.*lm_head\"]", "regular expressions");
    expect_refusal("quant_config refuses a preset scheme name",
                   "\"group_0\": {\"input_activations\": null, \"output_activations\": null, "
                   "\"targets\": [\"Linear\"], \"weights\": {\"actorder\": null, "
                   "\"block_structure\": null, \"dynamic\": false, \"group_size\": null, "
                   "\"num_bits\": 8, \"observer\": \"minmax\", \"observer_kwargs\": {}, "
                   "\"strategy\": \"channel\", \"symmetric\": true, \"type\": \"int\", "
                   "\"zp_dtype\": null, \"scale_dtype\": null}}",
                   "\"W8A16\": [\"Linear\"]", "config_groups.W8A16: is a preset scheme");
    expect_refusal("quant_config refuses a KV-cache scheme", "\"kv_cache_scheme\": null",
                   "\"kv_cache_scheme\": {\"num_bits\": 8}", "kv_cache_scheme: is set");
    expect_refusal("quant_config refuses sparsity", "\"sparsity_config\": {}",
                   "\"sparsity_config\": {\"format\": \"sparse-bitmask\"}", "sparse");
    expect_refusal("quant_config refuses unknown keys by name", "\"version\": \"0.9.1\"",
                   "\"version\": \"0.9.1\", \"foo\": 1", "quantization_config.foo: is an unknown");
    expect_refusal("quant_config refuses unknown weight keys by name", "\"zp_dtype\": null",
                   "\"zp_dtype\": null, \"bits\": 8", "weights.bits: is an unknown");
    expect_refusal("quant_config refuses duplicate keys", "\"format\": \"naive-quantized\"",
                   "\"format\": \"naive-quantized\", \"format\": \"naive-quantized\"",
                   "format: appears more than once");
    expect_refusal("quant_config refuses unsupported scale dtypes", "\"scale_dtype\": null",
                   "\"scale_dtype\": \"torch.float8_e4m3fn\"", "weights.scale_dtype");
    rc = qc_parse("{\"config_groups\": {\"g\": {\"targets\": [\"Linear\"], \"weights\": "
                  "{\"strategy\": \"channel\"}}}, \"quant_method\": \"compressed-tensors\"}",
                  &q, err);
    CHECK("quant_config refuses a missing format (the weights would be float)",
          rc == 1 && strstr(err, "format: is missing"), "rc=%d err=%s", rc, err);
    rc = qc_parse("{\"config_groups\": {\"g\": {\"targets\": [\"Linear\"], \"weights\": "
                  "{\"num_bits\": 8}}}, \"format\": \"int-quantized\", \"quant_method\": "
                  "\"compressed-tensors\"}",
                  &q, err);
    CHECK("quant_config refuses no strategy and no group_size (per-tensor)",
          rc == 1 && strstr(err, "strategy: is missing"), "rc=%d err=%s", rc, err);
    rc = qc_parse("{\"config_groups\": {\"g\\u000a\": []}, \"format\": \"int-quantized\", "
                  "\"quant_method\": \"compressed-tensors\"}",
                  &q, err);
    CHECK("quant_config: a control character in a key is shown escaped (one line)",
          rc == 1 && !strchr(err, '\n') && strstr(err, "g?"), "err=%s", err);
}

/* ----------------------------------------------------------- the writer */
static void test_writer(void)
{
    char err[CIS2_ERR_LEN] = "";
    float a[5] = { 1.5f, -2.0f, 0.0f, 3.25f, 1e-3f };
    uint16_t b[3] = { 0x3F80, 0xC000, 0x0001 };
    int8_t c[7] = { -128, -1, 0, 1, 2, 3, 127 };
    cis2_st_out t[3] = {
        { "z.last", "F32", 2, { 5, 1 }, a, sizeof a },
        { "a.first", "BF16", 1, { 3 }, b, sizeof b },
        { "m.int8", "I8", 2, { 1, 7 }, c, sizeof c },
    };
    const char *meta[] = { "format", "pt", "note", "quote \" and \\ and\nnewline" };
    uint8_t *buf;
    size_t len;
    int rc = cis2_st_build(t, 3, meta, 2, &buf, &len, err);
    uint64_t hlen = 0;
    for (int i = 0; rc == 0 && i < 8; i++) hlen |= (uint64_t)buf[i] << (8 * i);
    CHECK("st_write: header padded to a multiple of 8, data follows in the given order",
          rc == 0 && (8 + hlen) % 8 == 0 && len == 8 + hlen + 20 + 6 + 7 &&
              !memcmp(buf + 8 + hlen, a, 20) && !memcmp(buf + 8 + hlen + 20, b, 6) &&
              !memcmp(buf + 8 + hlen + 26, c, 7),
          "rc=%d err=%s", rc, err);
    json_doc d;
    int ok = rc == 0 && !json_parse(&d, (const char *)buf + 8, (size_t)hlen, "hdr", err);
    if (ok) {
        uint32_t m = json_get(&d, 0, "__metadata__", NULL), n = json_get(&d, m, "note", NULL);
        char *note = n != JSON_NONE ? json_str_dup(&d, n, NULL) : NULL;
        uint32_t i8 = json_get(&d, 0, "m.int8", NULL);
        uint32_t off = i8 != JSON_NONE ? json_get(&d, i8, "data_offsets", NULL) : JSON_NONE;
        int64_t o0 = -1, o1 = -1;
        if (off != JSON_NONE) {
            json_num_i64(&d, d.nodes[off].first, &o0);
            json_num_i64(&d, d.nodes[d.nodes[off].first].next, &o1);
        }
        ok = note && !strcmp(note, meta[3]) && i8 != JSON_NONE &&
             json_str_eq(&d, json_get(&d, i8, "dtype", NULL), "I8") && o0 == 26 && o1 == 33;
        free(note);
        json_free(&d);
    }
    CHECK("st_write: metadata escaped and read back, I8 entry with its offsets", ok, "%s", err);
    /* the reader takes the float tensors back bit for bit */
    cis2_st_out f[2] = { t[0], t[1] };
    uint8_t *fb;
    size_t fl;
    cis2_safetensors st;
    ok = !cis2_st_build(f, 2, NULL, 0, &fb, &fl, err) && !cis2_st_parse(&st, fb, fl, "mem", err);
    if (ok) {
        const cis2_st_tensor *x = cis2_st_find(&st, "z.last"), *y = cis2_st_find(&st, "a.first");
        ok = x && y && x->dtype == CIS2_DT_F32 && x->ndim == 2 && x->shape[0] == 5 &&
             !memcmp(x->data, a, 20) && y->dtype == CIS2_DT_BF16 && !memcmp(y->data, b, 6);
        cis2_st_close(&st);
        free(fb);
    }
    CHECK("st_write: the safetensors reader reads it back (shapes, dtypes, bytes)", ok, "%s", err);
    free(buf);
    cis2_st_out dup[2] = { t[0], t[0] };
    rc = cis2_st_build(dup, 2, NULL, 0, &buf, &len, err);
    CHECK("st_write refuses a name given twice", rc == 1 && strstr(err, "given twice"), "%s", err);
    cis2_st_out wrong = t[0];
    wrong.nbytes = 16;
    rc = cis2_st_build(&wrong, 1, NULL, 0, &buf, &len, err);
    CHECK("st_write refuses bytes that disagree with shape x dtype",
          rc == 1 && strstr(err, "16 bytes"), "%s", err);
    cis2_st_out ctl = t[0];
    ctl.name = "bad\nname";
    rc = cis2_st_build(&ctl, 1, NULL, 0, &buf, &len, err);
    CHECK("st_write refuses control characters in names", rc == 1 && strstr(err, "control"), "%s",
          err);
}

/* Entries of dir whose names start with prefix. */
static int count_prefix(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (!strncmp(de->d_name, prefix, strlen(prefix))) n++;
    if (d) closedir(d);
    return n;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_outdir(const char *dir)
{
    char err[CIS2_ERR_LEN], q[600], p[700], tmp[700];
    /* the recorded source: present, absent, unreadable */
    float v[2] = { 1, 2 };
    cis2_st_out t = { "x", "F32", 1, { 2 }, v, 8 };
    const char *meta[] = { "source_sha256", "abc" };
    snprintf(q, sizeof q, "%s/src1", dir);
    mkdir(q, 0755);
    snprintf(p, sizeof p, "%s/model.safetensors", q);
    int rc = cis2_st_write(p, &t, 1, meta, 1, err);
    char *val = NULL;
    size_t len = 0;
    int has = rc ? -2 : cis2_quant_recorded_source(q, &val, &len, err);
    CHECK("recorded-source: source_sha256 read from the header",
          has == 1 && len == 3 && !strcmp(val, "abc"), "has=%d %s", has, err);
    free(val);
    rc = cis2_st_write(p, &t, 1, NULL, 0, err);
    has = rc ? -2 : cis2_quant_recorded_source(q, &val, &len, err);
    CHECK("recorded-source: none recorded is 0", has == 0 && !val, "has=%d %s", has, err);
    unlink(p);
    has = cis2_quant_recorded_source(q, &val, &len, err);
    CHECK("recorded-source: no weights file is an error", has == -1 && strstr(err, "cannot open"),
          "has=%d %s", has, err);

    /* a new QDIR: built beside it, renamed in, nothing left beside */
    cis2_qout o;
    snprintf(q, sizeof q, "%s/q", dir);
    rc = cis2_qout_begin(&o, q, err);
    snprintf(tmp, sizeof tmp, "%s", o.tmp);
    int made = !rc && !strncmp(o.tmp, q, strlen(q)) && strstr(o.tmp, ".quantize-tmp.");
    snprintf(p, sizeof p, "%s/config.json", o.tmp);
    put(p, "new");
    char note[CIS2_ERR_LEN];
    rc = rc || cis2_qout_commit(&o, NULL, note, err);
    snprintf(p, sizeof p, "%s/config.json", q);
    struct stat st;
    CHECK("outdir: a new QDIR is the directory built beside it",
          made && !rc && stat(p, &st) == 0 && stat(tmp, &st) != 0 && !*note &&
              count_prefix(dir, "q.quantize-") == 0,
          "rc=%d %s", rc, err);
    /* an existing QDIR: swapped whole, the old one removed */
    put(p, "old");
    snprintf(p, sizeof p, "%s/model.safetensors", q);
    put(p, "old weights");
    rc = cis2_qout_begin(&o, q, err);
    snprintf(p, sizeof p, "%s/config.json", o.tmp);
    put(p, "new");
    rc = rc || cis2_qout_commit(&o, NULL, note, err);
    snprintf(p, sizeof p, "%s/model.safetensors", q);
    int gone = stat(p, &st) != 0;
    snprintf(p, sizeof p, "%s/config.json", q);
    FILE *f = fopen(p, "r");
    char got[8] = "";
    if (f) {
        if (!fgets(got, sizeof got, f)) got[0] = 0;
        fclose(f);
    }
    CHECK("outdir: an existing QDIR replaced whole (no old file kept, nothing beside)",
          !rc && gone && !strcmp(got, "new") && count_prefix(dir, "q.quantize-") == 0, "rc=%d %s",
          rc, err);
    /* refusals, before anything is made; abort removes what begin made */
    snprintf(p, sizeof p, "%s/README", q);
    put(p, "mine");
    rc = cis2_qout_begin(&o, q, err);
    CHECK("outdir: a file quantize does not write is refused",
          rc == 1 && strstr(err, "README: not a file cis2 quantize writes") &&
              count_prefix(dir, "q.quantize-") == 0,
          "rc=%d %s", rc, err);
    unlink(p);
    snprintf(p, sizeof p, "%s/qlink", dir);
    rc = symlink("q", p) ? -1 : cis2_qout_begin(&o, p, err);
    CHECK("outdir: a symbolic link is refused", rc == 1 && strstr(err, "is a symbolic link"),
          "rc=%d %s", rc, err);
    snprintf(p, sizeof p, "%s/q/..", dir);
    rc = cis2_qout_begin(&o, p, err);
    CHECK("outdir: '..' is refused", rc == 1 && strstr(err, "not '.', '..'"), "rc=%d %s", rc, err);
    rc = cis2_qout_begin(&o, q, err);
    snprintf(p, sizeof p, "%s/model.safetensors", o.tmp);
    put(p, "partial");
    snprintf(tmp, sizeof tmp, "%s", o.tmp);
    cis2_qout_abort(&o);
    CHECK("outdir: abort removes the directory built beside QDIR",
          !rc && stat(tmp, &st) != 0 && count_prefix(dir, "q.quantize-") == 0, "rc=%d %s", rc, err);
}

int main(void)
{
    test_rule();
    test_config();
    test_writer();
    const char *tt = getenv("TESTTMP");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/unit_quant.%d", tt && *tt ? tt : "/tmp", (int)getpid());
    mkdir(tt && *tt ? tt : "/tmp", 0700);
    if (mkdir(dir, 0700) != 0) printf("FAIL unit_quant.setup: cannot create %s\n", dir);
    else {
        test_outdir(dir);
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) printf("SKIP unit_quant.cleanup: %s left behind\n", dir);
    }
    UNIT_END();
}
