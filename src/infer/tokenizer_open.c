/* The tokenizer of encode and decode: a file, the one a model goes with (as
 * sample and serve choose it), or both when they agree (da_tokenizer_open). */
#include <stdio.h>
#include <stdlib.h>

#include "diffattn/generate.h"

/* *out: a copy of the tokenizer sample and serve use with model (a Hugging
 * Face folder's tokenizer.json, else the one the file carries: see
 * da_engine_choose_tokenizer), after checking it against the one already in
 * *out (if any). */
static da_status from_model(const char *tok_path, const char *model, const da_load_opts *lo, da_tokenizer **out) {
    da_engine *e = NULL;
    da_status st = da_engine_load_with(&e, model, lo);
    if (st.code) return st;
    da_tokenizer *owned = NULL;
    const da_tokenizer *own = NULL;
    st = da_engine_choose_tokenizer(e, model, NULL, &owned, &own);
    char given_name[4200], own_name[4200];
    snprintf(given_name, sizeof given_name, "--tokenizer %s", tok_path ? tok_path : "");
    snprintf(own_name, sizeof own_name, "the tokenizer of %s", model);
    if (st.code) {
        /* reported as it is */
    } else if (!own && !*out) {
        st = da_errorf("%s carries no tokenizer (a byte-level model, or a file from before tokenizers were embedded): "
                       "give --tokenizer",
                       model);
    } else if (*out) {
        st = da_tokenizer_match(*out, given_name, own, own_name, NULL);
    } else {
        size_t n;
        const char *json = da_tokenizer_json(own, &n);
        st = da_tokenizer_from_json(out, json, n, model);
    }
    da_tokenizer_free(owned);
    da_engine_free(e);
    return st;
}

da_status da_tokenizer_open(const char *tok_path, const char *model, const da_load_opts *lo, da_tokenizer **out) {
    *out = NULL;
    if (!tok_path && !model) return da_errorf("give --tokenizer, or --model for the tokenizer a model carries");
    da_status st = tok_path ? da_tokenizer_load(out, tok_path) : da_ok();
    if (!st.code && model) st = from_model(tok_path, model, lo, out);
    if (st.code) {
        da_tokenizer_free(*out);
        *out = NULL;
    }
    return st;
}
