/* diffattn: the command-line tool. Each subcommand lives in its own file;
 * this one dispatches. */
#include <errno.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "diffattn.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} commands[] = {
    {"train", cmd_train, "train a DIFF or softmax model on text or token shards"},
    {"sample", cmd_sample, "generate text from a model (KV cache)"},
    {"compare", cmd_compare, "train DIFF and the baseline side by side and compare them (report.md, report.json)"},
    {"eval", cmd_eval, "evaluate a model: loss, needle, attention, outliers, quant-logits, ppl"},
    {"init", cmd_init, "write a freshly initialised model"},
    {"info", cmd_info, "show a model's config, parameter count and lambda per layer"},
    {"logits", cmd_logits, "write the logits of a token sequence as .npy"},
    {"grads", cmd_grads, "write the loss gradient of every parameter as safetensors"},
    {"encode", cmd_encode, "print the token ids of a text file (byte-level BPE)"},
    {"decode", cmd_decode, "write the text of token ids"},
    {"tokenizer", cmd_tokenizer, "train a byte-level BPE tokenizer (tokenizer train)"},
    {"prepare", cmd_prepare, "tokenize text files into token shards for train --data DIR"},
    {"convert", cmd_convert, "turn a softmax or Llama model into DIFF V1 or V2 (preserve: the same logits; split)"},
    {"export", cmd_export, "write a model as a Hugging Face folder (its family's class: docs/formats.md) or a GGUF file"},
    {"quantize", cmd_quantize, "quantize a model's weights to q8_0, q4_0 or q4_k in a GGUF file"},
    {"bench", cmd_bench, "time training steps, the attention kernel (tokens/s, MFU) or generation"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server with continuous batching (docs/serving.md)"},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *fp) {
    fprintf(fp, "diffattn %s: the Differential Transformer in C\n\nusage: diffattn COMMAND [flags]\n\ncommands:\n",
            DA_VERSION);
    for (int i = 0; i < N_COMMANDS; i++) fprintf(fp, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(fp, "\nRun 'diffattn COMMAND --help' for a command's flags.\n"
                "Every command also takes --threads N (default: OMP_NUM_THREADS, else one per core), and\n"
                "--allow-nonfinite: load weights holding NaN or infinity (refused by default; for debugging).\n");
}

/* Idle OpenMP threads sleep instead of spinning unless the user chose a
 * policy: on a machine where other processes hold cores, spinning threads
 * wait for a core that is busy, and a run gets many times slower (measured in
 * docs/performance.md). The runtime reads the policy when it loads, before
 * main, so the process runs itself again with it set. */
static void prefer_passive_wait(char **argv) {
    if (getenv("OMP_WAIT_POLICY")) return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    /* no /proc: carry on with the runtime's default */
}

/* The most threads a run takes (--threads, OMP_NUM_THREADS): each costs a stack and a share of every
 * per-thread buffer, and 100,000 of them took 22 s and 2.2 GB before crashing. */
#define MAX_THREADS 4096

/* OMP_NUM_THREADS, which the runtime has read, capped at MAX_THREADS with a message (--threads, applied
 * after, is refused past it). */
static void cap_env_threads(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (!env || omp_get_max_threads() <= MAX_THREADS) return;
    fprintf(stderr, "diffattn: OMP_NUM_THREADS=%s is more than %d threads; using %d (set it, or --threads N, to "
            "1..%d)\n", env, MAX_THREADS, MAX_THREADS, MAX_THREADS);
    omp_set_num_threads(MAX_THREADS);
}

/* Removes --threads N (or --threads=N) from argv wherever it stands and
 * applies it; returns the new argc, or -1 after printing an error. */
static int take_threads(int argc, char **argv) {
    int out = 0;
    for (int i = 0; i < argc; i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--threads")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "diffattn: --threads needs a value (a number of threads, 1 or more)\n");
                return -1;
            }
            v = argv[++i];
        } else if (!strncmp(argv[i], "--threads=", 10)) {
            v = argv[i] + 10;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || *end || n < 1 || n > MAX_THREADS) {
            fprintf(stderr, "diffattn: --threads \"%s\": expected a number of threads, 1..%d\n", v, MAX_THREADS);
            return -1;
        }
        omp_set_num_threads((int)n);
    }
    argv[out] = NULL;
    return out;
}

int main(int argc, char **argv) {
    prefer_passive_wait(argv);
    /* a write past a file-size limit (ulimit -f) fails with EFBIG, reported, instead of killing the process */
    signal(SIGXFSZ, SIG_IGN);
    cap_env_threads();
    if ((argc = take_threads(argc, argv)) < 0) return 1;
    argc = cli_take_load_opts(argc, argv);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("diffattn %s\n", DA_VERSION);
        return 0;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "diffattn: unknown command \"%s\" (see diffattn --help)\n", argv[1]);
    return 1;
}
