/* diffattn: the command-line tool. Each subcommand lives in its own file;
 * this one dispatches. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "diffattn.h"

int cli_fail(const char *msg) {
    fprintf(stderr, "diffattn: %s\n", msg);
    return 1;
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} commands[] = {
    {"train", cmd_train, "train a DIFF or softmax model on text"},
    {"sample", cmd_sample, "generate text from a model (KV cache)"},
    {"compare", cmd_compare, "train DIFF and the baseline side by side and compare them (report.md, report.json)"},
    {"eval", cmd_eval, "evaluate a model (eval loss)"},
    {"init", cmd_init, "write a freshly initialised model"},
    {"info", cmd_info, "show a model's config, parameter count and lambda per layer"},
    {"logits", cmd_logits, "write the logits of a token sequence as .npy"},
    {"grads", cmd_grads, "write the loss gradient of every parameter as safetensors"},
    {"encode", cmd_encode, "print the token ids of a text file (byte-level BPE)"},
    {"decode", cmd_decode, "write the text of token ids"},
    {"tokenizer", cmd_tokenizer, "train a byte-level BPE tokenizer (tokenizer train)"},
    {"prepare", cmd_prepare, "tokenize text files into token shards for train --data DIR"},
    {"quantize", cmd_quantize, "quantize a model's weights to q8_0, q4_0 or q4_k in a GGUF file"},
    {"bench", cmd_bench, "time training steps or the attention kernel (tokens/s, MFU)"},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *fp) {
    fprintf(fp, "diffattn %s: the Differential Transformer in C\n\nusage: diffattn COMMAND [flags]\n\ncommands:\n",
            DA_VERSION);
    for (int i = 0; i < N_COMMANDS; i++) fprintf(fp, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(fp, "\nRun 'diffattn COMMAND --help' for a command's flags.\n");
}

int main(int argc, char **argv) {
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
