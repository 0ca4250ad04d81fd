/* The Jinja subset (src/model/jinja_*.c) over arbitrary templates and
 * variables: the input is TEMPLATE, then optionally a NUL byte and the
 * variables as a JSON object (default: a two-turn conversation), and a
 * strftime_now date when the first byte is odd. Compiling and rendering end
 * with output or one error line; rendering is deterministic (twice, the same
 * bytes or the same error). */
#include "fuzz.h"
#include "model/jinja.h"
#include <stdio.h>

static const char JINJA_VARS[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, "
    "{\"role\": \"user\", \"content\": \"Hi <think>x</think>\"}], "
    "\"add_generation_prompt\": true, \"bos_token\": \"<s>\", "
    "\"eos_token\": \"</s>\", \"tools\": null}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = fuzz_dup(data, size);
    size_t tl = strnlen(src, size);
    const char *vars = tl < size ? src + tl + 1 : JINJA_VARS;
    size_t vl = tl < size ? size - tl - 1 : sizeof JINJA_VARS - 1;
    const char *date = size && (data[0] & 1) ? "2024-02-29" : NULL;
    char err[CIS2_ERR_LEN] = "", err2[CIS2_ERR_LEN] = "";
    jinja_tpl *t = NULL;
    if (jinja_compile(&t, src, tl, err)) {
        FUZZ_ASSERT(t == NULL);
        fuzz_check_err(err);
    } else {
        char *a = NULL, *b = NULL;
        size_t al = 0, bl = 0;
        int ra = jinja_render(t, vars, vl, date, &a, &al, err);
        int rb = jinja_render(t, vars, vl, date, &b, &bl, err2);
        FUZZ_ASSERT(ra == rb);
        if (ra) {
            FUZZ_ASSERT(a == NULL && b == NULL);
            fuzz_check_err(err);
            FUZZ_ASSERT(strcmp(err, err2) == 0);
        } else {
            FUZZ_ASSERT(a && b && a[al] == '\0' && al == bl && memcmp(a, b, al) == 0);
            FUZZ_ASSERT(al <= JINJA_MAX_OUTPUT);
        }
        free(a);
        free(b);
        jinja_free(t);
    }
    free(src);
    return 0;
}
