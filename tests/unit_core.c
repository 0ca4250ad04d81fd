/* Unit tests for the foundation: FP environment, pinned math, SHA-256,
 * JSON, config, safetensors and receipts. Golden values are the spec's own
 * (§1.3, §2.3, §5.1, §6.1, §6.6, §7.2) or FIPS 180-4's. */
#include "unit.h"
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/json.h"
#include <math.h>
#include <stdint.h>

static void hexof(const uint8_t d[32], char out[65]) { cis2_hex(d, 32, out); }

static void test_fp(void)
{
    CHECK("fpenv.pin", cis2_fpenv_pin() == 0 && cis2_fpenv_is_pinned(), "control=0x%llx",
          (unsigned long long)cis2_fpenv_read());
    CHECK("fpenv.selftest", cis2_fpenv_selftest(NULL) == 0, "a §1.3 row failed");
    CHECK("fpenv.still-pinned-after-selftest", cis2_fpenv_is_pinned(), "selftest left the pin off");
    CHECK("f32.subnormal-by-bits",
          cis2_f32_is_subnormal(0x00000001u) && cis2_f32_is_subnormal(0x807FFFFFu) &&
              !cis2_f32_is_subnormal(0x00800000u) && !cis2_f32_is_subnormal(0),
          "bit classification wrong");
}

static void test_math(void)
{
    float a[3] = { 1e8f, 1.0f, -1e8f }, b[3] = { 1.0f, 1.0f, 1.0f };
    CHECK("spec5.1.dot_seq-cancellation", cis2_f2u(cis2_dot_seq(a, b, 3)) == 0, "got 0x%08X",
          (unsigned)cis2_f2u(cis2_dot_seq(a, b, 3)));
    volatile float s64 = 64.0f;
    CHECK("spec6.1.rsqrt64", cis2_f2u(cis2_rsqrt(s64)) == 0x3E000000u, "got 0x%08X",
          (unsigned)cis2_f2u(cis2_rsqrt(s64)));
    uint8_t d[32];
    char h[65];
    cis2_table_digest(d);
    hexof(d, h);
    CHECK("spec6.6.table_digest",
          !strcmp(h, "23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d"), "got %s",
          h);
    float inv[32];
    cis2_inv_freq(64, 100000.0f, inv);
    cis2_f32_digest(inv, 32, d);
    hexof(d, h);
    CHECK("spec7.2.inv_freq_table_digest",
          !strcmp(h, "da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12"), "got %s",
          h);
    /* docs/rope_scaling.md: Llama-3.2-1B's RoPE (head_dim 64, theta 5e5, llama3
     * 32/1/4/8192), the digest cross-checked by tools/rope_scaling_check.py. */
    cis2_inv_freq(64, 500000.0f, inv);
    cis2_inv_freq_llama3(inv, 32, 32.0, 1.0, 4.0, 8192);
    cis2_f32_digest(inv, 32, d);
    hexof(d, h);
    CHECK("rope_scaling.llama3-llama32-1b-digest",
          !strcmp(h, "e74522aa75fb2c5f441fd4a27c1dafa625916b3af0c71d4172782f8ee8098aa8"), "got %s",
          h);
    /* §7.1: ln_pinned(1e5) within 2e-6 relative of the v0.1 literal 0x413834F1. */
    float l5 = cis2_ln_pinned(100000.0f), lit = cis2_u2f(0x413834F1u);
    CHECK("spec7.1.ln_theta-near-v0.1-literal", fabsf(l5 - lit) <= 2e-6f * lit, "ln=%.9g",
          (double)l5);
    CHECK("exp.zero-is-one", cis2_f2u(cis2_exp_pinned(0.0f)) == 0x3F800000u, "0x%08X",
          (unsigned)cis2_f2u(cis2_exp_pinned(0.0f)));
    CHECK("exp.clamps", isinf(cis2_exp_pinned(88.01f)) && cis2_f2u(cis2_exp_pinned(-88.01f)) == 0,
          "clamp wrong");
    CHECK("ln.one-is-zero", cis2_f2u(cis2_ln_pinned(1.0f)) == 0, "0x%08X",
          (unsigned)cis2_f2u(cis2_ln_pinned(1.0f)));
    CHECK("ln.domain",
          isnan(cis2_ln_pinned(-1.0f)) && cis2_f2u(cis2_ln_pinned(0.0f)) == 0xFF800000u &&
              cis2_f2u(cis2_ln_pinned(cis2_u2f(0x00000001u))) == 0xFF800000u,
          "domain guards wrong (subnormal must act as 0 under DAZ)");
    float s, c;
    cis2_sincos_pinned(0.0f, &s, &c);
    CHECK("sincos.zero", cis2_f2u(s) == 0 && cis2_f2u(c) == 0x3F800000u, "sin=0x%08X cos=0x%08X",
          (unsigned)cis2_f2u(s), (unsigned)cis2_f2u(c));
    CHECK("silu.large-x-is-x",
          cis2_f2u(cis2_silu(100.0f)) == cis2_f2u(100.0f) &&
              cis2_f2u(cis2_silu(-100.0f)) == 0x80000000u,
          "silu(100)=%g silu(-100)=0x%08X", (double)cis2_silu(100.0f),
          (unsigned)cis2_f2u(cis2_silu(-100.0f)));
    CHECK("ldexp_exact.saturates",
          isinf(cis2_ldexp_exact(1.5f, 200)) && cis2_ldexp_exact(1.5f, -200) == 0.0f &&
              cis2_ldexp_exact(1.5f, 3) == 12.0f,
          "wrong");
    int e;
    float m = cis2_frexp_exact(12.0f, &e);
    CHECK("frexp_exact", m == 0.75f && e == 4, "m=%g e=%d", (double)m, e);
}

/* The FIPS 180-4 examples (one block, two blocks, empty, a million 'a' fed
 * in odd-sized pieces) and update2 through one block function. */
static void test_sha_with(const char *impl)
{
    uint8_t d[32];
    char h[65], nm[64];
#define NM(s) (snprintf(nm, sizeof nm, "sha256.%s.%s", impl, s), nm)
    cis2_sha256_buf("", 0, d);
    hexof(d, h);
    CHECK(NM("empty"),
          !strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "%s", h);
    cis2_sha256_buf("abc", 3, d);
    hexof(d, h);
    CHECK(NM("abc"), !strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
          "%s", h);
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    cis2_sha256_buf(m448, strlen(m448), d);
    hexof(d, h);
    CHECK(NM("448bit"),
          !strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "%s", h);
    const char *m896 =
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
        "klmnopqrlmnopqrsmnopqrstnopqrstu";
    cis2_sha256_buf(m896, strlen(m896), d);
    hexof(d, h);
    CHECK(NM("896bit"),
          !strcmp(h, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"), "%s", h);
    char *mil = malloc(1000000);
    memset(mil, 'a', 1000000);
    cis2_sha256 st;
    cis2_sha256_init(&st);
    for (int i = 0; i < 1000000; i += 999)
        cis2_sha256_update(&st, mil + i, (size_t)(1000000 - i < 999 ? 1000000 - i : 999));
    cis2_sha256_final(&st, d);
    hexof(d, h);
    CHECK(NM("million-a-chunked"),
          !strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "%s", h);
    /* update2: the FIPS million 'a' as two streams in lockstep, and two
     * different streams against update one at a time, over states whose
     * buffers hold 0..63 bytes (each its own) and lengths around blocks. */
    cis2_sha256 s2a, s2b;
    cis2_sha256_init(&s2a);
    cis2_sha256_init(&s2b);
    for (int i = 0; i < 1000000; i += 999) {
        size_t n = (size_t)(1000000 - i < 999 ? 1000000 - i : 999);
        cis2_sha256_update2(&s2a, mil + i, &s2b, mil + i, n);
    }
    uint8_t d2[32];
    cis2_sha256_final(&s2a, d);
    cis2_sha256_final(&s2b, d2);
    hexof(d, h);
    CHECK(NM("update2-million-a"),
          !strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") &&
              !memcmp(d, d2, 32),
          "%s", h);
    for (size_t i = 0; i < 1000000; i++) mil[i] = (char)(i * 2654435761u >> 13);
    static const size_t PRE[] = { 0, 1, 4, 37, 63 }, LEN[] = { 0, 1, 60, 64, 65, 127, 128, 4100 };
    int bad = 0, cases = 0;
    for (size_t x = 0; x < 5; x++)
        for (size_t y = 0; y < 5; y++)
            for (size_t z = 0; z < 8; z++) {
                cis2_sha256 r[2], t[2];
                for (int k = 0; k < 2; k++) {
                    cis2_sha256_init(&r[k]);
                    cis2_sha256_update(&r[k], mil + 7 * k, k ? PRE[y] : PRE[x]);
                    t[k] = r[k];
                }
                const char *da = mil + 100, *db = mil + 9000 + 3 * z;
                cis2_sha256_update(&r[0], da, LEN[z]);
                cis2_sha256_update(&r[1], db, LEN[z]);
                cis2_sha256_update2(&t[0], da, &t[1], db, LEN[z]);
                cis2_sha256_update(&r[0], mil + 5, 70); /* and hashing on after it */
                cis2_sha256_update(&t[0], mil + 5, 70);
                uint8_t e0[32], e1[32], g0[32], g1[32];
                cis2_sha256_final(&r[0], e0);
                cis2_sha256_final(&r[1], e1);
                cis2_sha256_final(&t[0], g0);
                cis2_sha256_final(&t[1], g1);
                bad += memcmp(e0, g0, 32) != 0 || memcmp(e1, g1, 32) != 0;
                cases++;
            }
    CHECK(NM("update2-equals-update"), bad == 0, "%d of %d cases differ", bad, cases);
    free(mil);
#undef NM
}

/* Each block function this build and CPU have against the FIPS vectors,
 * then portable against SHA-NI (where both are here) on every length 0..300
 * at offsets 0..3; the default is restored after. */
static void test_sha(void)
{
    const char *dflt = cis2_sha256_impl();
    static const char *IMPL[] = { "portable", "sha-ni" };
    for (int i = 0; i < 2; i++) {
        if (cis2_sha256_use(IMPL[i])) SKIP("sha256.impl", "%s: not in this build or CPU", IMPL[i]);
        else test_sha_with(IMPL[i]);
    }
    if (cis2_sha256_use("sha-ni") == 0) {
        uint8_t buf[304];
        for (int i = 0; i < 304; i++) buf[i] = (uint8_t)(i * 2654435761u >> 13);
        int bad = 0;
        for (int off = 0; off < 4; off++)
            for (int len = 0; len <= 300; len++) {
                uint8_t dp[32], dn[32];
                cis2_sha256_use("portable");
                cis2_sha256_buf(buf + off, (size_t)len, dp);
                cis2_sha256_use("sha-ni");
                cis2_sha256_buf(buf + off, (size_t)len, dn);
                bad += memcmp(dp, dn, 32) != 0;
            }
        CHECK("sha256.portable-equals-sha-ni", bad == 0, "%d of 1204 lengths differ", bad);
    }
    cis2_sha256_use(dflt);
    printf("PASS sha256.impl-%s\n", cis2_sha256_impl());
}

static int jparse(const char *s)
{
    json_doc d;
    char err[CIS2_ERR_LEN];
    int rc = json_parse(&d, s, strlen(s), "t.json", err);
    if (!rc) json_free(&d);
    return rc;
}

static void test_json(void)
{
    const char *good[] = { "{}",
                           "[]",
                           "0",
                           "-0.5e+3",
                           "\"\\u00e9\\ud83d\\ude00\"",
                           "{\"a\":[1,2,{\"b\":null}],\"c\":true}",
                           " [ 1 , 2 ] ",
                           "\"é\"" };
    const char *bad[] = { "",
                          "{",
                          "[1,]",
                          "{\"a\":1,}",
                          "01",
                          "1.",
                          ".5",
                          "+1",
                          "NaN",
                          "Infinity",
                          "[1] 2",
                          "\"\\ud800\"",
                          "\"\\udc00x\"",
                          "\"a\x01\"",
                          "\"\xff\"",
                          "\"\xc0\xaf\"",
                          "\"\xed\xa0\x80\"",
                          "{'a':1}",
                          "[1 2]",
                          "{\"a\" 1}",
                          "tru",
                          "\"\\x\"",
                          "// c\n{}",
                          "\"abc" };
    int ok = 1;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (jparse(good[i])) {
            ok = 0;
            printf("  rejected good: %s\n", good[i]);
        }
    CHECK("json.accepts-valid", ok, "see above");
    ok = 1;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (!jparse(bad[i])) {
            ok = 0;
            printf("  accepted bad #%zu\n", i);
        }
    CHECK("json.rejects-invalid", ok, "see above");
    char deep[1200];
    memset(deep, '[', 600);
    memset(deep + 600, ']', 600);
    deep[1200 - 1] = 0;
    deep[1199] = 0;
    char deep2[1201];
    memcpy(deep2, deep, 600);
    memset(deep2 + 600, ']', 600);
    deep2[1200] = 0;
    CHECK("json.depth-limit", jparse(deep2) != 0, "600-deep nesting accepted");
    { /* a BOM is refused, named (it was "unexpected character" at col 1) */
        json_doc db;
        char e[CIS2_ERR_LEN] = "";
        const char *bom = "\xef\xbb\xbf{}";
        int r = json_parse(&db, bom, strlen(bom), "t.json", e);
        if (!r) json_free(&db);
        CHECK("json.bom-refused-and-named",
              r == 1 && strstr(e, "col 1: a UTF-8 byte order mark (BOM)"), e);
    }
    json_doc d;
    char err[CIS2_ERR_LEN];
    const char *src = "{\"x\":1e-05,\"y\":100000,\"s\":\"a\\n\\u00e9\",\"k\":1,\"k\":2}";
    json_parse(&d, src, strlen(src), "t", err);
    double x;
    int64_t iv;
    int dups;
    json_num_f64(&d, json_get(&d, 0, "x", NULL), &x);
    volatile float xf = (float)x;
    CHECK("spec2.3.eps-1e-5-is-0x3727C5AC", cis2_f2u(xf) == 0x3727C5ACu, "0x%08X",
          (unsigned)cis2_f2u(xf));
    CHECK("json.int", json_num_i64(&d, json_get(&d, 0, "y", NULL), &iv) == 0 && iv == 100000,
          "wrong");
    CHECK("json.int-rejects-float-spelling", json_num_i64(&d, json_get(&d, 0, "x", NULL), &iv) != 0,
          "accepted 1e-05 as integer");
    size_t l;
    char *sv = json_str_dup(&d, json_get(&d, 0, "s", NULL), &l);
    CHECK("json.string-escapes", l == 4 && !memcmp(sv, "a\n\xc3\xa9", 4), "got %zu bytes", l);
    free(sv);
    json_get(&d, 0, "k", &dups);
    CHECK("json.duplicate-keys-counted", dups == 2, "dups=%d", dups);
    json_free(&d);
}

/* json_num_i64 and json_num_int at the edges of int64, decided on the text
 * exactly: a number that a double would round into range (9223372036854775808.0
 * is 2^63 as a double) is still refused, and 2^63-1 is taken, not 2^63-1024. */
static void test_json_int(void)
{
    static const struct {
        const char *text;
        int i64_rc, int_rc; /* 0, JSON_NUM_NOT_INT or JSON_NUM_RANGE */
        int64_t want;
    } cases[] = {
        { "0", 0, 0, 0 },
        { "-0", 0, 0, 0 },
        { "4611686018427387904", 0, 0, INT64_C(4611686018427387904) }, /* 2^62 */
        { "4611686018427387905", 0, 0, INT64_C(4611686018427387905) },
        { "9223372036854775806", 0, 0, INT64_MAX - 1 },
        { "9223372036854775807", 0, 0, INT64_MAX },
        { "-9223372036854775807", 0, 0, -INT64_MAX },
        { "-9223372036854775808", 0, 0, INT64_MIN },
        { "9223372036854775808", JSON_NUM_RANGE, JSON_NUM_RANGE, 0 }, /* 2^63 */
        { "-9223372036854775809", JSON_NUM_RANGE, JSON_NUM_RANGE, 0 },
        { "18446744073709551616", JSON_NUM_RANGE, JSON_NUM_RANGE, 0 },
        { "92233720368547758070", JSON_NUM_RANGE, JSON_NUM_RANGE, 0 },
        { "100000000000000000000000000000", JSON_NUM_RANGE, JSON_NUM_RANGE, 0 },
        { "9223372036854775807.0", JSON_NUM_NOT_INT, 0, INT64_MAX },
        { "9223372036854775808.0", JSON_NUM_NOT_INT, JSON_NUM_RANGE, 0 },
        { "-9223372036854775808.000", JSON_NUM_NOT_INT, 0, INT64_MIN },
        { "9.223372036854775807e18", JSON_NUM_NOT_INT, 0, INT64_MAX },
        { "9.223372036854775808e18", JSON_NUM_NOT_INT, JSON_NUM_RANGE, 0 },
        { "9223372036854775807.5", JSON_NUM_NOT_INT, JSON_NUM_NOT_INT, 0 },
        { "1.0", JSON_NUM_NOT_INT, 0, 1 },
        { "16.000", JSON_NUM_NOT_INT, 0, 16 },
        { "1e3", JSON_NUM_NOT_INT, 0, 1000 },
        { "1E+3", JSON_NUM_NOT_INT, 0, 1000 },
        { "1200e-2", JSON_NUM_NOT_INT, 0, 12 },
        { "0.5e1", JSON_NUM_NOT_INT, 0, 5 },
        { "10.50e1", JSON_NUM_NOT_INT, 0, 105 },
        { "-2.0", JSON_NUM_NOT_INT, 0, -2 },
        { "0e999999999999", JSON_NUM_NOT_INT, 0, 0 },
        { "1.5", JSON_NUM_NOT_INT, JSON_NUM_NOT_INT, 0 },
        { "1e-3", JSON_NUM_NOT_INT, JSON_NUM_NOT_INT, 0 },
        { "1230e-2", JSON_NUM_NOT_INT, JSON_NUM_NOT_INT, 0 },
        { "1e-999999999999", JSON_NUM_NOT_INT, JSON_NUM_NOT_INT, 0 },
        { "1e19", JSON_NUM_NOT_INT, JSON_NUM_RANGE, 0 },
        { "1e400", JSON_NUM_NOT_INT, JSON_NUM_RANGE, 0 },
        { "1e999999999999", JSON_NUM_NOT_INT, JSON_NUM_RANGE, 0 },
        { "\"1\"", JSON_NUM_NOT_INT, JSON_NUM_NOT_INT, 0 },
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_doc d;
        char err[CIS2_ERR_LEN];
        if (json_parse(&d, cases[i].text, strlen(cases[i].text), "t", err)) {
            printf("  json.int64-edges: %s does not parse: %s\n", cases[i].text, err);
            bad++;
            continue;
        }
        int64_t a = -7, b = -7;
        int ra = json_num_i64(&d, 0, &a), rb = json_num_int(&d, 0, &b);
        if (ra != cases[i].i64_rc || rb != cases[i].int_rc || (ra == 0 && a != cases[i].want) ||
            (rb == 0 && b != cases[i].want)) {
            printf("  json.int64-edges: %s: json_num_i64 %d (%lld), json_num_int %d (%lld); "
                   "want %d, %d (%lld)\n",
                   cases[i].text, ra, (long long)a, rb, (long long)b, cases[i].i64_rc,
                   cases[i].int_rc, (long long)cases[i].want);
            bad++;
        }
        json_free(&d);
    }
    CHECK("json.int64-edges", bad == 0, "%d of %zu cases wrong", bad,
          sizeof cases / sizeof cases[0]);
}

static int cfg(const char *body, cis2_config *c, char *err)
{
    return cis2_config_parse(body, strlen(body), "config.json", c, err);
}

#define BASECFG                                                                                    \
    "\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":" \
    "2,"                                                                                           \
    "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":320,\"rms_norm_eps\":1e-"  \
    "05"

static void test_config(void)
{
    cis2_config c;
    char err[CIS2_ERR_LEN];
    int rc = cfg("{" BASECFG ",\"rope_theta\":100000}", &c, err);
    CHECK("config.basic",
          rc == 0 && c.head_dim == 16 && c.n_kv_heads == 2 && cis2_f2u(c.eps) == 0x3727C5ACu &&
              c.rope_theta == 100000.0f && c.max_pos == 2048 && c.tied == -1 /* the file decides */,
          "%s", rc ? err : "wrong values");
    rc = cfg("{" BASECFG ",\"rope_theta\":1000000.0,\"head_dim\":32,\"tie_word_embeddings\":true}",
             &c, err);
    CHECK("config.explicit-head-dim", rc == 0 && c.head_dim == 32 && c.tied && c.rope_theta == 1e6f,
          "%s", err);
    rc = cfg("{" BASECFG ",\"model_type\":\"qwen2\"}", &c, err);
    CHECK("config.duplicate-key-rejected", rc != 0 && strstr(err, "more than once"), "%s", err);
    struct {
        const char *body, *want;
    } bad[] = {
        { "{\"model_type\":\"gpt2\"}", "model_type" },
        { "{" BASECFG ",\"hidden_act\":\"gelu\"}", "hidden_act" },
        { "{" BASECFG ",\"rope_scaling\":{\"type\":\"linear\"}}", "rope_scaling" },
        { "{" BASECFG ",\"rope_theta\":-1}", "rope_theta" },
        { "{" BASECFG ",\"head_dim\":15}", "head_dim" },
        { "{" BASECFG ",\"num_key_value_heads\":3}", "num_key_value_heads" },
        { "{" BASECFG ",\"max_position_embeddings\":0}", "max_position_embeddings" },
        { "{" BASECFG ",\"attention_bias\":1}", "attention_bias" },
        { "{\"model_type\":\"llama\",\"hidden_size\":64.0}", "hidden_size" },
        { "{\"model_type\":\"llama\",\"hidden_size\":64}", "intermediate_size" },
        { "{" BASECFG ",\"rope_interleaved\":true}", "rope_interleaved" },
        { "[]", "object" },
        { "{" BASECFG ",}", "invalid JSON" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char name[64];
        snprintf(name, sizeof name, "config.rejects.%zu-%s", i, bad[i].want);
        rc = cfg(bad[i].body, &c, err);
        CHECK(name, rc != 0 && strstr(err, bad[i].want) && strstr(err, "config.json"),
              "rc=%d err=%s", rc, err);
    }
    rc = cfg("{" BASECFG ",\"rope_scaling\":{\"type\":\"llama3\",\"factor\":8,"
             "\"low_freq_factor\":1.5,\"high_freq_factor\":4.25,"
             "\"original_max_position_embeddings\":8192}}",
             &c, err);
    CHECK("config.rope-scaling-llama3",
          rc == 0 && c.rope_scaling == CIS2_ROPE_LLAMA3 && c.rope_factor == 8.0 &&
              c.rope_low_freq_factor == 1.5 && c.rope_high_freq_factor == 4.25 &&
              c.rope_original_max_pos == 8192,
          "%s", rc ? err : "wrong values");
    rc = cfg("{" BASECFG ",\"rope_scaling\":null}", &c, err);
    CHECK("config.rope-scaling-null", rc == 0 && c.rope_scaling == CIS2_ROPE_NONE, "%s", err);
    /* An integer beyond int64 is named as such, not as a fraction or exponent;
     * int64's largest is read and refused by the field's own range. */
    rc = cfg("{\"model_type\":\"llama\",\"hidden_size\":9223372036854775808}", &c, err);
    CHECK("config.int-beyond-int64",
          rc != 0 && strstr(err, "\"hidden_size\" is beyond the 64-bit integer range"), "%s", err);
    rc = cfg("{\"model_type\":\"llama\",\"hidden_size\":9223372036854775807}", &c, err);
    CHECK("config.int64-max-out-of-range",
          rc != 0 && strstr(err, "= 9223372036854775807 is out of range"), "%s", err);
    /* §2.2 names no model_type: absent is the Llama family, `architectures`
     * may name Qwen2/Qwen3; a present model_type decides, and an unknown one
     * is refused by name. */
#define NOTYPE                                                                                     \
    "\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,"                        \
    "\"num_attention_heads\":4,\"vocab_size\":320,\"rms_norm_eps\":1e-05"
    struct {
        const char *body;
        cis2_arch arch;
    } types[] = {
        { "{" NOTYPE "}", CIS2_ARCH_LLAMA },
        { "{" NOTYPE ",\"architectures\":[\"LlamaForCausalLM\"]}", CIS2_ARCH_LLAMA },
        { "{" NOTYPE ",\"architectures\":[\"Qwen2ForCausalLM\"]}", CIS2_ARCH_QWEN2 },
        { "{" NOTYPE ",\"architectures\":[\"Qwen3ForCausalLM\"]}", CIS2_ARCH_QWEN3 },
        { "{" NOTYPE ",\"architectures\":[\"SomethingElse\"]}", CIS2_ARCH_LLAMA },
        { "{" NOTYPE ",\"model_type\":\"llama\",\"architectures\":[\"Qwen3ForCausalLM\"]}",
          CIS2_ARCH_LLAMA },
        { "{" NOTYPE ",\"model_type\":\"qwen2\"}", CIS2_ARCH_QWEN2 },
    };
    int tbad = 0;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (cfg(types[i].body, &c, err) || c.arch != types[i].arch) {
            printf("  %s -> rc=%d arch=%d: %s\n", types[i].body, cfg(types[i].body, &c, err),
                   (int)c.arch, err);
            tbad++;
        }
    CHECK("config.arch-without-model_type", tbad == 0, "%d cases wrong", tbad);
    CHECK("config.unknown-model_type-refused-by-name",
          cfg("{" NOTYPE ",\"model_type\":\"mistral\"}", &c, err) && strstr(err, "model_type"),
          "%s", err);
    CHECK("config.architectures-must-be-names",
          cfg("{" NOTYPE ",\"architectures\":\"Qwen2ForCausalLM\"}", &c, err) &&
              strstr(err, "architectures"),
          "%s", err);
    /* attention_bias is read for its type only: the tensors decide (§9.1) */
    CHECK("config.attention_bias-true-accepted",
          cfg("{" BASECFG ",\"attention_bias\":true}", &c, err) == 0 && c.qkv_bias == 0, "%s", err);
    /* §2.3 rms_norm_eps of 0 or subnormal: one RNE cast, computed as written */
    struct {
        const char *eps;
        uint32_t bits;
    } eps[] = { { "0", 0 },
                { "0.0", 0 },
                { "-0.0", 0x80000000u },
                { "1e-50", 0 },
                { "1e-45", 1 },
                { "7e-46", 0 },
                { "8e-46", 1 },
                { "1e-40", 0x000116C2u },
                { "1.1754942e-38", 0x007FFFFFu },
                { "1.17549430e-38", 0x00800000u },
                { "1e-05", 0x3727C5ACu } };
    int ebad = 0;
    for (size_t i = 0; i < sizeof eps / sizeof *eps; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,"
                 "\"num_attention_heads\":4,\"vocab_size\":320,\"rms_norm_eps\":%s}",
                 eps[i].eps);
        if (cfg(body, &c, err) || cis2_f2u(c.eps) != eps[i].bits) {
            printf("  rms_norm_eps %s -> 0x%08X, want 0x%08X (%s)\n", eps[i].eps,
                   (unsigned)cis2_f2u(c.eps), (unsigned)eps[i].bits, err);
            ebad++;
        }
    }
    CHECK("config.eps-zero-and-subnormal-as-written", ebad == 0, "%d wrong", ebad);
    CHECK("config.rejects-negative-eps",
          cfg("{\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,"
              "\"num_attention_heads\":4,\"vocab_size\":320,\"rms_norm_eps\":-1e-05}",
              &c, err) != 0 &&
              strstr(err, "rms_norm_eps") && strstr(err, "negative"),
          "%s", err);
    CHECK("config.rejects-eps-overflow",
          cfg("{\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,"
              "\"num_attention_heads\":4,\"vocab_size\":320,\"rms_norm_eps\":1e39}",
              &c, err) != 0 &&
              strstr(err, "rms_norm_eps"),
          "%s", err);
#undef NOTYPE
}

/* Build a safetensors image: header JSON + payload of `plen` bytes. */
static uint8_t *st_image(const char *hdr, size_t plen, size_t *len)
{
    size_t hl = strlen(hdr);
    *len = 8 + hl + plen;
    uint8_t *b = calloc(1, *len);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    return b;
}

static void test_safetensors(void)
{
    char err[CIS2_ERR_LEN];
    cis2_safetensors st;
    size_t len;
    uint8_t *img = st_image("{\"__metadata__\":{\"k\":\"v\"},\"b\":{\"dtype\":\"F32\",\"shape\":[2]"
                            ",\"data_offsets\":[4,12]},"
                            "\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}  ",
                            12, &len);
    img[len - 12] = 0x80;
    img[len - 11] = 0x3F; /* a[0] = bf16 1.0 */
    int rc = cis2_st_parse(&st, img, len, "m.safetensors", err);
    const cis2_st_tensor *a = rc ? NULL : cis2_st_find(&st, "a");
    float v[2] = { 0 };
    if (a) cis2_st_to_f32(a, v);
    CHECK("safetensors.valid",
          rc == 0 && st.n == 2 && a && v[0] == 1.0f && st.metadata_json &&
              strstr(st.metadata_json, "\"k\""),
          "%s", rc ? err : "wrong contents");
    if (!rc) cis2_st_close(&st);
    free(img);
    struct {
        const char *hdr;
        size_t plen;
        const char *want;
    } bad[] = {
        { "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
          "unsupported dtype" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "span" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the end" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":"
          "\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
          8, "overlap" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "hole" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "trailing" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "non-negative" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "begin <= end" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
          "unexpected keys" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "data_offsets" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":"
          "\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
          8, "twice" },
        { "{\"__metadata__\":{\"k\":1}}", 0, "__metadata__" },
        { "{\"a\":[1,2]", 0, "invalid JSON" },
        { "[]", 0, "does not start with" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
          "overflow" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char name[80];
        snprintf(name, sizeof name, "safetensors.rejects.%zu", i);
        img = st_image(bad[i].hdr, bad[i].plen, &len);
        rc = cis2_st_parse(&st, img, len, "m.safetensors", err);
        CHECK(name, rc != 0 && strstr(err, bad[i].want) && strstr(err, "m.safetensors"),
              "want '%s', got rc=%d '%s'", bad[i].want, rc, err);
        if (!rc) cis2_st_close(&st);
        free(img);
    }
    uint8_t tiny[5] = { 1, 2, 3, 4, 5 };
    CHECK("safetensors.rejects.truncated",
          cis2_st_parse(&st, tiny, 5, "m.safetensors", err) && strstr(err, "truncated"), "%s", err);
    uint8_t big[16] = { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{', '}' };
    CHECK("safetensors.rejects.header-len-beyond-file",
          cis2_st_parse(&st, big, 16, "m.safetensors", err) && strstr(err, "header length"), "%s",
          err);
    uint8_t huge[16] = { 0, 0, 0, 0, 0, 0, 0, 0x10, '{', '}' };
    CHECK("safetensors.rejects.header-len-absurd",
          cis2_st_parse(&st, huge, 16, "m.safetensors", err) && strstr(err, "out of bounds"), "%s",
          err);
}

/* A second reading of binary16 → binary32: value = ±m·2^(e-25) in double. */
static void test_f16(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t e = (h >> 10) & 31, m = h & 1023;
        double v;
        if (e == 31) continue;
        if (e == 0) v = ldexp((double)m, -24);
        else v = ldexp((double)(m | 1024), (int)e - 25);
        if (h & 0x8000) v = -v;
        float want = (float)v; /* exact: every f16 value is an f32 value */
        if (cis2_f2u(cis2_f16_to_f32((uint16_t)h)) != cis2_f2u(want)) bad++;
    }
    CHECK("f16.all-finite-values-exact", bad == 0, "%d values differ", bad);
    CHECK("f16.inf-nan", isinf(cis2_f16_to_f32(0x7C00)) && isnan(cis2_f16_to_f32(0x7E00)), "wrong");
    CHECK("bf16.widen-is-shift",
          cis2_f2u(cis2_bf16_to_f32(0x3F80)) == 0x3F800000u &&
              cis2_f2u(cis2_bf16_to_f32(0x0001)) == 0x00010000u,
          "wrong");
}

static void test_receipt(void)
{
    cis2_receipt r = { 0 }, p;
    strcpy(r.spec_version, "0.3b");
    for (int i = 0; i < 32; i++) {
        r.weights_sha[i] = (uint8_t)i;
        r.witness_digest[i] = (uint8_t)(255 - i);
    }
    int32_t pids[3] = { 6403, 1980, 0 }, gids[2] = { 28, 665 };
    r.prompt_bytes = (uint8_t *)"Once";
    r.prompt_len = 4;
    r.prompt_ids = pids;
    r.n_prompt = 3;
    r.gen_ids = gids;
    r.n_gen = 2;
    r.gen_toks = 2;
    char *txt, err[CIS2_ERR_LEN];
    size_t len;
    cis2_receipt_format(&r, &txt, &len);
    int rc = cis2_receipt_parse(txt, len, "r.txt", &p, err);
    CHECK("receipt.roundtrip",
          rc == 0 && p.n_prompt == 3 && p.prompt_ids[2] == 0 && p.n_gen == 2 && p.prompt_len == 4 &&
              !memcmp(p.prompt_bytes, "Once", 4) && !memcmp(p.weights_sha, r.weights_sha, 32) &&
              !memcmp(p.witness_digest, r.witness_digest, 32),
          "%s", rc ? err : "fields differ");
    if (!rc) cis2_receipt_free(&p);
    CHECK("receipt.header-and-13-lines",
          !strncmp(txt, "CIS-2-RECEIPT v1\nspec-version 0.3b\nweights-sha256 000102", 56), "%.60s",
          txt);
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += txt[i] == '\n';
    CHECK("receipt.line-count", lines == 14, "%d lines", lines);
    /* Malformed variants, each derived from the good text. */
    struct {
        const char *from, *to, *want;
    } bad[] = {
        { "gen-toks 2", "gen-toks 3", "disagrees" },
        { "dtype fp32", "dtype fp16", "dtype" },
        { "spec-version 0.3b", "spec-version 0.3", "spec-version" },
        { "dtype fp32\n", "dtype fp32\ndtype fp32\n", "duplicate" },
        { "dtype fp32\n", "", "out of order" },
        { "dtype fp32", "colour fp32", "unknown key" },
        { "weights-sha256 00", "weights-sha256 0G", "malformed" },
        { "weights-sha256 00", "weights-sha256 00ab", "malformed" },
        { "prompt-hex 4f6e6365", "prompt-hex 4f6e636", "malformed" },
        { "prompt-token-ids 6403,1980,0", "prompt-token-ids 6403, 1980,0", "malformed" },
        { "prompt-token-ids 6403,1980,0", "prompt-token-ids 06403,1980,0", "malformed" },
        { "CIS-2-RECEIPT v1", "CIS-2-RECEIPT v2", "first line" },
        { "dtype fp32\n", "dtype fp32\r\n", "carriage return" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char name[64], *pos = strstr(txt, bad[i].from);
        snprintf(name, sizeof name, "receipt.rejects.%zu", i);
        if (!pos) {
            CHECK(name, 0, "template '%s' not found", bad[i].from);
            continue;
        }
        size_t fl = strlen(bad[i].from), tl = strlen(bad[i].to);
        char *m = malloc(len + tl + 1);
        memcpy(m, txt, (size_t)(pos - txt));
        memcpy(m + (pos - txt), bad[i].to, tl);
        memcpy(m + (pos - txt) + tl, pos + fl, len - (size_t)(pos - txt) - fl);
        size_t ml = len - fl + tl;
        rc = cis2_receipt_parse(m, ml, "r.txt", &p, err);
        CHECK(name, rc != 0 && strstr(err, bad[i].want) && strstr(err, "r.txt"),
              "want '%s', rc=%d err='%s'", bad[i].want, rc, err);
        if (!rc) cis2_receipt_free(&p);
        free(m);
    }
    char *extra = malloc(len + 8);
    memcpy(extra, txt, len);
    memcpy(extra + len, "x y\n", 4);
    rc = cis2_receipt_parse(extra, len + 4, "r.txt", &p, err);
    CHECK("receipt.rejects.trailing-line", rc != 0 && strstr(err, "after the last line"), "%s",
          err);
    size_t cut = 0;
    for (int nl = 0; cut < len && nl < 8; cut++) nl += txt[cut] == '\n';
    rc = cis2_receipt_parse(txt, cut, "r.txt", &p, err);
    CHECK("receipt.rejects.truncated", rc != 0 && strstr(err, "missing line"), "%s", err);
    free(extra);
    free(txt);
}

static void test_ids(void)
{
    int32_t *v;
    int n;
    char err[CIS2_ERR_LEN];
    CHECK("ids.parse", cis2_parse_ids("0,12,345", &v, &n, err) == 0 && n == 3 && v[2] == 345, "%s",
          err);
    free(v);
    const char *bad[] = { "", "1,", ",1", "1,,2", "1 2", "-1", "01", "99999999999", "1;2", "a" };
    int ok = 1;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (cis2_parse_ids(bad[i], &v, &n, err) == 0) {
            ok = 0;
            free(v);
            printf("  accepted '%s'\n", bad[i]);
        }
    CHECK("ids.rejects-malformed", ok, "see above");
}

/* core/strbuf.c: JSON string escaping never lets a control character or a
 * non-UTF-8 byte through; core/io.c: inputs that are not regular files are
 * refused without blocking, outputs never replace a non-file. */
static void test_sb_io(void)
{
    cis2_sb sb = { 0 };
    const char raw[] = "a\"b\\c\n\x01\x7f\xc3\xa9\xff\xed\xa0\x80z";
    cis2_sb_json_str(&sb, raw, sizeof raw - 1);
    char *j = cis2_sb_take(&sb, NULL);
    const char *want = "\"a\\\"b\\\\c\\n\\u0001\\u007f\xc3\xa9\\ufffd\\ufffd\\ufffd\\ufffdz\"";
    CHECK("strbuf.json-escape", j && !strcmp(j, want), "got %s want %s", j ? j : "(oom)", want);
    free(j);
    char err[CIS2_ERR_LEN], dir[] = "/tmp/cis2-unit-io-XXXXXX", fifo[300], reg[300];
    if (!mkdtemp(dir)) {
        CHECK("io.tmpdir", 0, "mkdtemp failed");
        return;
    }
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(reg, sizeof reg, "%s/file", dir);
    int made = mkfifo(fifo, 0600) == 0;
    char *buf = NULL;
    size_t len = 0;
    int rc = made ? cis2_read_file(fifo, &buf, &len, err) : -1;
    CHECK("io.fifo-input-refused-without-blocking",
          rc == 1 && strstr(err, "not a regular file (a FIFO)"), "rc=%d %s", rc, err);
    rc = cis2_check_output_path(fifo, err);
    CHECK("io.fifo-output-refused", rc == 1 && strstr(err, "refusing to replace a FIFO"), "%s",
          err);
    rc = cis2_write_file_atomic("/dev/null", "x", 1, err);
    CHECK("io.device-output-refused", rc == 1 && strstr(err, "character device"), "%s", err);
    rc = cis2_write_file_atomic(reg, "hello", 5, err);
    int rd = rc == 0 && cis2_read_file_max(reg, 5, &buf, &len, err) == 0 && len == 5 &&
             !memcmp(buf, "hello", 5);
    free(buf);
    CHECK("io.atomic-write-then-read", rd, "%s", err);
    rc = cis2_read_file_max(reg, 4, &buf, &len, err);
    CHECK("io.size-limit-refused-unread", rc == 1 && strstr(err, "more than the 4"), "%s", err);
    unlink(fifo);
    unlink(reg);
    rmdir(dir);
}

/* Every public call's err is one line without terminal escapes, whatever
 * the caller's path or name held (cis2.h conventions; docs/errors.md): the
 * parts a caller passed in come back escaped, as the parts from files do. */
static void test_err_one_line(void)
{
    const char *bad = "/nonexistent\n\x1b[31mdir";
    char err[CIS2_ERR_LEN];
    int32_t *ids;
    int n, fails = 0;
    cis2_model *m;
    cis2_tokenizer *t;
    cis2_chat_template *ct;
    cis2_chat_msg *msgs;
    char what[8][CIS2_ERR_LEN];
    int rc[8];
    rc[0] = cis2_model_open(&m, bad, NULL, err);
    snprintf(what[0], sizeof what[0], "model_open: %s", err);
    rc[1] = cis2_tokenizer_load(&t, bad, err);
    snprintf(what[1], sizeof what[1], "tokenizer_load: %s", err);
    rc[2] = cis2_chat_template_load(&ct, bad, err);
    snprintf(what[2], sizeof what[2], "chat_template_load: %s", err);
    rc[3] = cis2_chat_template_from_text(&ct, "{{", 2, bad, err);
    snprintf(what[3], sizeof what[3], "chat_template_from_text: %s", err);
    rc[4] = cis2_chat_parse_messages("[", 1, bad, &msgs, &n, err);
    snprintf(what[4], sizeof what[4], "chat_parse_messages: %s", err);
    rc[5] = cis2_parse_ids("1\n\x1b[31m", &ids, &n, err);
    snprintf(what[5], sizeof what[5], "parse_ids: %s", err);
    rc[6] = cis2_tokenizer_parse(&t, "{", 1, bad, err);
    snprintf(what[6], sizeof what[6], "tokenizer_parse: %s", err);
    cis2_receipt r;
    memset(&r, 0, sizeof r);
    strcpy(r.spec_version, CIS2_SPEC_VERSION);
    int32_t one = 1;
    r.prompt_ids = &one;
    r.n_prompt = 1;
    rc[7] = cis2_receipt_write(&r, "/nonexistent\n\x1b[31mdir/r.txt", err);
    snprintf(what[7], sizeof what[7], "receipt_write: %s", err);
    for (int i = 0; i < 8; i++) {
        const char *e = strchr(what[i], ':') + 2;
        if (!rc[i] || strchr(e, '\n') || strchr(e, 0x1b) || !strstr(e, "\\n")) {
            printf("  %s\n", what[i]);
            fails++;
        }
    }
    CHECK("api.err-is-one-escaped-line", fails == 0, "%d of 8 calls (listed above)", fails);
}

/* NULL where a call needs a pointer, and empty counts: refused with a message
 * (or -1), never dereferenced. */
static void test_api_nulls(void)
{
    char err[CIS2_ERR_LEN] = "";
    cis2_model *m = (cis2_model *)1;
    cis2_engine *e = (cis2_engine *)1;
    cis2_receipt r;
    float one = 1.0f;
    int r1 = cis2_model_open(&m, NULL, NULL, err);
    CHECK("api.model-open-null-dir", r1 && m == NULL && strstr(err, "dir is NULL"), "%s", err);
    int r2 = cis2_engine_new(&e, NULL, NULL, err);
    CHECK("api.engine-new-null-model", r2 && e == NULL && strstr(err, "m is NULL"), "%s", err);
    int r3 = cis2_receipt_parse(NULL, 10, NULL, &r, err);
    CHECK("api.receipt-parse-null-text", r3 && strstr(err, "receipt: 10 bytes of text at NULL"),
          "%s", err);
    CHECK("api.argmax-empty", cis2_argmax(&one, 0) == -1 && cis2_argmax(&one, 1) == 0,
          "argmax n=0 gave %d", (int)cis2_argmax(&one, 0));
    /* an enum value outside cis2_hash_mode was read as FULL */
    cis2_model_opts mo = { (cis2_hash_mode)7 };
    m = (cis2_model *)1;
    int r4 = cis2_model_open(&m, "no-such-dir", &mo, err);
    CHECK("api.model-open-unknown-hash-mode", r4 && m == NULL && strstr(err, "unknown hash mode 7"),
          "%s", err);
    /* a NULL engine: refused with the reason where there is an err, else
     * nothing to do (it crashed) */
    int32_t id = 1, sq = 5;
    cis2_gen_opts g = { 2, 0, NULL, NULL, NULL, 0 };
    cis2_result res;
    float lg[4];
    int n1 = cis2_generate(NULL, &id, 1, &g, &res, err);
    int ok = n1 && strstr(err, "cis2_generate: no engine") != NULL;
    int n2 = cis2_seq_submit(NULL, &id, 1, &g, &sq, err);
    ok = ok && n2 && sq == -1 && strstr(err, "cis2_seq_submit: no engine");
    ok = ok && cis2_engine_step(NULL, err) && strstr(err, "cis2_engine_step: no engine");
    ok = ok && cis2_engine_forward(NULL, &id, 1, 0, lg, err) &&
         strstr(err, "cis2_engine_forward: no engine");
    ok = ok && cis2_seq_take(NULL, 0, &res, err) && strstr(err, "cis2_seq_take: no engine");
    ok = ok && cis2_seq_finish(NULL, 0, err) && strstr(err, "cis2_seq_finish: no engine");
    cis2_seq_cancel(NULL, 0);
    ok = ok && cis2_engine_active(NULL) == 0 && !cis2_seq_done(NULL, 0);
    CHECK("api.null-engine-refused", ok, "%s", err);
}

/* The default thread count follows the affinity mask (taskset, a cpuset,
 * Slurm's -c), not the machine's online cores. */
static void test_cpu_count(void)
{
#if defined(__linux__)
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) != 0) return;
    CHECK("cpu-count.affinity", cis2_cpu_count() == CPU_COUNT(&all), "%d, the mask has %d",
          cis2_cpu_count(), CPU_COUNT(&all));
    int first = 0;
    while (!CPU_ISSET(first, &all)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return;
    int n = cis2_cpu_count();
    sched_setaffinity(0, sizeof all, &all);
    CHECK("cpu-count.one-cpu-mask", n == 1, "%d under a one-CPU mask", n);
#endif
}

int main(void)
{
    test_sb_io();
    test_err_one_line();
    test_api_nulls();
    test_fp();
    test_math();
    test_sha();
    test_json();
    test_json_int();
    test_config();
    test_safetensors();
    test_f16();
    test_receipt();
    test_ids();
    test_cpu_count();
    UNIT_END();
}
