/* GGUF v3 (ggml's model container): a reader that trusts nothing in the file
 * and a writer.
 *
 * Layout, all little-endian:
 *   "GGUF", u32 version (3), u64 tensor count, u64 key-value count
 *   key-values: string key, u32 value type, value
 *     (string = u64 length + bytes; array = u32 element type, u64 count, elements)
 *   tensor infos: string name, u32 n_dims, u64 ne[n_dims] (ne[0] the contiguous
 *     axis: a [rows, cols] matrix is ne = {cols, rows}), u32 ggml type, u64 offset
 *     (from the data section, a multiple of the alignment)
 *   padding to general.alignment (default 32), then the data section. */
#ifndef DA_IO_GGUF_H
#define DA_IO_GGUF_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "diffattn/model.h"

enum {
    DA_GGUF_U8 = 0,
    DA_GGUF_I8 = 1,
    DA_GGUF_U16 = 2,
    DA_GGUF_I16 = 3,
    DA_GGUF_U32 = 4,
    DA_GGUF_I32 = 5,
    DA_GGUF_F32 = 6,
    DA_GGUF_BOOL = 7,
    DA_GGUF_STRING = 8,
    DA_GGUF_ARRAY = 9,
    DA_GGUF_U64 = 10,
    DA_GGUF_I64 = 11,
    DA_GGUF_F64 = 12,
};

#define DA_GGUF_MAX_DIMS 4
#define DA_GGUF_MAX_TENSORS 100000
#define DA_GGUF_MAX_KV 100000
#define DA_GGUF_DEFAULT_ALIGNMENT 32

typedef struct {
    char key[256];
    uint32_t type;      /* DA_GGUF_* */
    uint32_t arr_type;  /* arrays: the element type */
    uint64_t arr_n;     /* arrays: the element count */
    const unsigned char *arr_data; /* arrays: the first element, inside the file's bytes */
    union {
        uint64_t u;
        int64_t i;
        double f;
    } v;                /* scalars, widened */
    char *str;          /* strings: NUL-terminated copy (malloc'd) */
} da_gguf_kv;

typedef struct {
    char name[160];
    int n_dims;
    int64_t ne[DA_GGUF_MAX_DIMS]; /* unused axes are 1 */
    int type;                     /* ggml type (quant/quant.h's da_qtype) */
    uint64_t offset;              /* into the data section */
    size_t nbytes;
} da_gguf_tensor;

typedef struct {
    char path[4096];
    unsigned char *map; /* the whole file: mapped (da_gguf_open) or a malloc'd buffer (da_gguf_parse) */
    size_t size;
    int mapped;         /* 1: map is a read-only private mapping, unmapped on close */
    uint32_t version, alignment;
    size_t data_offset;
    int n_kv;
    da_gguf_kv *kv;
    int n_tensors;
    da_gguf_tensor *tensors;
} da_gguf_file;

/* Reads and validates path: every length, count, offset and size is checked
 * against the file, so a successful open guarantees every tensor's bytes lie
 * inside the data section. Tensor types must be ones this project handles
 * (f32, f16, bf16, q8_0, q4_0, q4_K). On failure f is zeroed and the message
 * starts with the path. */
da_status da_gguf_open(da_gguf_file *f, const char *path);
/* The same from memory: takes ownership of buf (malloc'd), freed on failure too.
 * name is used in messages. */
da_status da_gguf_parse(da_gguf_file *f, const char *name, unsigned char *buf, size_t size);
void da_gguf_close(da_gguf_file *f); /* safe on a zeroed or closed f */
/* 1 when the file at path starts with the GGUF magic. */
int da_gguf_is_gguf(const char *path);

const da_gguf_kv *da_gguf_kv_find(const da_gguf_file *f, const char *key);
const da_gguf_tensor *da_gguf_tensor_find(const da_gguf_file *f, const char *name);
const unsigned char *da_gguf_data(const da_gguf_file *f, const da_gguf_tensor *t);
/* Lets the kernel drop a mapped file's pages of tensor t once it has been
 * copied (a no-op for a buffer): loading then holds one copy, not two. */
void da_gguf_release(const da_gguf_file *f, const da_gguf_tensor *t);

/* Typed getters: an absent key or one of another type is an error naming
 * the file and the key. Any unsigned or signed integer type is accepted for
 * the integer getters when its value fits. */
da_status da_gguf_get_int(const da_gguf_file *f, const char *key, int64_t *out);
da_status da_gguf_get_f32(const da_gguf_file *f, const char *key, float *out);
da_status da_gguf_get_bool(const da_gguf_file *f, const char *key, int *out);
da_status da_gguf_get_str(const da_gguf_file *f, const char *key, const char **out);

/* Arrays: malloc'd copies (free a string array with da_gguf_free_str_array).
 * A string element holding a NUL byte is an error; the integer getter takes
 * i32 or u32 elements. */
da_status da_gguf_get_str_array(const da_gguf_file *f, const char *key, char ***out, uint64_t *n);
void da_gguf_free_str_array(char **v, uint64_t n);
da_status da_gguf_get_i32_array(const da_gguf_file *f, const char *key, int32_t **out, uint64_t *n);

/* ---------------------------------------------------------------- writer */

typedef struct {
    char name[160];
    int n_dims;
    int64_t ne[DA_GGUF_MAX_DIMS];
    int type;
    const void *data; /* the caller's, alive until da_gguf_write returns; NULL: the source writes it */
    size_t nbytes;
} da_gguf_wtensor;

typedef struct {
    unsigned char *kv; /* serialized key-values */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    da_gguf_wtensor *t;
    int n_t, cap_t;
    int oom; /* an allocation failed; da_gguf_write reports it */
} da_gguf_writer;

void da_gguf_writer_init(da_gguf_writer *w);
void da_gguf_writer_free(da_gguf_writer *w);
void da_gguf_add_u32(da_gguf_writer *w, const char *key, uint32_t v);
void da_gguf_add_f32(da_gguf_writer *w, const char *key, float v);
void da_gguf_add_bool(da_gguf_writer *w, const char *key, int v);
void da_gguf_add_str(da_gguf_writer *w, const char *key, const char *v);
void da_gguf_add_f32_array(da_gguf_writer *w, const char *key, const float *v, uint64_t n);
void da_gguf_add_str_array(da_gguf_writer *w, const char *key, const char *const *v, uint64_t n);
void da_gguf_add_i32_array(da_gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
/* A [rows, cols] tensor is ne = {cols, rows}, n_dims 2; a vector n_dims 1. */
void da_gguf_add_tensor(da_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                        const void *data, size_t nbytes);
/* Writes the file atomically, alignment 32 (general.alignment is added). */
da_status da_gguf_write(da_gguf_writer *w, const char *path);
/* Writes tensor index's nbytes bytes to fp (the tensors added with data NULL, in order, one at a time:
 * a conversion that holds one tensor). */
typedef da_status (*da_gguf_tensor_source)(void *ctx, int index, FILE *fp);
/* da_gguf_write, with source writing the tensors added without data; a source that fails or writes
 * another count of bytes leaves no file. */
da_status da_gguf_write_from(da_gguf_writer *w, const char *path, da_gguf_tensor_source source, void *ctx);

#endif
