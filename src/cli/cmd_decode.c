/* diffattn decode: the bytes token ids stand for (the inverse of encode). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/data.h"
#include "diffattn/generate.h"
#include "diffattn/tokenizer.h"

int cmd_decode(int argc, char **argv) {
    const char *tok_path = NULL, *model = NULL, *ids_path = NULL, *out = NULL;
    cli_opt opts[] = {
        {"tokenizer", OPT_STR, &tok_path, CLI_TOKENIZER_HELP, 0},
        {"model", OPT_STR, &model, CLI_TOKENIZER_MODEL_HELP, 0},
        {"ids", OPT_STR, &ids_path, "file of whitespace-separated token ids", 0},
        {"out", OPT_STR, &out, "write the bytes here instead of standard output", 0},
    };
    const char *req[] = {"ids", NULL};
    int rc = cli_parse("decode", "Writes the bytes that token ids stand for (the inverse of encode).", argc, argv, opts,
                       4, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    const char *inputs[3] = {ids_path, tok_path, model};
    da_status st = da_check_outputs_not_inputs(&out, out ? 1 : 0, inputs, 3);
    if (st.code) return cli_fail(st.msg);
    da_tokenizer *t;
    if ((st = da_tokenizer_open(tok_path, model, cli_load_opts(), &t)).code) return cli_fail(st.msg);
    int *ids = NULL, n = 0;
    uint8_t *bytes = NULL;
    size_t nb = 0, cap = 0;
    st = da_ids_read(ids_path, da_tokenizer_vocab_size(t), &ids, &n);
    if (!st.code) st = da_tokenizer_decode(t, ids, (size_t)n, &bytes, &nb, &cap);
    if (!st.code && out) st = da_bytes_write(out, bytes, nb); /* atomic: a failed write keeps the old file */
    else if (!st.code && (fwrite(bytes, 1, nb, stdout) != nb || fflush(stdout)))
        st = da_errorf("standard output: write failed: %s", strerror(errno));
    free(ids);
    free(bytes);
    da_tokenizer_free(t);
    return st.code ? cli_fail(st.msg) : 0;
}
