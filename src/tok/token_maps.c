/* The tokenizer's hash tables (token_maps.h). */
#include <stdlib.h>
#include <string.h>

#include "tok/token_maps.h"

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

int da_bytes_map_init(bytes_map *m, size_t n) {
    size_t cap = pow2_at_least(2 * n);
    m->slot = malloc(cap * sizeof(int32_t));
    if (!m->slot) return -1;
    memset(m->slot, 0xff, cap * sizeof(int32_t));
    m->mask = cap - 1;
    return 0;
}

int da_bytes_map_get(const bytes_map *m, uint8_t *const *tok, const uint32_t *tok_len, const uint8_t *b, size_t n) {
    for (size_t i = da_fnv1a(b, n) & m->mask;; i = (i + 1) & m->mask) {
        int32_t id = m->slot[i];
        if (id < 0) return -1;
        if (tok_len[id] == n && !memcmp(tok[id], b, n)) return id;
    }
}

void da_bytes_map_put(bytes_map *m, uint8_t *const *tok, const uint32_t *tok_len, int id) {
    size_t i = da_fnv1a(tok[id], tok_len[id]) & m->mask;
    while (m->slot[i] >= 0) i = (i + 1) & m->mask;
    m->slot[i] = id;
}

int da_pair_map_init(pair_map *m, size_t n) {
    size_t cap = pow2_at_least(2 * n + 2);
    m->key = calloc(cap, sizeof(uint64_t));
    m->rank = malloc(cap * sizeof(int32_t));
    m->merged = malloc(cap * sizeof(int32_t));
    m->mask = cap - 1;
    return m->key && m->rank && m->merged ? 0 : -1;
}

int da_pair_map_put(pair_map *m, int a, int b, int rank, int merged) {
    uint64_t k = da_pair_key(a, b);
    size_t i = da_mix64(k) & m->mask;
    while (m->key[i]) {
        if (m->key[i] == k) return 1;
        i = (i + 1) & m->mask;
    }
    m->key[i] = k;
    m->rank[i] = rank;
    m->merged[i] = merged;
    return 0;
}
