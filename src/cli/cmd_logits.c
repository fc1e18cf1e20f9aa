/* diffattn logits: the logits at every position of one sequence, written for
 * comparison with a reference implementation. */
#include <stdio.h>

#include "args.h"
#include "commands.h"
#include "eval/eval.h"

int cmd_logits(int argc, char **argv) {
    const char *model = NULL, *ids_path = NULL, *out = NULL;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (.safetensors)", 0},
        {"ids", OPT_STR, &ids_path, "text file of whitespace-separated token ids (one sequence)", 0},
        {"out", OPT_STR, &out, ".npy file to write: float32 [T, vocab]", 0},
    };
    const char *req[] = {"model", "ids", "out", NULL};
    int rc = cli_parse("logits", "Writes the logits at every position of a token sequence.", argc, argv, opts, 3, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_status st = da_eval_write_logits(model, ids_path, out, cli_load_opts());
    return st.code ? cli_fail(st.msg) : 0;
}
