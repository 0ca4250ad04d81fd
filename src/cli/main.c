/* The cis2 command line: usage and dispatch to one command per file
 * (cli/cmd_*.c). Output lines are key=value so scripts can grep them; every
 * error is one line on stderr. */
#include "cli/commands.h"
#include <errno.h>
#include <signal.h>
#include <string.h>

static const char USAGE[] =
    "cis2 — bit-exact CIS-2 v0.3b inference\n"
    "usage:\n"
    "  cis2 run --model DIR (--prompt TEXT | --prompt-ids 1,2,3 | --chat MESSAGES.json\n"
    "           [--chat-format chatml | --chat-template FILE] [--chat-template-kwarg KEY=JSON]\n"
    "           [--chat-date YYYY-MM-DD]) [-n N] [--receipt FILE]   (docs/chat_templates.md)\n"
    "           [--backend ref|fast|approx] [--threads N] [--isa "
    "scalar|sse2|avx2|avx512|neon]\n"
    "           [--stop-at-eos] [--check-determinism] [--fault NAME [--fault-arg ARG]]\n"
    "           [--temperature T [--top-k K] [--top-p P] [--min-p M] [--seed S]]\n"
    "  cis2 verify RECEIPT|- --model DIR [--backend ref|fast] [--threads N] [--isa X]\n"
    "  cis2 selftest\n"
    "  cis2 conform --model DIR [--vector FILE] [--no-check-determinism] [--backend ref|fast]\n"
    "               [--threads N] [--isa X]\n"
    "  cis2 tokenize (--tokenizer FILE | --model DIR) TEXT   [--bench TEXTFILE]\n"
    "  cis2 detokenize (--tokenizer FILE | --model DIR) IDS\n"
    "  cis2 op OP < vector.txt          (also as cis2-op OP, through a link named cis2-op)\n"
    "  cis2 suite [--vectors DIR]... [--timeout SECONDS] CANDIDATE [ARG...]\n"
    "  cis2 bench --model DIR [--prompt-len P,...] [-n N] [--threads T] [--backend "
    "ref|fast|approx]"
    " [--isa X]\n"
    "             [--positions 256,2048,8000] [--batch 1,4,8,16]\n"
    "  cis2 bench --peak [--threads T]\n"
    "  cis2 trace --model DIR --prompt-ids IDS [--teacher-force IDS | -n N] -o FILE|-\n"
    "             [--arm NAME] [--layers 0-2,29] [--nodes a,b] [--hash-only] [--backend "
    "ref|fast|approx]\n"
    "             [--threads N] [--isa X] [--fault NAME [--fault-arg ARG]]\n"
    "  cis2 diff A B [--exact | [--table fp32|armd] [--tol FILE]] [--brief]\n"
    "  cis2 compare --model DIR --prompt-ids IDS [--teacher-force IDS | -n N]\n"
    "               (--against TRACE | --backend ref --backend fast|approx)\n"
    "               [--exact | [--table fp32|armd] [--tol FILE]] [--brief] [-o FILE]\n"
    "               [--layers 0-2,29] [--nodes a,b] [--threads N] [--isa X]\n"
    "               (with --against the ids are TRACE's; --prompt-ids may be left out)\n"
    "  cis2 batch --model DIR --in PROMPTS.jsonl --out RESULTS.jsonl [--batch B] [--shard "
    "i/N]\n"
    "             [-n N] [--stop-at-eos] [--backend ref|fast] [--threads N] [--isa X]\n"
    "             [--chat-format chatml] [--retry-errors]\n"
    "  cis2 merge OUT SHARD.jsonl...              (docs/scale.md)\n"
    "  cis2 verify-batch RESULTS.jsonl --model DIR [--batch B] [--backend ref|fast] "
    "[--threads N]\n"
    "                   [--isa X] [--shard i/N]\n"
    "                   [--in PROMPTS.jsonl [-n N] [--stop-at-eos] [--chat-format chatml]]\n"
    "  cis2 quantize --model DIR --out QDIR [--lm-head] [--embed]     (int8 twin)\n"
    "  cis2 join-shards --model DIR --out FILE   (a sharded checkpoint as one file)\n"
    "  cis2 arms --source DIR --quantized QDIR --prompt-ids IDS --teacher-force IDS\n"
    "            [--python PY] [--script PATH] [--fault NAME [--fault-arg A]] [--threads N]\n"
    "            [--node NODE] [--wasm FILE] [--wasm-script PATH]\n"
    "            [-o WORKDIR]                  (all arms against arm B, docs/divergence.md)\n"
    "  cis2 serve --model DIR [--host 127.0.0.1] [--port 8080] [--threads N] [--max-batch B]\n"
    "             [--queue Q] [--ctx N] [--api-key-file F] [--alias NAME]\n"
    "             [--verifier-dir DIR] [--max-body BYTES] [--header-limit BYTES]\n"
    "             [--timeout S] [--request-timeout S] [--max-connections N]\n"
    "             [--max-connections-per-ip N] [--backend ref|fast] [--isa X]\n"
    "             [--chat-format chatml]      (docs/serve.md)\n"
    "--threads N: the fast backend's worker threads (default: every CPU it may run on); the\n"
    "  reference backend runs on one thread (--threads is accepted and has no effect there)\n"
    "faults (debug, --backend ref): weight-bit (--fault-arg TENSOR:INDEX:BIT), fma "
    "(--fault-arg LAYER),\n"
    "  rmsnorm-assoc, rope-offset, kv-stale (--fault-arg POS), no-ftz\n"
    "docs: README.md, docs/{python,tokenizer,conformance,divergence,quantization,scale,serve,\n"
    "  wasm,performance,errors,architecture}.md\n";

/* The commands, as git's commands[]: the name the dispatcher matches, the function that
 * runs it, and the line `cis2 help` lists it with (its usage lines are USAGE's). */
static const struct cis2_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} COMMANDS[] = {
    { "run", cis2_cmd_run, "decode a prompt (greedy, or sampled), optionally write a receipt" },
    { "verify", cis2_cmd_verify, "re-run a receipt and compare every field" },
    { "selftest", cis2_cmd_selftest, "check the pinned FP environment and math on this CPU" },
    { "conform", cis2_cmd_conform, "run the whole-model conformance vector (§13.1)" },
    { "tokenize", cis2_cmd_tokenize, "text to token ids" },
    { "detokenize", cis2_cmd_detokenize, "token ids to text" },
    { "op", cis2_cmd_op, "evaluate one conformance op on a key=value vector" },
    { "suite", cis2_cmd_suite, "run a candidate over the op vectors" },
    { "bench", cis2_cmd_bench, "time load, prefill and decode; --peak: the kernels' ceilings" },
    { "trace", cis2_cmd_trace, "write a layer trace of a run" },
    { "diff", cis2_cmd_diff, "compare two traces, name the first divergent node" },
    { "compare", cis2_cmd_compare, "trace and diff in one: against a trace or two backends" },
    { "batch", cis2_cmd_batch, "many prompts from JSONL, one result line each" },
    { "merge", cis2_cmd_merge, "join batch shards' results" },
    { "verify-batch", cis2_cmd_verify_batch, "re-run and check a batch's results" },
    { "quantize", cis2_cmd_quantize, "write a checkpoint's int8 twin" },
    { "join-shards", cis2_cmd_join_shards, "a sharded checkpoint as one model.safetensors" },
    { "arms", cis2_cmd_arms, "run every arm against arm B, localize a divergence" },
    { "serve", cis2_cmd_serve, "the OpenAI-style HTTP server" },
};
#define N_COMMANDS (sizeof COMMANDS / sizeof *COMMANDS)

static void usage(FILE *f)
{
    fputs(USAGE, f);
    fputs("commands:\n", f);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-13s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fputs("one command's usage: cis2 help CMD (or cis2 CMD --help)\n", f);
}

/* `cis2 CMD --help`, `cis2 CMD -h`, `cis2 help CMD`: CMD's lines of the
 * usage (each "  cis2 CMD ..." line and the deeper-indented lines under it)
 * and the notes on the options it names. 2 when USAGE has no such command. */
/* The length of the usage line at l, its newline included. */
static size_t line_len(const char *l)
{
    const char *e = strchr(l, '\n');
    return e ? (size_t)(e - l) + 1 : strlen(l);
}

static int is_help(const char *a)
{
    return !strcmp(a, "help") || !strcmp(a, "--help") || !strcmp(a, "-h");
}

static int usage_of(const char *cmd)
{
    size_t cl = strlen(cmd);
    int in = 0, found = 0, threads = 0, fault = 0;
    for (const char *l = USAGE; *l;) {
        size_t n = line_len(l);
        if (!strncmp(l, "  cis2 ", 7)) /* a command's first line */
            in = !strncmp(l + 7, cmd, cl) && (l[7 + cl] == ' ' || l[7 + cl] == '\n');
        else if (strncmp(l, "   ", 3)) /* neither a command nor its continuation */ in = 0;
        if (in) {
            if (!found) fputs("usage:\n", stdout);
            found = 1;
            fwrite(l, 1, n, stdout);
            const char *t = strstr(l, "--threads"), *f = strstr(l, "--fault");
            threads |= t && t < l + n;
            fault |= f && f < l + n;
        }
        l += n;
    }
    if (!found) return cis2_cli_usage_error(cmd, "unknown command (see cis2 help)");
    int show = 0; /* inside a note to print: its first line and its indented rest */
    for (const char *l = USAGE; *l; l += line_len(l)) {
        if (strncmp(l, "  ", 2))
            show = (threads && !strncmp(l, "--threads N:", 12)) ||
                   (fault && !strncmp(l, "faults ", 7));
        else if (!strncmp(l, "  cis2 ", 7)) show = 0;
        if (show) fwrite(l, 1, line_len(l), stdout);
    }
    printf("all commands: cis2 help\n");
    return 0;
}

/* The command's own status, or 2 when its results could not be written:
 * stdio's write errors are sticky but silent, so on a full disk (/dev/full)
 * or a pipe closed with SIGPIPE ignored (cis2 suite ignores it) a command
 * would lose its results and still exit 0. The stream is flushed here and
 * a failure said in one line; a failed check (1) keeps its status, and a
 * command that failed already (2, 3) has said why. */
static int finish(const char *cmd, int rc)
{
    errno = 0;
    int bad = fflush(stdout) != 0;
    int e = bad ? errno : 0;
    if (!(bad || ferror(stdout)) || rc >= 2) return rc;
    if (e) cis2_cli_usage_error(cmd, "standard output: write failed: %s", strerror(e));
    else cis2_cli_usage_error(cmd, "standard output: a write failed; the output is incomplete");
    return rc == 1 ? 1 : 2;
}

static int dispatch(const char *c, int sub_argc, char **sub_argv)
{
    /* Only directly after the command: later, "-h" may be a value
     * (--prompt -h) or, for suite, its candidate's own argument. */
    if (sub_argc >= 2 && strcmp(sub_argv[1], "help") && is_help(sub_argv[1]) && !is_help(c))
        return usage_of(c);
    if (is_help(c) && sub_argc == 2 && !is_help(sub_argv[1])) return usage_of(sub_argv[1]);
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(c, COMMANDS[i].name)) return COMMANDS[i].fn(sub_argc, sub_argv);
    if (is_help(c)) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(c, "version") || !strcmp(c, "--version")) {
        /* The CLI's own version (the header it was built with) and the library's as it
         * reports itself, then the spec whose semantics both implement. */
        printf("cis2 %s (libcis2 %s, CIS-2 spec %s)\n", CIS2_VERSION, cis2_version(),
               CIS2_SPEC_VERSION);
        return 0;
    }
    return cis2_cli_usage_error(c, "unknown command (see cis2 help)");
}

int main(int argc, char **argv)
{
    /* Past a file-size limit (ulimit -f) a write fails with EFBIG once
     * SIGXFSZ is ignored, and each command says so in one line naming the
     * file ("File too large"), as it says a full disk; by default the signal
     * killed the process mid-write with no message at all. */
    signal(SIGXFSZ, SIG_IGN);
    /* Called as `cis2-op` (a link): the conformance candidate the public
     * harness runs as `CANDIDATE OP < vector` (docs/conformance.md). */
    const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;
    base = base ? base + 1 : argc > 0 ? argv[0] : "";
    if (!strcmp(base, "cis2-op")) return finish("op", cis2_cmd_op(argc, argv));
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    return finish(argv[1], dispatch(argv[1], argc - 1, argv + 1));
}
