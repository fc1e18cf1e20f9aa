/* The tokenizer of a file, whatever the file (da_tokenizer_read): the one
 * reader of tokenizers from files and models, which sample's and serve's
 * choice (da_engine_choose_tokenizer) and encode's and decode's
 * (da_tokenizer_open) go through. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "diffattn/formats.h"
#include "diffattn/generate.h"
#include "infer/tokenizer_read.h"
#include "io/gguf.h"
#include "io/hf_model.h"

/* 1 when path is a model file or folder rather than a tokenizer file (JSON
 * text) or folder: a Hugging Face folder, a GGUF, or a safetensors file (an
 * 8-byte header length within the file, then the header's '{'). */
static int is_model(const char *path) {
    struct stat sb;
    if (stat(path, &sb)) return 0;
    if (S_ISDIR(sb.st_mode)) return da_hf_is_folder(path);
    if (da_gguf_is_gguf(path)) return 1;
    unsigned char b[9];
    FILE *fp = da_fopen_regular(path, NULL); /* a FIFO is no model, and must not block */
    const size_t got = fp ? fread(b, 1, sizeof b, fp) : 0;
    if (fp) fclose(fp);
    if (got < sizeof b || b[8] != '{') return 0;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
    return n <= (uint64_t)sb.st_size - 8;
}

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

/* *owned: the tokenizer of path (read by `read`), checked against the one e
 * carries and against e's vocabulary. */
static da_status load_checked(const da_engine *e, const char *model_path, const char *path, da_tokenizer **owned,
                              da_status (*read)(const char *path, da_tokenizer **out)) {
    da_status st = read(path, owned);
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

static da_status load_file(const char *path, da_tokenizer **out) { return da_tokenizer_load(out, path); }

/* The tokenizer of model e, loaded from model_path: a Hugging Face folder's
 * tokenizer.json, else the one e carries, else tokenizer files saved beside a
 * model from before models carried theirs (*use NULL when none). *owned: what
 * the caller frees (NULL when *use is e's own). */
static da_status model_tokenizer(const da_engine *e, const char *model_path, da_tokenizer **owned,
                                 const da_tokenizer **use) {
    char found[4200];
    if (da_model_tokenizer_path(model_path, found, sizeof found) ||
        (!da_engine_tokenizer(e) && folder_beside(model_path, found, sizeof found))) {
        da_status st = load_checked(e, model_path, found, owned, load_file);
        *use = *owned;
        return st;
    }
    *use = da_engine_tokenizer(e);
    return da_ok();
}

da_status da_tokenizer_read(const char *path, const da_load_opts *lo, da_tokenizer **out) {
    *out = NULL;
    if (!is_model(path)) return da_tokenizer_load(out, path);
    da_engine *e = NULL;
    da_status st = da_engine_load_with(&e, path, lo);
    if (st.code) return st;
    const da_tokenizer *use = NULL;
    st = model_tokenizer(e, path, out, &use);
    if (!st.code && use && !*out) { /* e's own, copied to outlive e */
        size_t n;
        const char *json = da_tokenizer_json(use, &n);
        st = da_tokenizer_from_json(out, json, n, path);
    }
    da_engine_free(e);
    return st;
}

static da_status read_any(const char *path, da_tokenizer **out) { return da_tokenizer_read(path, NULL, out); }

/* ---------------------------------------------------------------- sample's choice */

da_status da_engine_choose_tokenizer(const da_engine *e, const char *model_path, const char *given_path,
                                     da_tokenizer **owned, const da_tokenizer **use) {
    *owned = NULL;
    *use = NULL;
    if (given_path) {
        da_status st = load_checked(e, model_path, given_path, owned, read_any);
        *use = *owned;
        return st;
    }
    da_status st = model_tokenizer(e, model_path, owned, use);
    const int V = da_engine_config(e)->vocab_size;
    if (!st.code && !*use && V != 256) /* bytes would drop (or never produce) the ids past 255 */
        return da_errorf("%s carries no tokenizer and its vocabulary has %d tokens, not the 256 bytes: give a "
                         "tokenizer",
                         model_path, V);
    return st;
}

/* ---------------------------------------------------------------- encode and decode */

da_status da_tokenizer_open(const char *tok_path, const char *model, const da_load_opts *lo, da_tokenizer **out) {
    *out = NULL;
    if (!tok_path && !model) return da_errorf("give --tokenizer, or --model for the tokenizer a model carries");
    da_status st = tok_path ? da_tokenizer_read(tok_path, lo, out) : da_ok();
    if (!st.code && tok_path && !*out) st = da_errorf("%s carries no tokenizer", tok_path);
    da_tokenizer *own = NULL;
    if (!st.code && model) st = da_tokenizer_read(model, lo, &own);
    if (st.code || !model) {
        /* reported as it is */
    } else if (!own && !*out) {
        st = da_errorf("%s carries no tokenizer (a byte-level model, or a file from before tokenizers were embedded): "
                       "give --tokenizer",
                       model);
    } else if (*out) {
        char given_name[4200], own_name[4200];
        snprintf(given_name, sizeof given_name, "--tokenizer %s", tok_path);
        snprintf(own_name, sizeof own_name, "the tokenizer of %s", model);
        st = da_tokenizer_match(*out, given_name, own, own_name, NULL);
    } else {
        *out = own;
        own = NULL;
    }
    da_tokenizer_free(own);
    if (st.code) {
        da_tokenizer_free(*out);
        *out = NULL;
    }
    return st;
}
