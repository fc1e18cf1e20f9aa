/* The rule that ids pass between a model and its data only under one
 * tokenizer (da_tokenizer_match). */
#include "diffattn/tokenizer.h"

da_status da_tokenizer_match(const da_tokenizer *given, const char *given_name, const da_tokenizer *own,
                             const char *own_name, const char *hint) {
    if (!given || !own || da_tokenizer_same(given, own)) return da_ok();
    return da_errorf("%s (%d tokens) differs from %s (%d tokens)%s%s", given_name, da_tokenizer_vocab_size(given),
                     own_name, da_tokenizer_vocab_size(own), hint ? ": " : "", hint ? hint : "");
}
