/* GPT-2's encoder.json + vocab.bpe pair. */
#include <stdlib.h>
#include <string.h>

#include "tok/tokenizer.h"
#include "tok/tokenizer_internal.h"

/* GPT-2's encoder.json + vocab.bpe as the equivalent Hugging Face
 * tokenizer.json (ByteLevel pre-tokeniser, <|endoftext|> as an added special
 * token), kept as the tokenizer's text so that it can be embedded in a model
 * file and loaded back as the same tokenizer. */
static da_status gpt2_as_hf_json(da_tokenizer *t, const char *path, const cJSON *vocab, const char *bpe, size_t n_bpe) {
    cJSON *merges = cJSON_CreateArray(), *added = cJSON_CreateArray(), *v = cJSON_Duplicate(vocab, 1);
    int ok = merges && added && v;
    const cJSON *eot = cJSON_GetObjectItemCaseSensitive(vocab, "<|endoftext|>");
    if (ok && cJSON_IsNumber(eot)) {
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(added, e) && cJSON_AddNumberToObject(e, "id", eot->valuedouble) &&
             cJSON_AddStringToObject(e, "content", "<|endoftext|>") && cJSON_AddBoolToObject(e, "special", 1);
    }
    for (const char *p = bpe; ok && p < bpe + n_bpe;) {
        const char *e = memchr(p, '\n', (size_t)(bpe + n_bpe - p));
        size_t len = e ? (size_t)(e - p) : (size_t)(bpe + n_bpe - p);
        if (len && p[len - 1] == '\r') len--;
        if (len && !(p == bpe && !strncmp(p, "#version", 8))) {
            char *line = malloc(len + 1);
            cJSON *item = line ? (memcpy(line, p, len), line[len] = 0, cJSON_CreateString(line)) : NULL;
            free(line);
            ok = item && cJSON_AddItemToArray(merges, item);
        }
        p = e ? e + 1 : bpe + n_bpe;
    }
    char *text = ok ? da_tok_bytelevel_json(v, merges, added) : NULL;
    if (!ok) {
        cJSON_Delete(v);
        cJSON_Delete(merges);
        cJSON_Delete(added);
    }
    if (!text) return da_errorf("%s: out of memory converting to tokenizer.json", path);
    t->json = text;
    t->json_len = strlen(text);
    return da_ok();
}

da_status da_tok_read_gpt2(da_tokenizer *t, const char *enc_path, const char *bpe_path) {
    char *js = NULL, *bpe = NULL;
    size_t n_js, n_bpe;
    cJSON *vocab = NULL;
    da_status st = da_tok_read_file(enc_path, &js, &n_js);
    if (st.code) return st;
    vocab = cJSON_ParseWithLength(js, n_js);
    if (!vocab || !cJSON_IsObject(vocab)) {
        st = da_errorf("%s: not a JSON object of token -> id", enc_path);
        goto done;
    }
    if ((st = da_tok_build_vocab(t, enc_path, vocab, NULL)).code) goto done;
    if ((st = da_tok_read_file(bpe_path, &bpe, &n_bpe)).code) goto done;
    if ((st = gpt2_as_hf_json(t, enc_path, vocab, bpe, n_bpe)).code) goto done;
    size_t lines = 1;
    for (size_t i = 0; i < n_bpe; i++) lines += bpe[i] == '\n';
    if (da_pair_map_init(&t->merges, lines)) {
        st = da_errorf("%s: out of memory", bpe_path);
        goto done;
    }
    int rank = 0;
    for (char *p = bpe; p < bpe + n_bpe;) {
        char *e = memchr(p, '\n', (size_t)(bpe + n_bpe - p));
        size_t len = e ? (size_t)(e - p) : (size_t)(bpe + n_bpe - p);
        if (len && p[len - 1] == '\r') len--;
        if (len && !(p == bpe && !strncmp(p, "#version", 8))) {
            if ((st = da_tok_add_merge(t, bpe_path, p, len, rank)).code) goto done;
            rank++;
        }
        p = e ? e + 1 : bpe + n_bpe;
    }
    st = da_tok_compile_regex(t, DA_GPT2_PATTERN);
done:
    cJSON_Delete(vocab);
    free(js);
    free(bpe);
    return st;
}
