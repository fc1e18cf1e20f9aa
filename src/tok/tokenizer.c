/* A byte-level BPE tokenizer's life: loading from a path or from
 * tokenizer.json text, comparing, freeing (tokenizer.h). Reading each kind of
 * file is tokenizer_json_read.c's and gpt2_files.c's, encoding bpe_encode.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tok/tokenizer.h"
#include "tok/tokenizer_internal.h"

static int exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

da_status da_tokenizer_load(da_tokenizer **out, const char *path) {
    *out = NULL;
    da_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return da_errorf("out of memory");
    int byte_to_cp[256];
    da_gpt2_byte_alphabet(byte_to_cp, t->cp_to_byte);
    t->heap_from = 257; /* above the scratch of da_tokenizer_encode: short pieces scan, faster */
    char a[4096], b[4096];
    struct stat sb;
    da_status st;
    if (stat(path, &sb)) {
        st = da_errorf("%s: %s", path, strerror(errno));
    } else if (S_ISDIR(sb.st_mode)) {
        snprintf(a, sizeof a, "%s/tokenizer.json", path);
        snprintf(b, sizeof b, "%s/encoder.json", path);
        if (exists(a)) st = da_tok_read_hf(t, a);
        else if (exists(b)) {
            snprintf(a, sizeof a, "%s/vocab.bpe", path);
            st = da_tok_read_gpt2(t, b, a);
        } else st = da_errorf("%s: holds neither tokenizer.json nor encoder.json + vocab.bpe", path);
    } else {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        if (!strcmp(base, "encoder.json")) {
            snprintf(a, sizeof a, "%.*svocab.bpe", (int)(base - path), path);
            st = da_tok_read_gpt2(t, path, a);
        } else {
            st = da_tok_read_hf(t, path);
        }
    }
    if (st.code) {
        da_tokenizer_free(t);
        return st;
    }
    *out = t;
    return da_ok();
}

int da_tokenizer_vocab_size(const da_tokenizer *t) { return t->vocab_size; }

void da_tokenizer_set_heap_from(da_tokenizer *t, size_t n) { t->heap_from = n; }

int da_tokenizer_special_id(const da_tokenizer *t, const char *text) {
    size_t n = strlen(text);
    for (int i = 0; i < t->n_special; i++) {
        int id = t->special_id[i];
        if (t->tok_len[id] == n && !memcmp(t->tok[id], text, n)) return id;
    }
    return -1;
}

void da_tokenizer_free(da_tokenizer *t) {
    if (!t) return;
    for (int i = 0; t->tok && i < t->vocab_size; i++) free(t->tok[i]);
    free(t->tok);
    free(t->tok_len);
    free(t->vocab.slot);
    free(t->merges.key);
    free(t->merges.rank);
    free(t->merges.merged);
    if (t->re) pcre2_code_free(t->re);
    free(t->json);
    free(t);
}

da_status da_tokenizer_from_json(da_tokenizer **out, const char *json, size_t n, const char *name) {
    *out = NULL;
    da_tokenizer *t = calloc(1, sizeof *t);
    char *copy = malloc(n + 1);
    if (!t || !copy) {
        free(t);
        free(copy);
        return da_errorf("%s: out of memory", name);
    }
    memcpy(copy, json, n);
    copy[n] = 0;
    int byte_to_cp[256];
    da_gpt2_byte_alphabet(byte_to_cp, t->cp_to_byte);
    t->json = copy;
    t->json_len = n;
    da_status st = da_tok_read_hf(t, name);
    if (st.code) {
        da_tokenizer_free(t);
        return st;
    }
    *out = t;
    return da_ok();
}

const char *da_tokenizer_json(const da_tokenizer *t, size_t *n) {
    if (n) *n = t->json_len;
    return t->json;
}

int da_tokenizer_same(const da_tokenizer *a, const da_tokenizer *b) {
    if (a->vocab_size != b->vocab_size || a->n_special != b->n_special) return 0;
    for (int i = 0; i < a->vocab_size; i++) {
        if (!a->tok[i] != !b->tok[i] || a->tok_len[i] != b->tok_len[i]) return 0;
        if (a->tok[i] && memcmp(a->tok[i], b->tok[i], a->tok_len[i])) return 0;
    }
    for (int s = 0; s < a->n_special; s++)
        if (da_tokenizer_special_id(b, (const char *)a->tok[a->special_id[s]]) != a->special_id[s]) return 0;
    size_t na = 0, nb = 0;
    for (size_t i = 0; i <= b->merges.mask; i++) nb += b->merges.key[i] != 0;
    for (size_t i = 0; i <= a->merges.mask; i++) {
        if (!a->merges.key[i]) continue;
        na++;
        const uint64_t k = a->merges.key[i] - 1;
        int merged = -1;
        if (da_pair_map_get(&b->merges, (int)(k >> 32), (int)(uint32_t)k, &merged) != a->merges.rank[i] ||
            merged != a->merges.merged[i])
            return 0;
    }
    return na == nb;
}
