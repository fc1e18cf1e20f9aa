/* The model and validation data that eval loss and eval outliers share (commands.h). */
#include "args.h"
#include "commands.h"
#include "eval/eval.h"

da_status cli_eval_model_data(const char *model, const char *data, float val_fraction, int *seq, da_model *m,
                              da_text_data *d) {
    da_status st = da_model_load_any_with(m, model, cli_load_opts());
    if (st.code) return st;
    /* a Hugging Face folder's text goes through its tokenizer.json, as sample and encode take it */
    if ((st = da_model_take_folder_tokenizer(m, model)).code) {
        da_model_free(m);
        return st;
    }
    da_tokenizer *tok = NULL;
    if (*seq == 0) *seq = m->cfg.max_seq_len;
    if (*seq <= 0) st = da_errorf("--seq must be positive");
    if (!st.code && (st = da_model_tokenizer(m, &tok)).code) st = da_errorf("%s: %s", model, st.msg);
    if (!st.code) st = da_eval_data_load(d, data, val_fraction, *seq, model, tok, m->cfg.vocab_size);
    da_tokenizer_free(tok);
    if (st.code) da_model_free(m);
    return st;
}
