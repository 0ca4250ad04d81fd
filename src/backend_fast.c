/* PLACEHOLDER — replaced by the fast-kernel work (issue 5). */
#include "backend.h"
int cis2_backend_fast_new(cis2_backend **b, cis2_model *m, const cis2_engine_opts *o, char *err)
{
    (void)b; (void)m; (void)o;
    snprintf(err, CIS2_ERR_LEN, "backend fast is not built yet");
    return 1;
}
