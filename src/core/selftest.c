/* `cis2 selftest` as a library function, shared by the CLI and the wasm
 * verifier: §1.3 denormal rows, §5.1 cancellation, §6.1 rsqrt(64), and the
 * pinned §6.6 table_digest and §7.2 inv_freq_table_digest (head_dim 64,
 * theta 100000). */
#include "core/core.h"
#include <string.h>

#define PINNED_TABLE_DIGEST    "23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d"
#define PINNED_INV_FREQ_64_1E5 "da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12"

static int line(FILE *out, int ok, const char *what)
{
    fprintf(out, "%s %s\n", ok ? "PASS" : "FAIL", what);
    return !ok;
}

static int selftest_pinned(FILE *out);

/* Pins the environment for its checks and gives the caller's control
 * register back, as every computing call of cis2.h does (§1.3). */
int cis2_selftest(FILE *out)
{
    uint64_t saved = cis2_fpenv_read();
    int fails = selftest_pinned(out);
    cis2_fpenv_write(saved);
    return fails;
}

static int selftest_pinned(FILE *out)
{
    int fails = 0;
    if (cis2_fpenv_pin() != 0) {
        fprintf(out, "FAIL fpenv-pin: control register 0x%llx after pinning\n",
                (unsigned long long)cis2_fpenv_read());
        return 1;
    }
    fprintf(out, "PASS fpenv-pin %s control=0x%llx\n", cis2_isa_name(),
            (unsigned long long)cis2_fpenv_read());
    fails += cis2_fpenv_selftest(out);
    float a[3] = { 1e8f, 1.0f, -1e8f }, b[3] = { 1.0f, 1.0f, 1.0f };
    volatile float dot = cis2_dot_seq(a, b, 3);
    uint32_t db = cis2_f2u(dot);
    fprintf(out, "%s dot_seq [1e8,1,-1e8].[1,1,1] = 0x%08X (want 0x00000000, §5.1)\n",
            db == 0 ? "PASS" : "FAIL", (unsigned)db);
    fails += db != 0;
    volatile float x64 = 64.0f;
    uint32_t rb = cis2_f2u(cis2_rsqrt(x64));
    fprintf(out, "%s rsqrt(64) = 0x%08X (want 0x3E000000, §6.1)\n",
            rb == 0x3E000000u ? "PASS" : "FAIL", (unsigned)rb);
    fails += rb != 0x3E000000u;
    uint8_t d[32];
    char h[65], h2[65];
    cis2_table_digest(d);
    cis2_hex(d, 32, h);
    fails += line(out, strcmp(h, PINNED_TABLE_DIGEST) == 0, "table_digest (§6.6)");
    float inv[32];
    cis2_inv_freq(64, 100000.0f, inv);
    cis2_f32_digest(inv, 32, d);
    cis2_hex(d, 32, h2);
    fails += line(out, strcmp(h2, PINNED_INV_FREQ_64_1E5) == 0,
                  "inv_freq_table_digest head_dim=64 theta=100000 (§7.2)");
    fprintf(out, "table_digest=%s\ninv_freq_table_digest=%s\n", h, h2);
    fprintf(out, "sha256=%s\n", cis2_sha256_impl());
    fprintf(out, "selftest: %s\n", fails ? "FAILED" : "all checks passed");
    return fails;
}
