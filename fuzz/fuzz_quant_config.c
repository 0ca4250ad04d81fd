/* config.json's quantization_config: cis2_quant_config_parse over arbitrary
 * bytes. An accepted one must describe something cis2 computes exactly
 * (docs/quantization.md §4): the fields the loader relies on are in range. */
#include "fuzz.h"
#include "model/quant.h"
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = fuzz_dup(data, size);
    cis2_quant_config q;
    char err[CIS2_ERR_LEN] = "";
    if (cis2_quant_config_parse(src, size, "config.json", &q, err) == 0) {
        FUZZ_ASSERT(q.present == 0 || q.present == 1);
        if (!q.present) FUZZ_ASSERT(!q.lm_head && !q.embed && !q.n_ignore && !q.format[0]);
        else
            FUZZ_ASSERT(!strcmp(q.format, "int-quantized") || !strcmp(q.format, "naive-quantized"));
        FUZZ_ASSERT(q.n_ignore >= 0 && q.n_ignore <= CIS2_QC_MAX_IGNORE);
        for (int i = 0; i < q.n_ignore; i++)
            FUZZ_ASSERT(q.ignore[i] && strncmp(q.ignore[i], "re:", 3));
        FUZZ_ASSERT(!q.scale_dtype[0] || !strncmp(q.scale_dtype, "torch.float", 11) ||
                    !strcmp(q.scale_dtype, "torch.bfloat16"));
        cis2_quant_config_free(&q);
    } else {
        fuzz_check_err(err);
    }
    free(src);
    return 0;
}
