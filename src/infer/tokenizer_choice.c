/* Which tokenizer goes with a model (da_engine_choose_tokenizer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "diffattn/generate.h"

/* Tokenizer files saved beside a model by trainings from before models
 * carried their tokenizer: the folder of model_path when it holds one. */
static int folder_beside(const char *model_path, char *out, size_t n) {
    snprintf(out, n, "%s", model_path);
    char *slash = strrchr(out, '/');
    if (slash) *slash = 0;
    else snprintf(out, n, ".");
    static const char *const names[] = {"tokenizer.json", "encoder.json"};
    for (int i = 0; i < 2; i++) {
        char probe[4300];
        struct stat sb;
        snprintf(probe, sizeof probe, "%s/%s", out, names[i]);
        if (!stat(probe, &sb)) return 1;
    }
    return 0;
}

/* given_path's tokenizer, checked against e's own and e's vocabulary. */
static da_status load_given(const da_engine *e, const char *model_path, const char *path, da_tokenizer **owned) {
    da_status st = da_tokenizer_load(owned, path);
    if (st.code) return st;
    const da_tokenizer *embedded = da_engine_tokenizer(e);
    const int V = da_engine_config(e)->vocab_size, n = da_tokenizer_vocab_size(*owned);
    char given_name[4300], own_name[4300];
    snprintf(given_name, sizeof given_name, "tokenizer %s", path);
    snprintf(own_name, sizeof own_name, "the tokenizer %s carries", model_path);
    st = da_tokenizer_match(*owned, given_name, embedded, own_name,
                            "its ids would decode to other text; use the model's own");
    if (!st.code && n != V) /* a smaller one would drop the ids it cannot decode, a larger one feed ids the model lacks */
        st = da_errorf("tokenizer %s has %d tokens but the model's vocabulary %d (the wrong tokenizer?)", path, n, V);
    if (st.code) {
        da_tokenizer_free(*owned);
        *owned = NULL;
    }
    return st;
}

da_status da_engine_choose_tokenizer(const da_engine *e, const char *model_path, const char *given_path,
                                     da_tokenizer **owned, const da_tokenizer **use) {
    *owned = NULL;
    *use = NULL;
    char found[4200];
    const char *path = given_path;
    if (!path && da_model_tokenizer_path(model_path, found, sizeof found)) path = found; /* a Hugging Face folder */
    if (!path && !da_engine_tokenizer(e) && folder_beside(model_path, found, sizeof found)) path = found;
    if (path) {
        da_status st = load_given(e, model_path, path, owned);
        *use = *owned;
        return st;
    }
    *use = da_engine_tokenizer(e);
    const int V = da_engine_config(e)->vocab_size;
    if (!*use && V != 256) /* bytes would drop (or never produce) the ids past 255 */
        return da_errorf("%s carries no tokenizer and its vocabulary has %d tokens, not the 256 bytes: give a "
                         "tokenizer",
                         model_path, V);
    return da_ok();
}
