/* What every command reports the same way: errors, warnings and JSON results. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"

int cli_fail(const char *msg) {
    fprintf(stderr, "diffattn: %s\n", msg);
    return 1;
}

int cli_print_json(char *json) {
    if (!json) return cli_fail("out of memory writing the JSON result");
    puts(json);
    free(json);
    return fflush(stdout) ? cli_fail("write error on standard output") : 0;
}

void cli_name_flags(char *out, size_t size, const char *msg) {
    const da_field *tables[2] = {da_config_fields, da_train_config_fields};
    const int counts[2] = {DA_CONFIG_N_FIELDS, DA_TRAIN_CONFIG_N_FIELDS};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < counts[t]; i++) {
            const da_field *f = &tables[t][i];
            size_t len = strlen(f->key);
            if (f->flag && !strncmp(msg, f->key, len) && msg[len] == ':') {
                snprintf(out, size, "%s (--%s)%s", f->key, f->flag, msg + len);
                return;
            }
        }
    snprintf(out, size, "%s", msg);
}

void cli_warn_unnamed_pre(const char *cmd, const char *out) {
    fprintf(stderr,
            "diffattn %s: warning: %s: the tokenizer's pre-tokeniser has no name in llama.cpp (it names GPT-2's, "
            "Llama 3's, Qwen2/3's and GPT-4o's), so the file carries no tokenizer.ggml.pre and llama.cpp will split "
            "text with its default, giving other ids than diffattn encode; diffattn reads the embedded "
            "tokenizer.json and stays exact (docs/formats.md)\n",
            cmd, out);
}

int cli_fail_fields(const char *msg) {
    char named[1024];
    cli_name_flags(named, sizeof named, msg);
    return cli_fail(named);
}
