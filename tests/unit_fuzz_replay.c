/* Replays every committed fuzz seed (fuzz/corpus/NAME/) and every past fuzzer
 * find (fuzz/regressions/NAME/) through the libFuzzer harnesses, compiled here
 * without libFuzzer, in whatever build runs `make test` (gcc, clang, -O0..-O3,
 * ASan/UBSan, aarch64 under qemu). Each input runs in a child process, so a
 * crash is one FAIL line naming the file. */
#include "unit.h"
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

/* Harness statics must have distinct names across fuzz/fuzz_*.c; each harness
 * entry is renamed and declared static here, so it has a prototype. */
static int fz_safetensors(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_safetensors
#include "../fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput
static int fz_json(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_json
#include "../fuzz/fuzz_json.c"
#undef LLVMFuzzerTestOneInput
static int fz_config(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_config
#include "../fuzz/fuzz_config.c"
#undef LLVMFuzzerTestOneInput
static int fz_tokenizer_load(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_tokenizer_load
#include "../fuzz/fuzz_tokenizer_load.c"
#undef LLVMFuzzerTestOneInput
static int fz_tokenizer_encode(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_tokenizer_encode
static int fz_tokenizer_encode_init(int *argc, char ***argv);
#define LLVMFuzzerInitialize fz_tokenizer_encode_init
#include "../fuzz/fuzz_tokenizer_encode.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
static int fz_receipt(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_receipt
#include "../fuzz/fuzz_receipt.c"
#undef LLVMFuzzerTestOneInput
static int fz_op(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_op
#include "../fuzz/fuzz_op.c"
#undef LLVMFuzzerTestOneInput
static int fz_batch_line(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_batch_line
#include "../fuzz/fuzz_batch_line.c"
#undef LLVMFuzzerTestOneInput
static int fz_quant_config(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_quant_config
#include "../fuzz/fuzz_quant_config.c"
#undef LLVMFuzzerTestOneInput
static int fz_serve_request(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_serve_request
#include "../fuzz/fuzz_serve_request.c"
#undef LLVMFuzzerTestOneInput
static int fz_trace(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_trace
#define devnull                devnull_trace
#include "../fuzz/fuzz_trace.c"
#undef devnull
#undef LLVMFuzzerTestOneInput
static int fz_tol(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_tol
#define devnull                devnull_tol
#include "../fuzz/fuzz_tol.c"
#undef devnull
#undef LLVMFuzzerTestOneInput
static int fz_vector(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_vector
#define devnull                devnull_vector
#include "../fuzz/fuzz_vector.c"
#undef devnull
#undef LLVMFuzzerTestOneInput
static int fz_answer(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_answer
#define devnull                devnull_answer
#include "../fuzz/fuzz_answer.c"
#undef devnull
#undef LLVMFuzzerTestOneInput
static int fz_cli(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_cli
#define devnull                devnull_cli
#include "../fuzz/fuzz_cli.c"
#undef devnull
#undef LLVMFuzzerTestOneInput
static int fz_escape(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_escape
#define devnull                devnull_escape
#include "../fuzz/fuzz_escape.c"
#undef devnull
#undef LLVMFuzzerTestOneInput
static int fz_chat(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_chat
#include "../fuzz/fuzz_chat.c"
#undef LLVMFuzzerTestOneInput
static int fz_jinja(const uint8_t *data, size_t size);
#define LLVMFuzzerTestOneInput fz_jinja
#include "../fuzz/fuzz_jinja.c"
#undef LLVMFuzzerTestOneInput

typedef struct {
    const char *name;
    int (*one)(const uint8_t *, size_t);
    int (*init)(int *, char ***);
} harness;
static const harness H[] = {
    { "safetensors", fz_safetensors, NULL },
    { "json", fz_json, NULL },
    { "config", fz_config, NULL },
    { "tokenizer_load", fz_tokenizer_load, NULL },
    { "tokenizer_encode", fz_tokenizer_encode, fz_tokenizer_encode_init },
    { "receipt", fz_receipt, NULL },
    { "op", fz_op, NULL },
    { "batch_line", fz_batch_line, NULL },
    { "quant_config", fz_quant_config, NULL },
    { "serve_request", fz_serve_request, NULL },
    { "trace", fz_trace, NULL },
    { "tol", fz_tol, NULL },
    { "vector", fz_vector, NULL },
    { "answer", fz_answer, NULL },
    { "cli", fz_cli, NULL },
    { "escape", fz_escape, NULL },
    { "chat", fz_chat, NULL },
    { "jinja", fz_jinja, NULL },
};

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every file of DIR through h in a child; returns files run, or -1 when DIR is missing. */
static int replay_dir(const harness *h, const char *dir, int *bad)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    char *names[4096];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 4096)
        if (e->d_name[0] != '.') names[nn++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, name_cmp);
    for (int i = 0; i < nn; i++) {
        char path[2048], err[CIS2_ERR_LEN];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        char *buf = NULL;
        size_t len = 0;
        if (cis2_read_file(path, &buf, &len, err)) {
            printf("FAIL fuzz-replay.%s: %s\n", h->name, err);
            (*bad)++;
            free(names[i]);
            continue;
        }
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            if (h->init) {
                int ac = 0;
                char **av = NULL;
                h->init(&ac, &av);
            }
            h->one((const uint8_t *)buf, len);
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("FAIL fuzz-replay.%s: %s %s %d\n", h->name, path,
                   WIFSIGNALED(st) ? "killed by signal" : "exited",
                   WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            (*bad)++;
        }
        free(buf);
        free(names[i]);
    }
    return nn;
}

int main(void)
{
    for (size_t k = 0; k < sizeof H / sizeof H[0]; k++) {
        char dir[256];
        int bad = 0;
        snprintf(dir, sizeof dir, "fuzz/corpus/%s", H[k].name);
        int ns = replay_dir(&H[k], dir, &bad);
        snprintf(dir, sizeof dir, "fuzz/regressions/%s", H[k].name);
        int nr = replay_dir(&H[k], dir, &bad);
        if (ns <= 0) {
            printf(
                "FAIL fuzz-replay.%s: no seeds in fuzz/corpus/%s (run from the repository root)\n",
                H[k].name, H[k].name);
            unit_failed++;
            continue;
        }
        char nm[64];
        snprintf(nm, sizeof nm, "fuzz-replay.%s", H[k].name);
        CHECK(nm, bad == 0, "%d of %d inputs failed", bad, ns + (nr > 0 ? nr : 0));
        if (bad == 0) printf("  (%s: %d seeds, %d regressions)\n", H[k].name, ns, nr > 0 ? nr : 0);
    }
    UNIT_END();
}
