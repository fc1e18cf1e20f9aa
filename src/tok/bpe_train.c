/* Byte-level BPE training (see bpe_train.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <errno.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "io/file_list.h"
#include "io/atomic_file.h"
#include "tok/bpe_train.h"
#include "tok/hash.h"
#include "tok/tokenizer.h"
#include "diffattn/formats.h"

/* ------------------------------------------------------------ word counts */

typedef struct {
    int *sym; /* current symbols */
    int len;
    long count;
} word;

typedef struct {
    uint8_t **key;
    uint32_t *len;
    long *count;
    size_t cap, n; /* cap: power of two */
} word_map;

static int word_map_grow(word_map *m) {
    size_t cap = m->cap ? 2 * m->cap : 1 << 16;
    uint8_t **key = calloc(cap, sizeof *key);
    uint32_t *len = calloc(cap, sizeof *len);
    long *count = calloc(cap, sizeof *count);
    if (!key || !len || !count) {
        free(key), free(len), free(count);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->key[i]) continue;
        size_t j = da_fnv1a(m->key[i], m->len[i]) & (cap - 1);
        while (key[j]) j = (j + 1) & (cap - 1);
        key[j] = m->key[i], len[j] = m->len[i], count[j] = m->count[i];
    }
    free(m->key), free(m->len), free(m->count);
    m->key = key, m->len = len, m->count = count, m->cap = cap;
    return 0;
}

static int word_map_add(word_map *m, const uint8_t *b, size_t n) {
    if (2 * (m->n + 1) > m->cap && word_map_grow(m)) return -1;
    size_t j = da_fnv1a(b, n) & (m->cap - 1);
    while (m->key[j]) {
        if (m->len[j] == n && !memcmp(m->key[j], b, n)) {
            m->count[j]++;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    if (!(m->key[j] = malloc(n))) return -1;
    memcpy(m->key[j], b, n);
    m->len[j] = (uint32_t)n;
    m->count[j] = 1;
    m->n++;
    return 0;
}

/* ------------------------------------------------------------ pairs */

typedef struct {
    uint64_t *key; /* (a << 32 | b) + 1; 0 = empty */
    long *count;
    int **where; /* words that may hold the pair (may repeat, may be stale) */
    int *n_where, *cap_where;
    size_t cap, n;
} pair_table;

static inline uint64_t pkey(int a, int b) { return ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1; }

static long pair_slot(pair_table *p, uint64_t k, int create) {
    if (create && 2 * (p->n + 1) > p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 1 << 16;
        pair_table q = {calloc(cap, 8), calloc(cap, sizeof(long)), calloc(cap, sizeof(int *)), calloc(cap, sizeof(int)),
                        calloc(cap, sizeof(int)), cap, p->n};
        if (!q.key || !q.count || !q.where || !q.n_where || !q.cap_where) return -1;
        for (size_t i = 0; i < p->cap; i++) {
            if (!p->key[i]) continue;
            size_t j = da_mix64(p->key[i]) & (cap - 1);
            while (q.key[j]) j = (j + 1) & (cap - 1);
            q.key[j] = p->key[i], q.count[j] = p->count[i], q.where[j] = p->where[i];
            q.n_where[j] = p->n_where[i], q.cap_where[j] = p->cap_where[i];
        }
        free(p->key), free(p->count), free(p->where), free(p->n_where), free(p->cap_where);
        *p = q;
    }
    if (!p->cap) return -1;
    size_t j = da_mix64(k) & (p->cap - 1);
    while (p->key[j]) {
        if (p->key[j] == k) return (long)j;
        j = (j + 1) & (p->cap - 1);
    }
    if (!create) return -1;
    p->key[j] = k;
    p->n++;
    return (long)j;
}

/* count += delta for pair (a, b); with delta > 0 the word is noted. */
static int pair_add(pair_table *p, int a, int b, long delta, int w) {
    long j = pair_slot(p, pkey(a, b), delta > 0);
    if (j < 0) return delta > 0 ? -1 : 0;
    p->count[j] += delta;
    if (delta > 0) {
        if (p->n_where[j] == p->cap_where[j]) {
            int nc = p->cap_where[j] ? 2 * p->cap_where[j] : 4;
            int *nw = realloc(p->where[j], (size_t)nc * sizeof(int));
            if (!nw) return -1;
            p->where[j] = nw, p->cap_where[j] = nc;
        }
        if (!p->n_where[j] || p->where[j][p->n_where[j] - 1] != w) p->where[j][p->n_where[j]++] = w;
    }
    return 0;
}

/* ------------------------------------------------------------ max-heap of (count, pair), lazy */

typedef struct {
    long count;
    uint64_t key;
} heap_item;

typedef struct {
    heap_item *a;
    size_t n, cap;
} heap;

static int better(heap_item x, heap_item y) { return x.count > y.count || (x.count == y.count && x.key < y.key); }

static int heap_push(heap *h, long count, uint64_t key) {
    if (h->n == h->cap) {
        size_t nc = h->cap ? 2 * h->cap : 1 << 16;
        heap_item *na = realloc(h->a, nc * sizeof *na);
        if (!na) return -1;
        h->a = na, h->cap = nc;
    }
    size_t i = h->n++;
    h->a[i] = (heap_item){count, key};
    while (i && better(h->a[i], h->a[(i - 1) / 2])) {
        heap_item t = h->a[i];
        h->a[i] = h->a[(i - 1) / 2];
        h->a[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    return 0;
}

static heap_item heap_pop(heap *h) {
    heap_item top = h->a[0];
    h->a[0] = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, b = i;
        if (l < h->n && better(h->a[l], h->a[b])) b = l;
        if (r < h->n && better(h->a[r], h->a[b])) b = r;
        if (b == i) break;
        heap_item t = h->a[i];
        h->a[i] = h->a[b];
        h->a[b] = t;
        i = b;
    }
    return top;
}

/* ------------------------------------------------------------ output */

/* GPT-2's byte alphabet: UTF-8 of byte b's code point. */
static void byte_char(int b, char out[3]) {
    static int cp_of[256], init;
    if (!init) {
        int cp_to_byte[512];
        da_gpt2_byte_alphabet(cp_of, cp_to_byte);
        init = 1;
    }
    int cp = cp_of[b];
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

static char *token_string(const uint8_t *b, size_t n) {
    char *s = malloc(2 * n + 1), c[3];
    if (!s) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        byte_char(b[i], c);
        for (int j = 0; c[j]; j++) s[k++] = c[j];
    }
    s[k] = 0;
    return s;
}

/* The vocabulary being learned: the words as symbol sequences, their pairs,
 * and the tokens so far (256 bytes, then one per merge). */
typedef struct {
    word *w;
    long nw;
    pair_table pt;
    heap hp;
    uint8_t **tok;     /* (max_tokens) each token's bytes */
    uint32_t *tok_len;
    int (*merge)[2];   /* the pair each merged token joins */
    int n_tok, max_tokens;
} bpe_state;

/* The byte tokens, and every counted pre-token as a word of byte symbols
 * with its pairs counted and queued by count. Takes wm's keys. */
static da_status build_words(bpe_state *bs, word_map *wm, int max_tokens) {
    bs->max_tokens = max_tokens;
    bs->n_tok = 256;
    bs->tok = calloc((size_t)max_tokens, sizeof(uint8_t *));
    bs->tok_len = calloc((size_t)max_tokens, sizeof(uint32_t));
    bs->merge = calloc((size_t)max_tokens, sizeof *bs->merge);
    bs->w = calloc(wm->n ? wm->n : 1, sizeof(word));
    if (!bs->tok || !bs->tok_len || !bs->merge || !bs->w) return da_errorf("out of memory");
    for (int b = 0; b < 256; b++) {
        if (!(bs->tok[b] = malloc(1))) return da_errorf("out of memory");
        bs->tok[b][0] = (uint8_t)b, bs->tok_len[b] = 1;
    }
    for (size_t i = 0; i < wm->cap; i++) {
        if (!wm->key[i]) continue;
        word *x = &bs->w[bs->nw];
        x->len = (int)wm->len[i];
        x->count = wm->count[i];
        x->sym = malloc((size_t)x->len * sizeof(int));
        if (!x->sym) return da_errorf("out of memory");
        for (int k = 0; k < x->len; k++) x->sym[k] = wm->key[i][k];
        for (int k = 0; k + 1 < x->len; k++)
            if (pair_add(&bs->pt, x->sym[k], x->sym[k + 1], x->count, (int)bs->nw)) return da_errorf("out of memory");
        free(wm->key[i]);
        wm->key[i] = NULL;
        bs->nw++;
    }
    for (size_t j = 0; j < bs->pt.cap; j++)
        if (bs->pt.key[j] && heap_push(&bs->hp, bs->pt.count[j], bs->pt.key[j])) return da_errorf("out of memory");
    return da_ok();
}

static void bpe_state_free(bpe_state *bs) {
    for (long i = 0; bs->w && i < bs->nw; i++) free(bs->w[i].sym);
    free(bs->w);
    for (size_t j = 0; j < bs->pt.cap; j++) free(bs->pt.where ? bs->pt.where[j] : NULL);
    free(bs->pt.key), free(bs->pt.count), free(bs->pt.where), free(bs->pt.n_where), free(bs->pt.cap_where);
    free(bs->hp.a);
    for (int i = 0; bs->tok && i < bs->n_tok; i++) free(bs->tok[i]);
    free(bs->tok), free(bs->tok_len), free(bs->merge);
}

/* One merge: the most frequent pair becomes a token, and every word holding
 * it, and the counts of the pairs around it, are updated. *stop: the best
 * pair is rarer than min_frequency. */
static da_status merge_best(bpe_state *bs, const da_bpe_train_config *c, int *stop) {
    da_status st = da_ok();
    heap_item top = heap_pop(&bs->hp);
    long j = pair_slot(&bs->pt, top.key, 0);
    if (j < 0 || bs->pt.count[j] != top.count) return da_ok(); /* stale */
    if (top.count < c->min_frequency) {
        *stop = 1;
        return da_ok();
    }
    const int a = (int)((top.key - 1) >> 32), b = (int)((top.key - 1) & 0xffffffffu), id = bs->n_tok++;
    bs->tok_len[id] = bs->tok_len[a] + bs->tok_len[b];
    bs->tok[id] = malloc(bs->tok_len[id]);
    if (!bs->tok[id]) return da_errorf("out of memory");
    memcpy(bs->tok[id], bs->tok[a], bs->tok_len[a]);
    memcpy(bs->tok[id] + bs->tok_len[a], bs->tok[b], bs->tok_len[b]);
    bs->merge[id][0] = a, bs->merge[id][1] = b;
    /* The table may grow (and move) while we walk the pair's words: copy them. */
    int nwh = bs->pt.n_where[j], *wh = malloc((size_t)nwh * sizeof(int));
    if (!wh) return da_errorf("out of memory");
    memcpy(wh, bs->pt.where[j], (size_t)nwh * sizeof(int));
    /* every pair whose count changes, to re-push with its new count */
    size_t n_touched = 0, cap_touched = 64;
    uint64_t *touched = malloc(cap_touched * sizeof(uint64_t));
    if (!touched) {
        free(wh);
        return da_errorf("out of memory");
    }
#define TOUCH(x, y)                                                              \
    do {                                                                         \
        if (n_touched == cap_touched) {                                          \
            uint64_t *nt = realloc(touched, 2 * cap_touched * sizeof(uint64_t)); \
            if (!nt) { st = da_errorf("out of memory"); break; }                 \
            touched = nt, cap_touched *= 2;                                      \
        }                                                                        \
        touched[n_touched++] = pkey((x), (y));                                   \
    } while (0)
    for (int q = 0; q < nwh && !st.code; q++) {
        word *x = &bs->w[wh[q]];
        for (int k = 0; k + 1 < x->len; k++) {
            if (x->sym[k] != a || x->sym[k + 1] != b) continue;
            /* neighbours lose their pairs with a / b and gain pairs with id */
            if (k > 0) {
                pair_add(&bs->pt, x->sym[k - 1], a, -x->count, 0);
                if (pair_add(&bs->pt, x->sym[k - 1], id, x->count, wh[q])) st = da_errorf("out of memory");
                TOUCH(x->sym[k - 1], a);
                TOUCH(x->sym[k - 1], id);
            }
            if (k + 2 < x->len) {
                pair_add(&bs->pt, b, x->sym[k + 2], -x->count, 0);
                if (pair_add(&bs->pt, id, x->sym[k + 2], x->count, wh[q])) st = da_errorf("out of memory");
                TOUCH(b, x->sym[k + 2]);
                TOUCH(id, x->sym[k + 2]);
            }
            pair_add(&bs->pt, a, b, -x->count, 0);
            x->sym[k] = id;
            memmove(x->sym + k + 1, x->sym + k + 2, (size_t)(x->len - k - 2) * sizeof(int));
            x->len--;
        }
    }
#undef TOUCH
    free(wh);
    for (size_t q = 0; q < n_touched && !st.code; q++) {
        long s2 = pair_slot(&bs->pt, touched[q], 0);
        if (s2 >= 0 && bs->pt.count[s2] > 0 && heap_push(&bs->hp, bs->pt.count[s2], bs->pt.key[s2]))
            st = da_errorf("out of memory");
    }
    free(touched);
    if (!c->quiet && (id % 500 == 0 || bs->n_tok == bs->max_tokens)) {
        fprintf(stderr, "\rtokenizer train: %d / %d tokens, last merge seen %ld times   ", bs->n_tok, c->vocab_size,
                top.count);
        fflush(stderr);
    }
    return st;
}

/* The Hugging Face tokenizer.json of the learned vocabulary and merges. */
static da_status write_tokenizer_json(const bpe_state *bs, const char *out_path) {
    da_status st = da_ok();
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(), *vocab = cJSON_CreateObject();
    cJSON *merges = cJSON_CreateArray(), *added = cJSON_CreateArray(), *eot = cJSON_CreateObject();
    cJSON *pre = cJSON_CreateObject(), *dec = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNumberToObject(eot, "id", bs->n_tok);
    cJSON_AddStringToObject(eot, "content", "<|endoftext|>");
    cJSON_AddFalseToObject(eot, "single_word");
    cJSON_AddFalseToObject(eot, "lstrip");
    cJSON_AddFalseToObject(eot, "rstrip");
    cJSON_AddFalseToObject(eot, "normalized");
    cJSON_AddTrueToObject(eot, "special");
    cJSON_AddItemToArray(added, eot);
    cJSON_AddItemToObject(root, "added_tokens", added);
    cJSON_AddNullToObject(root, "normalizer");
    cJSON_AddStringToObject(pre, "type", "ByteLevel");
    cJSON_AddFalseToObject(pre, "add_prefix_space");
    cJSON_AddTrueToObject(pre, "trim_offsets");
    cJSON_AddTrueToObject(pre, "use_regex");
    cJSON_AddItemToObject(root, "pre_tokenizer", pre);
    cJSON_AddNullToObject(root, "post_processor");
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    cJSON_AddFalseToObject(dec, "add_prefix_space");
    cJSON_AddTrueToObject(dec, "trim_offsets");
    cJSON_AddTrueToObject(dec, "use_regex");
    cJSON_AddItemToObject(root, "decoder", dec);
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddFalseToObject(model, "fuse_unk");
    cJSON_AddFalseToObject(model, "byte_fallback");
    for (int i = 0; i < bs->n_tok && !st.code; i++) {
        char *s = token_string(bs->tok[i], bs->tok_len[i]);
        if (!s) { st = da_errorf("out of memory"); break; }
        cJSON_AddNumberToObject(vocab, s, i);
        free(s);
    }
    cJSON_AddItemToObject(vocab, "<|endoftext|>", cJSON_CreateNumber(bs->n_tok));
    for (int i = 256; i < bs->n_tok && !st.code; i++) {
        char *l = token_string(bs->tok[bs->merge[i][0]], bs->tok_len[bs->merge[i][0]]);
        char *r = token_string(bs->tok[bs->merge[i][1]], bs->tok_len[bs->merge[i][1]]);
        size_t len = strlen(l) + strlen(r) + 2;
        char *m = malloc(len);
        snprintf(m, len, "%s %s", l, r);
        cJSON_AddItemToArray(merges, cJSON_CreateString(m));
        free(l), free(r), free(m);
    }
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddItemToObject(model, "merges", merges);
    cJSON_AddItemToObject(root, "model", model);
    char *json = st.code ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!st.code && !json) st = da_errorf("out of memory writing %s", out_path);
    if (!st.code) {
        da_atomic_file af;
        st = da_atomic_open(&af, out_path);
        if (!st.code) {
            fputs(json, af.fp);
            fputc('\n', af.fp);
            st = da_atomic_commit(&af);
        }
    }
    free(json);
    return st;
}

da_status da_bpe_train(const char *const *inputs, int n_inputs, const char *out_path, const da_bpe_train_config *c,
                       da_bpe_train_stats *stats) {
    memset(stats, 0, sizeof *stats);
    if (c->vocab_size < 257 || c->vocab_size > (1 << 24))
        return da_errorf("vocab_size: %d must lie in [257, %d] (256 bytes + <|endoftext|> at least)", c->vocab_size,
                         1 << 24);
    const double t0 = da_now_s();
    int err;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)DA_GPT2_PATTERN, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &eoff, NULL);
    if (!re) return da_errorf("PCRE2 cannot compile the GPT-2 pattern (error %d)", err);
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    file_list fl = {0};
    word_map wm = {0};
    da_status st = da_ok();
    for (int i = 0; i < n_inputs && !st.code; i++) st = da_file_list_add(&fl, inputs[i]);

    /* 1. count pre-tokens, streaming each file in chunks cut at line ends:
     * memory holds one chunk and the distinct pre-tokens, not the text */
    enum { CHUNK = 4 << 20 };
    size_t text_cap = CHUNK;
    uint8_t *text = malloc(text_cap);
    if (!text) st = da_errorf("out of memory");
    for (int f = 0; f < fl.n && !st.code; f++) {
        FILE *fp = da_fopen_regular(fl.path[f], &st);
        if (!fp) break;
        size_t have = 0;
        for (;;) {
            if (text_cap - have < CHUNK / 2) { /* no safe cut in the text held: read more of it */
                uint8_t *nt = realloc(text, 2 * text_cap);
                if (!nt) { st = da_errorf("out of memory"); break; }
                text = nt;
                text_cap *= 2;
            }
            size_t got = fread(text + have, 1, text_cap - have, fp);
            if (ferror(fp)) { st = da_errorf("%s: read error", fl.path[f]); break; }
            size_t n = have + got, cut = n;
            int last = got < text_cap - have;
            if (!last) cut = da_safe_cut(text, n); /* 0: none yet */
            stats->bytes += (double)cut;
            size_t pos = 0;
            while (pos < cut && !st.code) {
                int rc = pcre2_match(re, text, cut, pos, 0, md, NULL);
                if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = pcre2_match(re, text, cut, pos, PCRE2_NO_JIT, md, NULL);
                size_t s = cut, e = cut;
                if (rc >= 0) s = pcre2_get_ovector_pointer(md)[0], e = pcre2_get_ovector_pointer(md)[1];
                for (size_t i = pos; i < s; i++)
                    if (word_map_add(&wm, text + i, 1)) st = da_errorf("out of memory counting words");
                if (s < e && word_map_add(&wm, text + s, e - s)) st = da_errorf("out of memory counting words");
                pos = e > s ? e : s + 1;
            }
            memmove(text, text + cut, n - cut);
            have = n - cut;
            if (last || st.code) break;
        }
        fclose(fp);
    }
    free(text);
    if (!st.code && stats->bytes == 0) st = da_errorf("no text to train on: the inputs are empty");

    /* 2. words as byte symbols, and their pairs */
    bpe_state bs = {0};
    const int max_tokens = c->vocab_size - 1; /* the last id is <|endoftext|> */
    if (!st.code) st = build_words(&bs, &wm, max_tokens);
    stats->unique_words = bs.nw;

    /* 3. merges */
    while (!st.code && bs.n_tok < max_tokens && bs.hp.n) {
        int stop = 0;
        st = merge_best(&bs, c, &stop);
        if (stop) break;
    }
    if (!c->quiet && !st.code) fprintf(stderr, "\n");
    stats->merges = bs.n_tok - 256;

    /* 4. tokenizer.json */
    if (!st.code) st = write_tokenizer_json(&bs, out_path);
    stats->seconds = da_now_s() - t0;

    bpe_state_free(&bs);
    for (size_t i = 0; i < wm.cap; i++) free(wm.key[i]);
    free(wm.key), free(wm.len), free(wm.count);
    da_file_list_free(&fl);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return st;
}
