/* A tokenizer as GGUF keys, both ways (tokenizer_gguf.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tokenizer_embed.h"
#include "tok/tokenizer_gguf.h"

/* What llama.cpp's add_special must add to give diffattn encode's ids: the
 * tokens the tokenizer.json's post_processor puts before and after a text
 * (probed on one byte). -1: none. */
static void special_around(const da_tokenizer *t, int *bos, int *eos) {
    *bos = *eos = -1;
    int *a = NULL, *b = NULL;
    size_t na = 0, ca = 0, nb = 0, cb = 0;
    const uint8_t x = 'a';
    if (!da_tokenizer_encode(t, &x, 1, &a, &na, &ca).code &&
        !da_tokenizer_encode_add_special(t, &x, 1, &b, &nb, &cb).code && nb > na) {
        const int lead = !memcmp(b + 1, a, na * sizeof *a);
        if (lead) *bos = b[0];
        if (nb == na + 1 + (size_t)lead && !memcmp(b + lead, a, na * sizeof *a)) *eos = b[nb - 1];
    }
    free(a);
    free(b);
}

/* llama.cpp's tokenizer keys (tokenizer.ggml.*) and, for an exact round
 * trip of what they cannot say (another pre-tokeniser, a normalizer), the
 * tokenizer.json text itself under tokenizer.huggingface.json. */
da_status da_gguf_add_tokenizer(da_gguf_writer *w, const char *json, const da_tokenizer *tok) {
    da_tok_ggml g;
    da_status st = da_tok_ggml_from_json(&g, json, strlen(json));
    if (st.code) return st;
    int bos, eos;
    special_around(tok, &bos, &eos);
    da_gguf_add_str(w, "tokenizer.ggml.model", "gpt2");
    if (g.pre) da_gguf_add_str(w, "tokenizer.ggml.pre", g.pre);
    da_gguf_add_str_array(w, "tokenizer.ggml.tokens", (const char *const *)g.tokens, (uint64_t)g.n_tokens);
    da_gguf_add_i32_array(w, "tokenizer.ggml.token_type", g.types, (uint64_t)g.n_tokens);
    da_gguf_add_str_array(w, "tokenizer.ggml.merges", (const char *const *)g.merges, (uint64_t)g.n_merges);
    if (bos >= 0 || g.bos >= 0) da_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(bos >= 0 ? bos : g.bos));
    if (eos >= 0 || g.eos >= 0) da_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(eos >= 0 ? eos : g.eos));
    da_gguf_add_bool(w, "tokenizer.ggml.add_bos_token", bos >= 0);
    da_gguf_add_bool(w, "tokenizer.ggml.add_eos_token", eos >= 0);
    da_gguf_add_str(w, "tokenizer.huggingface.json", json);
    da_tok_ggml_free(&g);
    return da_ok();
}

/* A model without a tokenizer reads bytes: id b is byte b. For llama.cpp that
 * is a byte-level BPE vocabulary without merges whose token b is byte b in
 * GPT-2's byte alphabet, so llama_tokenize gives the bytes; ids from 256 on
 * are unused "[PAD<id>]" entries, and NUL is BOS and EOS (never added).
 * With fewer than 256 ids no text can be tokenized: tokenizer.ggml.model is
 * "none" (ids only). diffattn.byte_level marks either for diffattn's reader. */
da_status da_gguf_add_byte_tokenizer(da_gguf_writer *w, int vocab) {
    da_gguf_add_bool(w, "diffattn.byte_level", 1);
    if (vocab < 256) {
        da_gguf_add_str(w, "tokenizer.ggml.model", "none");
        return da_ok();
    }
    char **tokens = calloc((size_t)vocab, sizeof *tokens);
    int32_t *types = malloc((size_t)vocab * sizeof *types);
    da_status st = tokens && types ? da_ok() : da_errorf("out of memory");
    for (int i = 0, extra = 0; !st.code && i < vocab; i++) {
        char buf[32];
        if (i < 256) {
            const int printable = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE;
            const unsigned cp = printable ? (unsigned)i : 256u + (unsigned)extra++; /* GPT-2's bytes_to_unicode */
            if (cp < 0x80) snprintf(buf, sizeof buf, "%c", (char)cp);
            else snprintf(buf, sizeof buf, "%c%c", (char)(0xC0 | (cp >> 6)), (char)(0x80 | (cp & 0x3F)));
            types[i] = DA_TOKTYPE_NORMAL;
        } else {
            snprintf(buf, sizeof buf, "[PAD%d]", i);
            types[i] = DA_TOKTYPE_UNUSED;
        }
        if (!(tokens[i] = strdup(buf))) st = da_errorf("out of memory");
    }
    if (!st.code) {
        da_gguf_add_str(w, "tokenizer.ggml.model", "gpt2");
        da_gguf_add_str(w, "tokenizer.ggml.pre", "gpt-2");
        da_gguf_add_str_array(w, "tokenizer.ggml.tokens", (const char *const *)tokens, (uint64_t)vocab);
        da_gguf_add_i32_array(w, "tokenizer.ggml.token_type", types, (uint64_t)vocab);
        da_gguf_add_str_array(w, "tokenizer.ggml.merges", NULL, 0);
        da_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", 0);
        da_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", 0);
        da_gguf_add_bool(w, "tokenizer.ggml.add_bos_token", 0);
        da_gguf_add_bool(w, "tokenizer.ggml.add_eos_token", 0);
    }
    for (int i = 0; tokens && i < vocab; i++) free(tokens[i]);
    free(tokens);
    free(types);
    return st;
}

/* The element count of array key (0 when absent or not an array: the getters then say what is wrong), read
 * from the key's header before anything is allocated for its elements. */
static uint64_t array_count(const da_gguf_file *f, const char *key) {
    const da_gguf_kv *kv = da_gguf_kv_find(f, key);
    return kv && kv->type == DA_GGUF_ARRAY ? kv->arr_n : 0;
}

/* Merges per vocabulary entry allowed: two pairs may make the same token (Llama 3 has 280,147 merges for
 * 128,256 ids, 2.2 a token), so more merges than tokens is legitimate; many more is a hostile file. */
#define MAX_MERGES_PER_TOKEN 8

/* tokenizer.ggml.tokens and .merges, when the file has them beside
 * tokenizer.huggingface.json, say what that JSON says: llama.cpp reads the
 * arrays, diffattn the JSON, so a contradiction would give two tokenizers. */
static da_status check_arrays_match_json(const da_gguf_file *f, const char *json) {
    static const char *const keys[2] = {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"};
    if (!da_gguf_kv_find(f, keys[0]) && !da_gguf_kv_find(f, keys[1])) return da_ok();
    da_tok_ggml g;
    da_status st = da_tok_ggml_from_json(&g, json, strlen(json));
    if (st.code) return da_errorf("%s: tokenizer.huggingface.json: %s", f->path, st.msg);
    for (int k = 0; k < 2 && !st.code; k++) {
        char **v = NULL;
        uint64_t n = 0;
        const int want_n = k ? g.n_merges : g.n_tokens;
        char **want = k ? g.merges : g.tokens;
        if (!da_gguf_kv_find(f, keys[k])) continue;
        if (array_count(f, keys[k]) != (uint64_t)want_n) { /* before the array is read */
            st = da_errorf("%s: %s has %llu entries, tokenizer.huggingface.json %d (llama.cpp would read one "
                           "tokenizer, diffattn the other)",
                           f->path, keys[k], (unsigned long long)array_count(f, keys[k]), want_n);
            break;
        }
        if ((st = da_gguf_get_str_array(f, keys[k], &v, &n)).code) continue;
        uint64_t i = 0;
        while (i < n && i < (uint64_t)want_n && !strcmp(v[i], want[i])) i++;
        if (n != (uint64_t)want_n || i < n)
            st = da_errorf("%s: %s contradicts tokenizer.huggingface.json (%s; llama.cpp would read one tokenizer, "
                           "diffattn the other)",
                           f->path, keys[k],
                           n != (uint64_t)want_n ? "a different number of entries" : "an entry differs");
        da_gguf_free_str_array(v, n);
    }
    da_tok_ggml_free(&g);
    return st;
}

da_status da_gguf_tokenizer_json(const da_gguf_file *f, int vocab, char **json) {
    *json = NULL;
    const char *s;
    const da_gguf_kv *bytes = da_gguf_kv_find(f, "diffattn.byte_level");
    if (bytes && bytes->type == DA_GGUF_BOOL && bytes->v.u) return da_ok();
    if (da_gguf_kv_find(f, "tokenizer.huggingface.json")) {
        da_status st = da_gguf_get_str(f, "tokenizer.huggingface.json", &s);
        if (st.code) return st;
        if (!(*json = strdup(s))) return da_errorf("%s: out of memory", f->path);
        if ((st = check_arrays_match_json(f, s)).code) {
            free(*json);
            *json = NULL;
        }
        return st;
    }
    if (!da_gguf_kv_find(f, "tokenizer.ggml.model")) return da_ok();
    da_status st = da_gguf_get_str(f, "tokenizer.ggml.model", &s);
    if (st.code) return st;
    if (!strcmp(s, "none")) return da_ok(); /* ids only */
    if (!strcmp(s, "llama"))
        return da_errorf("%s: tokenizer.ggml.model is \"llama\" (SentencePiece), which diffattn does not encode; "
                         "diffattn reads byte-level BPE (\"gpt2\") and \"none\" (ids only)",
                         f->path);
    if (strcmp(s, "gpt2"))
        return da_errorf("%s: tokenizer.ggml.model is \"%s\"; diffattn reads byte-level BPE (\"gpt2\") and \"none\" "
                         "(ids only)",
                         f->path, s);
    da_tok_ggml g;
    memset(&g, 0, sizeof g);
    g.bos = g.eos = -1;
    uint64_t n_tok = 0, n_types = 0, n_merges = 0;
    if (da_gguf_kv_find(f, "tokenizer.ggml.pre") && (st = da_gguf_get_str(f, "tokenizer.ggml.pre", &g.pre)).code)
        return st;
    int64_t bos = -1;
    g.add_bos = -1;
    if (da_gguf_kv_find(f, "tokenizer.ggml.bos_token_id") &&
        (st = da_gguf_get_int(f, "tokenizer.ggml.bos_token_id", &bos)).code)
        return st;
    if (da_gguf_kv_find(f, "tokenizer.ggml.add_bos_token") &&
        (st = da_gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &g.add_bos)).code)
        return st;
    const uint64_t n_ids = array_count(f, "tokenizer.ggml.tokens");
    if (g.add_bos == 1 && da_gguf_kv_find(f, "tokenizer.ggml.bos_token_id") && (bos < 0 || (uint64_t)bos >= n_ids))
        return da_errorf("%s: tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id %lld is not a token "
                         "(the vocabulary has %llu)",
                         f->path, (long long)bos, (unsigned long long)n_ids);
    g.bos = bos >= 0 && bos < (1 << 24) ? (int)bos : -1;
    /* the counts against the vocabulary and each other, from the arrays' headers: nothing is allocated for a
     * file that would be refused (19 MB of tokens took 239 MB before their count was compared) */
    const uint64_t c_tok = array_count(f, "tokenizer.ggml.tokens"), c_types = array_count(f, "tokenizer.ggml.token_type"),
                   c_merges = array_count(f, "tokenizer.ggml.merges");
    if (vocab > 0 && c_tok != (uint64_t)vocab && da_gguf_kv_find(f, "tokenizer.ggml.tokens"))
        return da_errorf("%s: tokenizer.ggml.tokens has %llu entries but the model's vocabulary is %d (vocab_size, "
                         "token_embd's rows)",
                         f->path, (unsigned long long)c_tok, vocab);
    if (c_types != c_tok && da_gguf_kv_find(f, "tokenizer.ggml.token_type"))
        return da_errorf("%s: tokenizer.ggml.token_type has %llu entries, tokenizer.ggml.tokens %llu", f->path,
                         (unsigned long long)c_types, (unsigned long long)c_tok);
    if (c_tok > (1u << 24) || c_merges > (1u << 24) || c_merges > MAX_MERGES_PER_TOKEN * c_tok + 256)
        return da_errorf("%s: tokenizer.ggml.tokens (%llu) or .merges (%llu) holds too many entries (at most 2^24, "
                         "and %d merges a token)",
                         f->path, (unsigned long long)c_tok, (unsigned long long)c_merges, MAX_MERGES_PER_TOKEN);
    int32_t *types = NULL;
    if (!(st = da_gguf_get_str_array(f, "tokenizer.ggml.tokens", &g.tokens, &n_tok)).code &&
        !(st = da_gguf_get_i32_array(f, "tokenizer.ggml.token_type", &types, &n_types)).code &&
        !(st = da_gguf_get_str_array(f, "tokenizer.ggml.merges", &g.merges, &n_merges)).code && n_types != n_tok)
        st = da_errorf("%s: tokenizer.ggml.token_type has %llu entries, tokenizer.ggml.tokens %llu", f->path,
                       (unsigned long long)n_types, (unsigned long long)n_tok);
    g.types = types;
    g.n_tokens = (int)n_tok;
    g.n_merges = (int)n_merges;
    if (!st.code) st = da_tok_ggml_to_json(&g, f->path, json);
    g.pre = NULL;
    da_gguf_free_str_array(g.tokens, n_tok);
    da_gguf_free_str_array(g.merges, n_merges);
    free(types);
    return st;
}
