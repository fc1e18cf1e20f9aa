/* Flag parsing for the subcommands: --name VALUE or --name=VALUE, strict
 * number parsing, --help generated from the table. */
#ifndef DA_CLI_ARGS_H
#define DA_CLI_ARGS_H

#include <stdint.h>

#include "diffattn.h"

typedef enum { OPT_INT, OPT_LONG, OPT_FLOAT, OPT_STR, OPT_FLAG, OPT_U64, OPT_ENUM, OPT_FIELD } cli_opt_type;

/* What an OPT_ENUM's dst points to: the value is the index of its spelling.
 * An OPT_FIELD's (a table row parsed and shown as the table does: a float
 * with a spelled default) has field and obj set instead. */
typedef struct {
    int *value;
    const char *const *names; /* NULL-terminated */
    const da_field *field;
    void *obj;
} cli_enum;

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

/* The load options of this invocation. main takes --allow-nonfinite out of
 * argv wherever it stands (cli_take_load_opts), before a command runs; the
 * commands pass cli_load_opts() to every loader. Returns the new argc. */
int cli_take_load_opts(int argc, char **argv);
const da_load_opts *cli_load_opts(void);

/* From now on Ctrl-C (SIGINT) and SIGTERM set the returned flag, which long
 * jobs poll to checkpoint and stop; a second signal ends the process at once. */
volatile int *cli_catch_stop_signals(void);

/* Options for the rows of a configuration table that have a flag, bound to
 * obj's fields (whose current values --help shows as defaults). enums: room
 * for one cli_enum per DA_FIELD_ENUM row and per float row with names, which
 * the options point to.
 * Returns the number of options written. */
int cli_field_opts(const da_field *fields, int n, void *obj, cli_opt *opts, cli_enum *enums);
/* given[i] = 1 when row i of the table has a flag that was given. */
void cli_fields_given(const da_field *fields, int n, const cli_opt *opts, int n_opts, unsigned char *given);
/* Writes msg to out, naming the flag of a configuration field it begins with:
 * "batch: ..." becomes "batch (--batch): ...". */
void cli_name_flags(char *out, size_t size, const char *msg);
/* cli_fail with cli_name_flags applied. */
int cli_fail_fields(const char *msg);

/* The model flags shared by init, train and bench: one per row of
 * da_config_fields. */
typedef struct {
    da_config cfg; /* the table's defaults (0 = derived), then the flags */
    int seq;       /* --seq, set by cli_model_config */
    cli_enum enums[8]; /* one per DA_FIELD_ENUM row and named float row: arch, rope_freq, rope_scaling,
                        * head_norm, lambda_init */
} cli_model_flags;

#define CLI_N_MODEL_OPTS DA_CONFIG_N_FIELDS
void cli_model_flags_default(cli_model_flags *f);
/* Writes CLI_N_MODEL_OPTS entries into opts. */
void cli_model_opts(cli_model_flags *f, cli_opt *opts);
/* Builds and validates the config (da_config_from_diff_heads: --heads counts
 * DIFF heads); the message names the flag. */
da_status cli_model_config(cli_model_flags *f, const cli_opt *opts, int n_opts, da_config *cfg);

/* The --tokenizer and --model flags of encode and decode (da_tokenizer_open). */
#define CLI_TOKENIZER_HELP                                                                                             \
    "tokenizer.json (Hugging Face byte-level BPE), GPT-2's encoder.json (vocab.bpe beside it), a folder holding "     \
    "either, or a model file or folder (the tokenizer it goes with)"
#define CLI_TOKENIZER_MODEL_HELP "a model file: use the tokenizer it carries (default when --tokenizer is not given)"

/* --flag's "1024,2048" -> up to max ints in [lo, hi]; "0,0.2" -> doubles.
 * 0, or 1 after an error line that states max, lo and hi (the bounds the
 * check used), like "--seq \"70000\": expected up to 8 lengths in 5..65536,
 * like 64,128,256" (noun: "lengths"; example: "64,128,256"). */
int cli_parse_ints(const char *flag, const char *s, int *out, int max, int *n, int lo, int hi, const char *noun,
                   const char *example);
int cli_parse_doubles(const char *flag, const char *s, double *out, int max, int *n, double lo, double hi,
                      const char *noun, const char *example);

/* --act and --kv of eval ppl and bench generate into session options (act_s
 * NULL: the file's own); prints the error and returns 1 on a bad value. */
int cli_parse_run_opts(const char *act_s, const char *kv_s, da_session_opts *o);

#endif
