/* The tokenizer's two open-addressing hash tables: token bytes -> id (the
 * vocabulary) and a pair of ids -> the rank and id of their merge. */
#ifndef DA_TOK_TOKEN_MAPS_H
#define DA_TOK_TOKEN_MAPS_H

#include <stddef.h>
#include <stdint.h>

#include "tok/hash.h"

/* bytes -> id, open addressing; keys point into the tokenizer's token bytes. */
typedef struct {
    int32_t *slot; /* id or -1 */
    size_t mask;
} bytes_map;

/* (left, right) -> (rank, merged) */
typedef struct {
    uint64_t *key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t *rank, *merged;
    size_t mask;
} pair_map;

/* Empty maps with room for n keys; 0, or -1 when out of memory. */
int da_bytes_map_init(bytes_map *m, size_t n);
/* The id whose bytes, tok[id][0..tok_len[id]), are b[0..n), or -1. */
int da_bytes_map_get(const bytes_map *m, uint8_t *const *tok, const uint32_t *tok_len, const uint8_t *b, size_t n);
/* Adds id, keyed by tok[id][0..tok_len[id]) (not there yet). */
void da_bytes_map_put(bytes_map *m, uint8_t *const *tok, const uint32_t *tok_len, int id);
int da_pair_map_init(pair_map *m, size_t n);
/* Returns 0 when added, 1 when the pair was already there (first rank wins). */
int da_pair_map_put(pair_map *m, int a, int b, int rank, int merged);

static inline uint64_t da_pair_key(int a, int b) { return ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1; }

/* The rank of the merge of (a, b), its id in *merged; -1 when a and b do not
 * merge. Inline: BPE asks it for every pair of every piece. */
static inline int da_pair_map_get(const pair_map *m, int a, int b, int *merged) {
    uint64_t k = da_pair_key(a, b);
    for (size_t i = da_mix64(k) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->key[i]) return -1;
        if (m->key[i] == k) {
            *merged = m->merged[i];
            return m->rank[i];
        }
    }
}

#endif
