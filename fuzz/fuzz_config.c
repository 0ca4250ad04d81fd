/* config.json validation: cis2_config_parse over arbitrary bytes. An accepted
 * config must be internally consistent (what the model loader relies on). */
#include "fuzz.h"
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = fuzz_dup(data, size);
    cis2_config c;
    memset(&c, 0, sizeof c);
    char err[CIS2_ERR_LEN] = "";
    if (cis2_config_parse(src, size, "config.json", &c, err) == 0) {
        FUZZ_ASSERT(c.hidden > 0 && c.inter > 0 && c.n_layers > 0 && c.vocab > 0 && c.max_pos > 0);
        FUZZ_ASSERT(c.n_heads > 0 && c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0);
        FUZZ_ASSERT(c.head_dim > 0 && c.head_dim % 2 == 0);
        FUZZ_ASSERT(c.n_eos >= 0 && c.n_eos <= 8);
        for (int i = 0; i < c.n_eos; i++) FUZZ_ASSERT(c.eos_ids[i] >= 0 && c.eos_ids[i] < c.vocab);
        FUZZ_ASSERT(c.bos_id >= -1 && c.bos_id < c.vocab);
        /* §2.3: eps may be 0 or subnormal (computed as written), never negative or Inf */
        FUZZ_ASSERT(c.eps >= 0.0f && c.eps <= 3.4028235e38f && c.rope_theta > 0.0f);
        FUZZ_ASSERT(c.tied >= -1 && c.tied <= 1); /* -1: the checkpoint decides (§11.1) */
    } else {
        fuzz_check_err(err);
    }
    free(src);
    return 0;
}
