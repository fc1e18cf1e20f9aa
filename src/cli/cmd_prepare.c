/* diffattn prepare: text files -> token shards for `train --data DIR`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/data.h"

int cmd_prepare(int argc, char **argv) {
    const char *tok = NULL, *out = NULL, *first_in = NULL;
    da_prepare_config pc;
    da_prepare_config_default(&pc);
    cli_opt opts[] = {
        {"tokenizer", OPT_STR, &tok, "tokenizer.json, GPT-2's encoder.json (vocab.bpe beside it), or a folder", 0},
        {"in", OPT_STR, &first_in, "text files and folders (every regular file below, sorted), one or more", 0},
        {"out", OPT_STR, &out, "folder for train_*.bin, val_*.bin and the tokenizer (new or empty)", 0},
        {"val-fraction", OPT_FLOAT, &pc.val_fraction, "the tail of the input, by bytes, held out for validation", 0},
        {"shard-tokens", OPT_LONG, &pc.shard_tokens, "tokens per shard at most", 0},
        {"quiet", OPT_FLAG, &pc.quiet, "no progress display", 0},
    };
    /* --in takes every argument up to the next flag */
    char **rest = malloc(sizeof(char *) * (size_t)(argc + 1));
    const char **inputs = malloc(sizeof(char *) * (size_t)(argc + 1));
    if (!rest || !inputs) return cli_fail("out of memory");
    int n_rest = 0, n_in = 0;
    rest[n_rest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--in")) {
            rest[n_rest++] = argv[i];
            int j = i + 1;
            while (j < argc && strncmp(argv[j], "--", 2)) inputs[n_in++] = argv[j++];
            rest[n_rest++] = j > i + 1 ? argv[i + 1] : (char *)"";
            i = j - 1;
        } else {
            rest[n_rest++] = argv[i];
        }
    }
    const char *req[] = {"tokenizer", "in", "out", NULL};
    int rc = cli_parse("prepare",
                       "Streams text through a tokenizer into uint32 token shards (header: magic, version, vocab size, "
                       "token count),\ndocuments separated by <|endoftext|>, on every core (OMP_NUM_THREADS), with "
                       "bounded memory.",
                       n_rest, rest, opts, 6, req);
    int code = 0;
    if (rc) code = rc == CLI_HELP ? 0 : 1;
    else if (n_in == 0) code = cli_fail("--in needs at least one file or folder");
    else {
        da_prepare_stats s;
        da_status st = da_prepare(tok, inputs, n_in, out, &pc, &s);
        if (st.code) code = cli_fail(st.msg);
        else
            printf("%ld files (%ld empty skipped), %.1f MB in %.1f s (%.1f MB/s): %lld train tokens in %d shard(s), "
                   "%lld validation tokens in %d\n",
                   s.files, s.empty_files, s.bytes / 1e6, s.seconds, s.bytes / 1e6 / s.seconds, s.train_tokens,
                   s.train_shards, s.val_tokens, s.val_shards);
    }
    free(rest);
    free(inputs);
    return code;
}
