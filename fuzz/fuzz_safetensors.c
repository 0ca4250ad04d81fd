/* The safetensors header and tensor table: cis2_st_parse over arbitrary bytes.
 * Every accepted table is checked: tensors inside the data area, sizes that
 * match dtype x shape, no two tensors overlapping; then each small tensor is
 * widened to f32 (touching every byte it claims). */
#include "fuzz.h"
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size heap copy: reading past the end is an ASan report */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) abort();
    if (size) memcpy(buf, data, size);
    cis2_safetensors st;
    memset(&st, 0, sizeof st);
    char err[CIS2_ERR_LEN] = "";
    if (cis2_st_parse(&st, buf, size, "fuzz.safetensors", err) != 0) {
        fuzz_check_err(err);
        free(buf);
        return 0;
    }
    for (int i = 0; i < st.n; i++) {
        const cis2_st_tensor *t = &st.t[i];
        FUZZ_ASSERT(t->name != NULL);
        FUZZ_ASSERT(t->data >= buf && t->data <= buf + size);
        FUZZ_ASSERT(t->nbytes <= (uint64_t)(buf + size - t->data));
        uint64_t es = cis2_dtype_size(t->dtype);
        FUZZ_ASSERT(t->numel >= 0 && (uint64_t)t->numel * es == t->nbytes);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            FUZZ_ASSERT(t->shape[d] >= 0);
            numel *= t->shape[d];
        }
        FUZZ_ASSERT(numel == t->numel);
        FUZZ_ASSERT(cis2_st_find(&st, t->name) != NULL);
        for (int j = 0; j < i; j++) {
            const cis2_st_tensor *u = &st.t[j];
            if (!t->nbytes || !u->nbytes) continue;
            FUZZ_ASSERT(t->data + t->nbytes <= u->data || u->data + u->nbytes <= t->data);
        }
        if (t->numel <= 4096) {
            float *f = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
            if (!f) abort();
            cis2_st_to_f32(t, f);
            free(f);
        }
    }
    cis2_st_close(&st);
    free(buf);
    return 0;
}
