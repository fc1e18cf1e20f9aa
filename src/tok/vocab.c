/* A tokenizer's vocabulary and merges, built from the token -> id object and
 * the merge lines of either kind of file (tokenizer.json, GPT-2's pair), and
 * the reading of those files. */
#define _GNU_SOURCE /* strdup */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "diffattn/formats.h"
#include "tok/tokenizer_internal.h"

/* Far above any real tokenizer.json (Gemma 3's, among the largest, is 33 MB). */
#define MAX_TOKENIZER_FILE ((size_t)1 << 30)

da_status da_tok_read_file(const char *path, char **data, size_t *n) {
    return da_read_regular(path, MAX_TOKENIZER_FILE, data, n);
}

da_status da_tok_add_merge(da_tokenizer *t, const char *path, const char *line, size_t len, int rank) {
    const int *cp_to_byte = t->cp_to_byte;
    char buf[1024];
    if (len >= sizeof buf) return da_errorf("%s: merge #%d is too long", path, rank + 1);
    memcpy(buf, line, len);
    buf[len] = 0;
    char *sp = strchr(buf, ' ');
    if (!sp || strchr(sp + 1, ' ')) return da_errorf("%s: merge #%d \"%s\" is not two tokens", path, rank + 1, buf);
    *sp = 0;
    uint8_t *a = NULL, *b = NULL;
    uint32_t la, lb;
    if (da_gpt2_token_bytes(buf, cp_to_byte, &a, &la) || da_gpt2_token_bytes(sp + 1, cp_to_byte, &b, &lb)) {
        free(a); /* the first may have converted */
        return da_errorf("%s: merge #%d has characters outside GPT-2's byte alphabet", path, rank + 1);
    }
    uint8_t ab[2048];
    memcpy(ab, a, la);
    memcpy(ab + la, b, lb);
    int ia = da_tok_bytes_id(t, a, la), ib = da_tok_bytes_id(t, b, lb), iab = da_tok_bytes_id(t, ab, la + lb);
    free(a);
    free(b);
    if (ia < 0 || ib < 0 || iab < 0)
        return da_errorf("%s: merge #%d (\"%s\" + \"%s\") refers to a token missing from the vocabulary", path,
                         rank + 1, buf, sp + 1);
    da_pair_map_put(&t->merges, ia, ib, rank, iab);
    return da_ok();
}

int da_tok_is_token_id(const cJSON *j) {
    return cJSON_IsNumber(j) && j->valuedouble >= 0 && j->valuedouble <= MAX_TOKEN_ID &&
           j->valuedouble == (double)(int)j->valuedouble;
}

da_status da_tok_build_vocab(da_tokenizer *t, const char *path, cJSON *vocab, const cJSON *added) {
    const int *cp_to_byte = t->cp_to_byte;
    int max_id = -1, count = 0, n_added = 0;
    for (cJSON *e = vocab->child; e; e = e->next) {
        if (!da_tok_is_token_id(e)) return da_errorf("%s: vocabulary entry \"%.40s\" has no valid id", path, e->string);
        if ((int)e->valuedouble > max_id) max_id = (int)e->valuedouble;
        count++;
    }
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next, n_added++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!da_tok_is_token_id(id) || !cJSON_IsString(c))
            return da_errorf("%s: added_tokens[%d] lacks an id in [0, %d] or a content string", path, n_added,
                             MAX_TOKEN_ID);
        if ((int)id->valuedouble > max_id) max_id = (int)id->valuedouble;
    }
    if (count == 0) return da_errorf("%s: the vocabulary is empty", path);
    /* The id arrays are sized by the largest id: bound it by the tokens the
     * file defines, so that a few bytes cannot claim gigabytes. */
    const long defined = (long)count + n_added, limit = 2 * defined + 1024;
    if (max_id >= limit)
        return da_errorf("%s: id %d is far beyond the %ld tokens the file defines (ids must stay below %ld; is an id "
                         "in model.vocab or added_tokens wrong?)",
                         path, max_id, defined, limit);
    t->vocab_size = max_id + 1;
    t->tok = calloc((size_t)t->vocab_size, sizeof(uint8_t *));
    t->tok_len = calloc((size_t)t->vocab_size, sizeof(uint32_t));
    if (!t->tok || !t->tok_len || da_bytes_map_init(&t->vocab, (size_t)count))
        return da_errorf("%s: out of memory", path);
    /* specials first: their text is not in the byte alphabet in general */
    n_added = 0;
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next, n_added++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "special");
        if (sp && !cJSON_IsTrue(sp)) continue;
        if (t->n_special == MAX_SPECIAL) return da_errorf("%s: more than %d special tokens", path, MAX_SPECIAL);
        int i = (int)id->valuedouble; /* checked above */
        if (t->tok[i]) /* which of the two Hugging Face keeps depends on its version */
            return da_errorf("%s: added_tokens[%d] \"%.40s\" has id %d, which an earlier added token (\"%.40s\") "
                             "holds: keep one",
                             path, n_added, c->valuestring, i, (const char *)t->tok[i]);
        t->tok_len[i] = (uint32_t)strlen(c->valuestring);
        t->tok[i] = (uint8_t *)strdup(c->valuestring);
        if (!t->tok[i] || !t->tok_len[i]) return da_errorf("%s: empty or unallocatable special token", path);
        t->special_id[t->n_special++] = i;
    }
    for (cJSON *e = vocab->child; e; e = e->next) {
        int id = (int)e->valuedouble;
        if (t->tok[id]) {
            int special = 0;
            for (int s = 0; s < t->n_special; s++) special |= t->special_id[s] == id;
            if (special) continue;
            return da_errorf("%s: id %d appears twice in the vocabulary", path, id);
        }
        /* GPT-2's encoder.json lists its one special token among the others */
        if (!added && !strcmp(e->string, "<|endoftext|>")) {
            if (t->n_special == MAX_SPECIAL) return da_errorf("%s: more than %d special tokens", path, MAX_SPECIAL);
            t->tok[id] = (uint8_t *)strdup(e->string);
            if (!t->tok[id]) return da_errorf("%s: out of memory", path);
            t->tok_len[id] = (uint32_t)strlen(e->string);
            t->special_id[t->n_special++] = id;
            continue;
        }
        if (da_gpt2_token_bytes(e->string, cp_to_byte, &t->tok[id], &t->tok_len[id]) || t->tok_len[id] == 0)
            return da_errorf("%s: token \"%.40s\" (id %d) has characters outside GPT-2's byte alphabet "
                             "(only byte-level BPE is supported)",
                             path, e->string, id);
        if (da_tok_bytes_id(t, t->tok[id], t->tok_len[id]) >= 0)
            return da_errorf("%s: token \"%.40s\" appears twice", path, e->string);
        da_bytes_map_put(&t->vocab, t->tok, t->tok_len, id);
    }
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = da_tok_bytes_id(t, &c, 1);
        if (t->byte_id[b] < 0)
            return da_errorf("%s: the vocabulary lacks the single byte 0x%02x (not a byte-level BPE?)", path, b);
    }
    return da_ok();
}
