/* The safetensors files of a model folder, memory-mapped: model.safetensors,
 * or every shard model.safetensors.index.json names (each tensor in the shard
 * the index says). A container reader: tensors by name, their F32, F16 or
 * BF16 values as floats; it knows nothing of models (family.h maps names). */
#ifndef DA_IO_ST_SHARDS_H
#define DA_IO_ST_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/core.h"

#define DA_MAX_SHARDS 256

enum { DA_SHARD_F32, DA_SHARD_F16, DA_SHARD_BF16 };

typedef struct {
    char name[160];
    int dtype;
    int ndim;
    int64_t shape[2];
    const unsigned char *data; /* inside the shard's mapping */
    size_t nbytes;
    int shard, used;
    int listed; /* named by the index's weight_map */
} da_shard_tensor;

typedef struct {
    char path[4200];
    unsigned char *map;
    size_t size;
} da_shard;

typedef struct {
    da_shard shard[DA_MAX_SHARDS];
    int n_shards;
    da_shard_tensor *t;
    int n, cap;
    int *slot;       /* open addressing over t by name: index + 1, 0 when empty */
    size_t n_slots;  /* a power of two, at least twice n */
    char root[4200]; /* the folder, symlinks resolved: every shard must lie inside */
    char blobs[4200]; /* a Hugging Face cache snapshot's ../../blobs, resolved; else empty */
} da_shards;

/* Opens the shards of folder dir; every header is checked (offsets inside
 * the file, disjoint ranges, no name twice, each shard inside the folder). */
da_status da_shards_open(da_shards *F, const char *dir);
void da_shards_close(da_shards *F);
/* The tensor named name, or NULL (O(1)). */
da_shard_tensor *da_shards_find(da_shards *F, const char *name);
/* dst[0..n) = scale * elements [first, first + n) of t, as floats. */
void da_shard_convert(float *dst, const da_shard_tensor *t, size_t first, size_t n, float scale);
/* t's pages leave the resident set (the file still holds them). */
void da_shard_release(const da_shard_tensor *t);
/* A small text file (a JSON header, config.json) read whole, NUL-terminated
 * (malloc'd); errors name the file. */
da_status da_text_file_read(const char *path, char **out);

#endif
