/* The subcommands; each returns the process exit code. */
#ifndef DA_CLI_COMMANDS_H
#define DA_CLI_COMMANDS_H

#include "diffattn.h"

int cmd_init(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_grads(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_encode(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_tokenizer(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_eval_ppl(int argc, char **argv);       /* eval ppl */
int cmd_eval_loss(int argc, char **argv);      /* eval loss */
int cmd_bench_generate(int argc, char **argv); /* bench generate */
int cmd_serve(int argc, char **argv);

/* eval: the model (any format, as a da_model) and its validation data, with *seq 0 meaning the model's context.
 * On failure nothing is left allocated. */
da_status cli_eval_model_data(const char *model, const char *data, float val_fraction, int *seq, da_model *m,
                              da_text_data *d);
/* Prints "diffattn: <msg>" to stderr and returns 1. */
int cli_fail(const char *msg);
/* Prints a result's JSON text (from the library's writer) as one line and frees it; NULL: out of memory.
 * Returns the exit code. */
int cli_print_json(char *json);
/* The warning of a GGUF written with a tokenizer llama.cpp would split otherwise (da_tokenizer_llama_pre). */
void cli_warn_unnamed_pre(const char *cmd, const char *out);

#endif
