/* diffattn tokenizer train: a byte-level BPE tokenizer learnt from text files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/tokenizer.h"

int cmd_tokenizer(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "train")) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            printf("usage: diffattn tokenizer train --vocab-size N --in FILES... --out tokenizer.json\n");
            return 0;
        }
        fprintf(stderr, "diffattn tokenizer: expected 'train' (see diffattn tokenizer --help)\n");
        return 1;
    }
    da_bpe_train_config c = {8192, 2, 0};
    const char *out = NULL, *first_in = NULL;
    cli_opt opts[] = {
        {"vocab-size", OPT_INT, &c.vocab_size, "tokens in all: 256 bytes, the merges, and <|endoftext|> last", 0},
        {"in", OPT_STR, &first_in, "text files and folders to learn from, one or more", 0},
        {"out", OPT_STR, &out, "tokenizer.json to write (Hugging Face format, byte-level BPE)", 0},
        {"min-frequency", OPT_INT, &c.min_frequency, "stop when the most frequent pair is rarer than this", 0},
        {"quiet", OPT_FLAG, &c.quiet, "no progress display", 0},
    };
    /* --in takes every argument up to the next flag */
    char **rest = malloc(sizeof(char *) * (size_t)(argc + 1));
    const char **inputs = malloc(sizeof(char *) * (size_t)(argc + 1));
    if (!rest || !inputs) return cli_fail("out of memory");
    int n_rest = 0, n_in = 0;
    rest[n_rest++] = argv[1];
    for (int i = 2; i < argc; i++) {
        rest[n_rest++] = argv[i];
        if (!strcmp(argv[i], "--in")) {
            int j = i + 1;
            while (j < argc && strncmp(argv[j], "--", 2)) inputs[n_in++] = argv[j++];
            rest[n_rest++] = j > i + 1 ? argv[i + 1] : (char *)"";
            i = j - 1;
        }
    }
    const char *req[] = {"in", "out", NULL};
    int rc = cli_parse("tokenizer train",
                       "Learns a byte-level BPE tokenizer (GPT-2 pre-tokenisation) and writes it as tokenizer.json.",
                       n_rest, rest, opts, 5, req);
    int code = 0;
    if (rc) code = rc == CLI_HELP ? 0 : 1;
    else if (n_in == 0) code = cli_fail("--in needs at least one file or folder");
    else {
        da_bpe_train_stats s;
        da_status st = da_check_outputs_not_inputs(&out, 1, inputs, n_in);
        if (!st.code) st = da_bpe_train(inputs, n_in, out, &c, &s);
        if (st.code) code = cli_fail(st.msg);
        else
            printf("%.1f MB, %ld distinct pre-tokens, %d merges in %.1f s: wrote %s\n", s.bytes / 1e6, s.unique_words,
                   s.merges, s.seconds, out);
    }
    free(rest);
    free(inputs);
    return code;
}
