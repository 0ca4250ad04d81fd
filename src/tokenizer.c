/* PLACEHOLDER — replaced by the tokenizer work (issue 3). */
#include "cis2.h"
#include <stdlib.h>
struct cis2_tokenizer { int unused; };
int cis2_tokenizer_load(cis2_tokenizer **t, const char *path, char *err) { *t = NULL; snprintf(err, CIS2_ERR_LEN, "%s: tokenizer not built yet", path); return 1; }
int cis2_tokenizer_parse(cis2_tokenizer **t, const char *json, size_t len, const char *path, char *err) { (void)json; (void)len; return cis2_tokenizer_load(t, path, err); }
void cis2_tokenizer_free(cis2_tokenizer *t) { free(t); }
int cis2_tokenizer_encode(const cis2_tokenizer *t, const char *text, size_t len, int32_t **ids, int *n, char *err) { (void)t; (void)text; (void)len; *ids = NULL; *n = 0; snprintf(err, CIS2_ERR_LEN, "tokenizer not built yet"); return 1; }
int cis2_tokenizer_decode(const cis2_tokenizer *t, const int32_t *ids, int n, char **text, size_t *len, char *err) { (void)t; (void)ids; (void)n; *text = NULL; *len = 0; snprintf(err, CIS2_ERR_LEN, "tokenizer not built yet"); return 1; }
int cis2_tokenizer_vocab_size(const cis2_tokenizer *t) { (void)t; return 0; }
