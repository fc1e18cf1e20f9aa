/* The tokenizer of a file, whatever the file (da_tokenizer_read), and the one
 * that goes with a model: sample's choice (da_engine_choose_tokenizer) and
 * encode's and decode's (da_tokenizer_open). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "diffattn/formats.h"
#include "diffattn/generate.h"
#include "infer/tokenizer_read.h"
#include "io/gguf.h"

/* 1 when path is a model file or folder rather than a tokenizer file (JSON
 * text): a folder, a GGUF, or a safetensors file (an 8-byte header length
 * within the file, then the header's '{'). */
static int is_model(const char *path) {
    struct stat sb;
    if (stat(path, &sb)) return 0;
    if (S_ISDIR(sb.st_mode) || da_gguf_is_gguf(path)) return 1;
    unsigned char b[9];
    FILE *fp = da_fopen_regular(path, NULL); /* a FIFO is no model, and must not block */
    const size_t got = fp ? fread(b, 1, sizeof b, fp) : 0;
    if (fp) fclose(fp);
    if (got < sizeof b || b[8] != '{') return 0;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
    return n <= (uint64_t)sb.st_size - 8;
}

da_status da_tokenizer_read(const char *path, const da_load_opts *lo, da_tokenizer **out) {
    *out = NULL;
    char found[4200];
    if (da_model_tokenizer_path(path, found, sizeof found)) return da_tokenizer_load(out, found);
    if (!is_model(path)) return da_tokenizer_load(out, path);
    /* the tokenizer a model carries, read (and checked against its vocabulary) as the engine reads it */
    da_engine *e = NULL;
    da_status st = da_engine_load_with(&e, path, lo);
    if (st.code) return st;
    const da_tokenizer *own = da_engine_tokenizer(e);
    if (own) {
        size_t n;
        const char *json = da_tokenizer_json(own, &n);
        st = da_tokenizer_from_json(out, json, n, path);
    }
    da_engine_free(e);
    return st;
}

/* ---------------------------------------------------------------- sample's choice */

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
    da_status st = da_tokenizer_read(path, NULL, owned);
    if (!st.code && !*owned) st = da_errorf("%s carries no tokenizer", path);
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

/* ---------------------------------------------------------------- encode and decode */

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
