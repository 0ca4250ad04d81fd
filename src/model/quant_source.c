/* The source an int8 twin records (docs/quantization.md §3): `cis2 quantize`
 * writes the SHA-256 of the source's model.safetensors into the twin's
 * __metadata__ as source_sha256, so a tool handed a source and a twin (cis2
 * arms) can tell whether the one was made from the other. Only the twin's
 * header is read. */
#include "model/quant.h"
#include "core/json.h"
#include "model/model.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cis2_quant_recorded_source(const char *qdir, char **val, size_t *len, char *err)
{
    char path[4096];
    *val = NULL;
    *len = 0;
    if (cis2_path_join(path, sizeof path, qdir, "model.safetensors", err)) return -1;
    cis2_safetensors st;
    uint8_t *head;
    int fd;
    if (cis2_st_open_header(&st, path, &fd, &head, err)) return -1;
    close(fd);
    free(head);
    int rc = 0;
    if (st.metadata_json) { /* validated by the header parse: an object of strings */
        json_doc d;
        int pr = json_parse(&d, st.metadata_json, strlen(st.metadata_json), path, err);
        if (pr) {
            if (pr < 0) snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
            rc = -1;
        } else {
            uint32_t v = json_get(&d, 0, "source_sha256", NULL);
            if (v != JSON_NONE && d.nodes[v].type == JSON_STRING) {
                *val = json_str_dup(&d, v, len);
                if (*val) rc = 1;
                else {
                    snprintf(err, CIS2_ERR_LEN, "%s: out of memory", path);
                    rc = -1;
                }
            }
            json_free(&d);
        }
    }
    cis2_st_close(&st);
    return rc;
}
