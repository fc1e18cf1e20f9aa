/* diffattn init: a freshly initialised model file. */
#include <stdio.h>

#include "args.h"
#include "commands.h"

int cmd_init(int argc, char **argv) {
    cli_model_flags mf;
    cli_model_flags_default(&mf);
    const char *out = NULL;
    uint64_t seed = 1337;
    cli_opt opts[CLI_N_MODEL_OPTS + 2];
    cli_model_opts(&mf, opts);
    opts[CLI_N_MODEL_OPTS] = (cli_opt){"out", OPT_STR, &out, "model file to write (.safetensors)", 0};
    opts[CLI_N_MODEL_OPTS + 1] = (cli_opt){"seed", OPT_U64, &seed, "initialisation seed", 0};
    const int n = CLI_N_MODEL_OPTS + 2;
    const char *req[] = {"out", NULL};
    int rc = cli_parse("init", "Writes a freshly initialised model (initialisation described in docs/model.md).", argc,
                       argv, opts, n, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_config cfg;
    da_status st = cli_model_config(&mf, opts, n, &cfg);
    if (st.code) return cli_fail(st.msg);
    da_model m;
    if ((st = da_model_create(&m, &cfg)).code) return cli_fail(st.msg);
    da_model_init(&m, seed);
    st = da_model_save(&m, out);
    if (!st.code)
        printf("wrote %s: %s, %zu parameters\n", out, da_arch_name(cfg.arch), m.n_params);
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : 0;
}
