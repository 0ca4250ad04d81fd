/* §1.3: FTZ/DAZ pin by direct register read-modify-write, readback, and the
 * adversarial denormal self-test. Every thread that computes calls
 * cis2_fpenv_pin() itself: MXCSR/FPCR are per-thread state. */
#include "core/core.h"
#include "core/fparith.h"
#include <float.h>

#if defined(__x86_64__)
#define MXCSR_FTZ (1u << 15)
#define MXCSR_DAZ (1u << 6)
#define MXCSR_RC  (3u << 13)   /* rounding control: 00 = RNE (§1.2) */
#define MXCSR_EXC (0x3Fu << 7) /* the six exception masks (set = masked) */
static uint32_t read_ctl(void)
{
    uint32_t v;
    __asm__ volatile("stmxcsr %0" : "=m"(v));
    return v;
}
static void write_ctl(uint32_t v) { __asm__ volatile("ldmxcsr %0" : : "m"(v)); }
#define PIN_BITS (MXCSR_FTZ | MXCSR_DAZ)
/* The pinned environment: FTZ+DAZ (§1.3), RNE (§1.2) and every exception
 * masked (a caller's unmasked FE_INVALID/FE_OVERFLOW would trap in the
 * decode path's NaN/Inf handling). */
#define PIN_MASK (PIN_BITS | MXCSR_RC | MXCSR_EXC)
#define PIN_WANT (PIN_BITS | MXCSR_EXC)
const char *cis2_isa_name(void) { return "x86_64"; }
#elif defined(__aarch64__)
#define FPCR_FZ  (1ull << 24) /* FZ16 (bit 19) deliberately left alone */
static uint64_t read_ctl(void)
{
    uint64_t v;
    __asm__ volatile("mrs %0, fpcr" : "=r"(v));
    return v;
}
static void write_ctl(uint64_t v) { __asm__ volatile("msr fpcr, %0" : : "r"(v)); }
#define PIN_BITS FPCR_FZ
/* The pinned environment: FZ (§1.3), RNE (RMode bits 23:22 = 0, §1.2), no
 * trap enabled (IOE..IXE bits 12:8, IDE bit 15), DN (bit 25) off so NaNs
 * propagate as IEEE says, and FEAT_AFP's FIZ/AH/NEP (bits 2:0, RES0 without
 * it) off so FZ alone decides the flushing. */
#define PIN_MASK (PIN_BITS | (3ull << 22) | 0x9F00ull | (1ull << 25) | 0x7ull)
#define PIN_WANT PIN_BITS
const char *cis2_isa_name(void) { return "aarch64"; }
#elif defined(__wasm__)
/* WebAssembly has no FP control register: FTZ/DAZ is applied in software by
 * every decode-path operation (src/fparith.h, always on). The "control
 * register" is a flag that only the self-test's unpinned leg and the no-ftz
 * fault clear; bit 0 reads back as "software FTZ+DAZ in effect". */
static uint32_t soft_ctl = 1u;
static uint32_t read_ctl(void) { return soft_ctl; }
static void write_ctl(uint32_t v) { soft_ctl = v; }
#define PIN_BITS 1u
#define PIN_MASK PIN_BITS
#define PIN_WANT PIN_BITS
const char *cis2_isa_name(void) { return "wasm32 (software FTZ/DAZ)"; }
#else
#error "CIS-2 §1.3: no FTZ/DAZ control known for this ISA; refusing to build"
#endif

/* Pinned means the whole of PIN_MASK reads back as PIN_WANT: a caller's
 * rounding mode or unmasked exception would change bits (§1.2) as surely as
 * a missing FTZ/DAZ. */
int cis2_fpenv_is_pinned(void) { return (read_ctl() & PIN_MASK) == PIN_WANT; }
uint64_t cis2_fpenv_read(void) { return (uint64_t)read_ctl(); }
void cis2_fpenv_write(uint64_t v) { write_ctl((__typeof__(read_ctl()))v); }

int cis2_fpenv_pin(void)
{
    write_ctl((read_ctl() & ~PIN_MASK) | PIN_WANT);
    return cis2_fpenv_is_pinned() ? 0 : 1;
}

void cis2_fpenv_unpin(void) { write_ctl(read_ctl() & ~PIN_BITS); }

int cis2_f32_is_subnormal(uint32_t bits)
{
    return (bits & 0x7F800000u) == 0 && (bits & 0x007FFFFFu) != 0;
}

/* must_differ: the row gives a nonzero result without the pin (proving it
 * tests the pin); §1.3's own FLT_MIN*1e-10 row underflows to +0 either way. */
typedef struct {
    const char *name;
    uint32_t a, b;
    char op;
    int must_differ;
} fp_row;

/* The §1.3 rows. Each must give +0 (0x00000000) with the pin. */
static const fp_row ROWS[] = {
    { "0x20000000*0x1F800000", 0x20000000u, 0x1F800000u, '*', 1 },
    { "0x33800000*0x0C000000", 0x33800000u, 0x0C000000u, '*', 1 },
    { "0x00800001+0x80800000", 0x00800001u, 0x80800000u, '+', 1 },
    { "0x00000001+0", 0x00000001u, 0x00000000u, '+', 1 },
    { "0x00000001*0x3F800000", 0x00000001u, 0x3F800000u, '*', 1 },
    { "0x00000001*0x7F000000", 0x00000001u, 0x7F000000u, '*', 1 },
    { "FLT_MIN*0.5f", 0x00800000u, 0x3F000000u, '*', 1 },
    { "FLT_MIN*1e-10f", 0x00800000u, 0x2EDBE6FFu, '*', 0 },
};

/* raw: the plain operators (the "without the pin" leg); otherwise the
 * decode path's own operations (src/fparith.h), which are the same plain
 * operators natively and the software FTZ/DAZ on wasm32. */
static uint32_t eval_row(const fp_row *r, int raw)
{
    /* volatile operands: the compiler cannot fold the arithmetic (§1.3). */
    volatile float a = cis2_u2f(r->a), b = cis2_u2f(r->b);
    volatile float out;
    if (raw) out = (r->op == '*') ? a * b : a + b;
    else out = (r->op == '*') ? cis2_fmul(a, b) : cis2_fadd(a, b);
    return cis2_f2u(out);
}

int cis2_fpenv_selftest(FILE *log)
{
    int fails = 0;
    if (!cis2_fpenv_is_pinned()) {
        if (log)
            fprintf(log, "FAIL fpenv: control register 0x%llx lacks the FTZ/DAZ pin\n",
                    (unsigned long long)cis2_fpenv_read());
        return 1;
    }
    /* Leg 1: each row without the pin must differ (proves the test can fire),
     * leg 2: with the pin it must give exactly +0. */
    uint32_t unpinned[sizeof ROWS / sizeof ROWS[0]];
    cis2_fpenv_unpin();
    for (size_t i = 0; i < sizeof ROWS / sizeof ROWS[0]; i++) unpinned[i] = eval_row(&ROWS[i], 1);
    if (cis2_fpenv_pin() != 0) {
        if (log) fprintf(log, "FAIL fpenv: could not re-pin FTZ/DAZ\n");
        return 1;
    }
    for (size_t i = 0; i < sizeof ROWS / sizeof ROWS[0]; i++) {
        uint32_t got = eval_row(&ROWS[i], 0);
        int ok = got == 0x00000000u && (!ROWS[i].must_differ || unpinned[i] != 0x00000000u);
        if (!ok) fails++;
        if (log)
            fprintf(log, "%s fpenv %-24s pinned=0x%08X unpinned=0x%08X\n", ok ? "PASS" : "FAIL",
                    ROWS[i].name, (unsigned)got, (unsigned)unpinned[i]);
    }
    return fails;
}

int cis2_fpenv_enter(uint64_t *saved, char *err)
{
    *saved = cis2_fpenv_read();
    if (cis2_fpenv_pin() == 0) return 0;
    cis2_fpenv_write(*saved);
    snprintf(err, CIS2_ERR_LEN, "cannot pin FTZ/DAZ on this thread (control register 0x%llx, §1.3)",
             (unsigned long long)*saved);
    return 1;
}
