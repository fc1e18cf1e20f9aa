/* Saved slots: a session's KV cache and the tokens behind it, in a file that
 * a session of the same model (and cache layout) can take back, so that a
 * long context survives a restart (diffattn serve's /slots, docs/formats.md
 * "Slot files"). */
#ifndef DA_INFER_SLOT_FILE_H
#define DA_INFER_SLOT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/generate.h"

#define DA_SLOT_MAGIC "DASLOTKV"
#define DA_SLOT_VERSION 1

/* The cache types a slot file may hold. */
enum { DA_SLOT_KV_F32 = 0, DA_SLOT_KV_F16 = 1, DA_SLOT_KV_Q8 = 2, DA_SLOT_KV_OWN = 3 };

/* The file's first 96 bytes, little-endian, then n_tokens int32 token ids, then kv_bytes of K/V. */
typedef struct {
    char magic[8];         /* DA_SLOT_MAGIC, not NUL-terminated */
    uint32_t version;      /* DA_SLOT_VERSION */
    uint32_t header_bytes; /* sizeof(da_slot_header) */
    uint64_t fingerprint;  /* da_engine_fingerprint of the model that wrote it */
    uint32_t kv_type;      /* DA_SLOT_KV_* */
    uint32_t n_layers;
    uint32_t kv_cols;      /* keys (and values) per position and layer */
    uint32_t head_dim;     /* values per head block (f32, f16 layouts) */
    uint32_t scale_block;  /* q8: values per scale; else 0 */
    uint32_t ring_rows;    /* a sliding window's ring of rows: their number; else 0 */
    uint32_t n_tokens;     /* positions the cache holds */
    uint32_t n_rows;       /* cache rows stored per layer: n_tokens, or min(n_tokens, ring_rows) */
    uint64_t own_floats;   /* DA_SLOT_KV_OWN: floats per layer; else 0 */
    uint64_t kv_bytes;     /* bytes of K/V after the tokens */
    uint64_t checksum;     /* the da_slot_hasher hash of every byte after the header */
    uint64_t reserved[2];  /* 0 */
} da_slot_header;
_Static_assert(sizeof(da_slot_header) == 96, "da_slot_header layout changed");

/* A 64-bit hash of a stream of bytes, the same however the stream is cut into pieces. Not cryptographic: it
 * tells files and models apart. Start from a zeroed da_slot_hasher. */
typedef struct {
    uint64_t h, tail; /* tail: the bytes of a word not yet whole */
    uint64_t n;       /* bytes so far */
} da_slot_hasher;
void da_slot_hash_add(da_slot_hasher *x, const void *data, size_t n);
uint64_t da_slot_hash_end(const da_slot_hasher *x);

/* The model's identity in a slot file: da_slot_hash of every stored configuration field (its key and value),
 * then of every tensor's name, type, shape and bytes. Reads every weight once: compute it once per engine. */
uint64_t da_engine_fingerprint(const da_engine *e);

/* The header s's cache of its da_session_len positions gives (checksum 0). */
da_slot_header da_slot_header_of(const da_session *s, uint64_t fingerprint);

/* Writes tokens[0..n) (the ids behind s's cache: n must be da_session_len(s)) and s's cache to path, atomically
 * (da_atomic_open: a full disk leaves the previous file or none). *n_bytes: the file's size. */
da_status da_slot_file_write(const char *path, const da_session *s, const int *tokens, int n, uint64_t fingerprint,
                             size_t *n_bytes);

/* Checks data[0..n) (a slot file's bytes; `name` for messages) against s and the model's fingerprint, and only
 * when all of it fits, puts its cache in s and its tokens in *tokens (malloc'ed, *n_tokens of them; NULL when
 * none). On an error s is untouched; the message names the file and what differs. */
da_status da_slot_file_parse(const char *name, const uint8_t *data, size_t n, da_session *s, uint64_t fingerprint,
                             int **tokens, int *n_tokens);

/* The largest slot file s could take: a bound on what to read. */
uint64_t da_slot_file_max_bytes(const da_session *s);

#endif
