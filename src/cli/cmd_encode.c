/* diffattn encode: the token ids of a text file (byte-level BPE). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/data.h"
#include "diffattn/generate.h"
#include "diffattn/tokenizer.h"

int cmd_encode(int argc, char **argv) {
    const char *tok_path = NULL, *model = NULL, *in = NULL, *out = NULL;
    int timing = 0, plain = 0;
    cli_opt opts[] = {
        {"tokenizer", OPT_STR, &tok_path, CLI_TOKENIZER_HELP, 0},
        {"model", OPT_STR, &model, CLI_TOKENIZER_MODEL_HELP, 0},
        {"in", OPT_STR, &in, "text file to encode (any bytes)", 0},
        {"out", OPT_STR, &out, "write the ids here instead of standard output", 0},
        {"time", OPT_FLAG, &timing, "report the encoding speed on standard error", 0},
        {"no-add-special-tokens", OPT_FLAG, &plain,
         "the text's ids only, without the tokens the tokenizer.json's post_processor adds around them (a template's "
         "BOS): Hugging Face's add_special_tokens=False",
         0},
    };
    const char *req[] = {"in", NULL};
    int rc = cli_parse("encode",
                       "Prints the token ids of a file, whitespace-separated, as Hugging Face's encode(text) gives "
                       "them by default (with the tokens the post_processor adds, such as a template's BOS).",
                       argc, argv, opts, 6, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    const char *inputs[3] = {in, tok_path, model};
    da_status st = da_check_outputs_not_inputs(&out, out ? 1 : 0, inputs, 3);
    if (st.code) return cli_fail(st.msg);
    da_tokenizer *t;
    if ((st = da_tokenizer_open(tok_path, model, cli_load_opts(), &t)).code) return cli_fail(st.msg);
    int *ids = NULL;
    size_t n_ids = 0;
    da_encode_stats es;
    st = da_tokenizer_encode_file(t, in, !plain, &ids, &n_ids, &es);
    if (!st.code && timing)
        fprintf(stderr, "%zu bytes -> %zu ids in %.3f s = %.2f MB/s\n", es.bytes, n_ids, es.seconds,
                (double)es.bytes / es.seconds / 1e6);
    if (!st.code && out) st = da_ids_write(out, ids, n_ids); /* atomic: a failed write keeps the old file */
    if (!st.code && !out) {
        for (size_t i = 0; i < n_ids; i++) printf(i + 1 < n_ids ? "%d " : "%d", ids[i]);
        putchar('\n');
        if (fflush(stdout)) st = da_errorf("write error on standard output: %s", strerror(errno));
    }
    free(ids);
    da_tokenizer_free(t);
    return st.code ? cli_fail(st.msg) : 0;
}
