/* The validation data of an evaluation, checked against the model (da_eval_data_load). */
#include <stdio.h>

#include "eval/eval.h"

da_status da_eval_data_load(da_text_data *d, const char *data, float val_fraction, int seq, const char *model,
                            const da_tokenizer *tok, int vocab_size) {
    da_tokenizer *shard_tok = NULL;
    da_status st = da_data_tokenizer(data, &shard_tok);
    char shards[4200], own[4200];
    snprintf(shards, sizeof shards, "%s: the shards' tokenizer", data);
    snprintf(own, sizeof own, "the one %s carries", model);
    if (!st.code) st = da_tokenizer_match(shard_tok, shards, tok, own, NULL);
    da_tokenizer_free(shard_tok);
    if (!st.code) st = da_text_data_load_tok(d, data, val_fraction, seq, tok);
    if (!st.code && (st = da_text_data_check_vocab(d, data, vocab_size)).code) da_text_data_free(d);
    return st;
}
