/* diffattn grads: the loss gradient of every parameter on one sequence,
 * written for comparison with a reference implementation. */
#include <stdio.h>

#include "args.h"
#include "commands.h"
#include "eval/eval.h"

int cmd_grads(int argc, char **argv) {
    const char *model = NULL, *ids_path = NULL, *out = NULL;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (.safetensors)", 0},
        {"ids", OPT_STR, &ids_path, "text file of whitespace-separated token ids (one sequence, T >= 2)", 0},
        {"out", OPT_STR, &out, "safetensors file to write: each parameter's gradient under its name, plus `loss`", 0},
    };
    const char *req[] = {"model", "ids", "out", NULL};
    int rc = cli_parse("grads",
                       "Writes the gradient of the mean cross-entropy of predicting ids[1..T-1] from ids[0..T-2].",
                       argc, argv, opts, 3, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    float loss;
    da_status st = da_eval_write_grads(model, ids_path, out, &loss, cli_load_opts());
    if (st.code) return cli_fail(st.msg);
    printf("loss %.6f\n", (double)loss);
    return 0;
}
