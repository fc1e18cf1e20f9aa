/* Flag parsing for the subcommands: --name VALUE or --name=VALUE, strict
 * number parsing, --help generated from the table. */
#ifndef DA_CLI_ARGS_H
#define DA_CLI_ARGS_H

#include <stdint.h>

#include "diffattn.h"

typedef enum { OPT_INT, OPT_LONG, OPT_FLOAT, OPT_STR, OPT_FLAG, OPT_U64 } cli_opt_type;

typedef struct {
    const char *name; /* without the dashes */
    cli_opt_type type;
    void *dst;
    const char *help;
    int set; /* filled by cli_parse: the flag was given */
} cli_opt;

enum { CLI_OK = 0, CLI_ERROR = 1, CLI_HELP = 2 };

/* Parses argv[1..] (argv[0] is the subcommand). Prints errors to stderr and
 * --help to stdout itself. required names the flags that must be given
 * (NULL-terminated list, or NULL). */
int cli_parse(const char *cmd, const char *summary, int argc, char **argv, cli_opt *opts, int n_opts,
              const char *const *required);
int cli_was_set(const cli_opt *opts, int n_opts, const char *name);

/* From now on Ctrl-C (SIGINT) and SIGTERM set the returned flag, which long
 * jobs poll to checkpoint and stop; a second signal ends the process at once. */
volatile int *cli_catch_stop_signals(void);

/* The model flags shared by init and train. */
typedef struct {
    const char *arch;
    int dim, layers, heads, kv_heads, ffn, seq, vocab, tie, window;
    float rope_theta, norm_eps;
} cli_model_flags;

#define CLI_N_MODEL_OPTS 12
void cli_model_flags_default(cli_model_flags *f);
/* Writes CLI_N_MODEL_OPTS entries into opts. */
void cli_model_opts(cli_model_flags *f, cli_opt *opts);
/* Builds and validates the config; --heads counts DIFF heads, so softmax gets twice as many. */
da_status cli_model_config(const cli_model_flags *f, const cli_opt *opts, int n_opts, da_config *cfg);

#endif
