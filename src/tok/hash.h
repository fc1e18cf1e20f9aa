/* Hashes for the tokenizer's open-addressing tables. */
#ifndef DA_TOK_HASH_H
#define DA_TOK_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a over bytes. */
static inline uint64_t da_fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* A 64-bit finaliser (MurmurHash3's fmix, first half) for integer keys. */
static inline uint64_t da_mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

#endif
