/* safetensors: a reader that trusts nothing in the file, and a writer of
 * floats as F32, BF16 or F16.
 *
 * Format: 8-byte little-endian header length N, N bytes of UTF-8 JSON (an
 * object: tensor name -> {"dtype", "shape", "data_offsets": [begin, end]},
 * plus an optional "__metadata__" object of strings), then the data section.
 * Offsets are relative to the data section (byte 8 + N). */
#ifndef DA_IO_SAFETENSORS_H
#define DA_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/model.h"

#define DA_ST_MAX_DIMS 8
#define DA_ST_MAX_HEADER (100u * 1000u * 1000u) /* a larger header is refused as corrupt */

typedef enum {
    DA_ST_F32,
    DA_ST_BF16,
    DA_ST_F16,
    DA_ST_I32,
    DA_ST_I64,
    DA_ST_U8,
    DA_ST_F64,
    DA_ST_I8,
    DA_ST_I16,
    DA_ST_U16,
    DA_ST_U32,
    DA_ST_U64,
    DA_ST_BOOL,
    DA_ST_F8_E4M3,
    DA_ST_F8_E5M2,
    DA_ST_N_DTYPES
} da_st_dtype;

typedef struct {
    char name[160];
    da_st_dtype dtype;
    int ndim; /* 0 for a scalar */
    int64_t shape[DA_ST_MAX_DIMS];
    size_t numel; /* 1 for a scalar */
    size_t begin, end; /* byte offsets in the data section; end - begin = numel * dtype size */
} da_st_tensor;

typedef struct {
    char key[128];
    char *value; /* malloc'd, NUL-terminated */
} da_st_meta;

typedef struct {
    char path[4096];
    unsigned char *map; /* the whole file (malloc'd copy) */
    size_t size;
    size_t data_offset; /* 8 + header length */
    int n_tensors;
    da_st_tensor *tensors; /* in header order */
    int n_meta;
    da_st_meta *meta;
} da_st_file;

/* Reads and validates path. Every offset, shape and size is checked against
 * the file, so a successful open guarantees every tensor's bytes lie inside
 * the data section and no two tensors overlap. On failure f is zeroed and the
 * message is one line starting with the path. */
da_status da_st_open(da_st_file *f, const char *path);
void da_st_close(da_st_file *f); /* safe on a zeroed or closed f */
const da_st_tensor *da_st_find(const da_st_file *f, const char *name); /* NULL if absent */
const char *da_st_meta_get(const da_st_file *f, const char *key);      /* NULL if absent */
/* Pointer to a tensor's raw (little-endian, possibly unaligned) bytes. */
const unsigned char *da_st_data(const da_st_file *f, const da_st_tensor *t);
/* Converts F32, BF16 or F16 to float into out (t->numel floats); any other
 * dtype is an error naming the tensor. */
da_status da_st_read_f32(const da_st_file *f, const da_st_tensor *t, float *out);
const char *da_st_dtype_name(da_st_dtype d);
size_t da_st_dtype_size(da_st_dtype d);

/* ---------------------------------------------------------------- writer */

typedef struct {
    const char *name; /* at most 159 bytes, unique, not "__metadata__" */
    int ndim;         /* 0..8 */
    int64_t shape[DA_ST_MAX_DIMS];
    const float *data; /* numel floats */
} da_st_write_tensor;

/* Writes the tensors as F32, contiguous and in the order given, with an
 * optional string->string __metadata__ (omitted when n_meta is 0). Atomic:
 * on failure the previous file at path is untouched. */
da_status da_st_write(const char *path, const da_st_write_tensor *tensors, int n_tensors,
                      const char *const *meta_keys, const char *const *meta_values, int n_meta);
/* da_st_write with every tensor stored as dtype: DA_ST_F32, or DA_ST_BF16 or DA_ST_F16 rounded to nearest
 * even (the GGUF writer's conversion, da_quantize_row) a block at a time as written, with no copy. */
da_status da_st_write_as(const char *path, const da_st_write_tensor *tensors, int n_tensors, da_st_dtype dtype,
                         const char *const *meta_keys, const char *const *meta_values, int n_meta);

#endif
