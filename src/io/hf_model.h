/* Hugging Face model folders: config.json with the model_type of a family of
 * the family table (family.h: "diffllama" for DIFF, "llama" for softmax, a
 * family with its own config rule below for GDA), and model.safetensors or the shards listed in
 * model.safetensors.index.json (F32, F16 or BF16 tensors, memory-mapped).
 *
 * The weights are mapped onto diffattn's native layout by permuting rows,
 * which is exact (docs/formats.md, "Hugging Face folders"):
 *   - RoPE: Hugging Face rotates the pairs (i, i + d/2) of a head (NeoX
 *     rotate_half), diffattn the pairs (2i, 2i+1); q and k rows are permuted
 *     within each head so that both rotate the same coordinates, and the
 *     frequencies are Llama's theta^(-2i/d) (da_config.rope_freq LLAMA).
 *   - DiffLlama's diff head j pairs query heads j and j + H/2; they become
 *     q sub-heads 2j and 2j+1. Its maps use the KV heads of those two query
 *     heads, which differ in general, and its value is the concatenation of
 *     their two v heads: native KV group g stores exactly that pair (k
 *     sub-heads 2g, 2g+1 and v columns [2d*g, 2d*(g+1))), so n_kv_heads is
 *     chosen as the fewest groups for which every diff head of a group
 *     shares one pair (KV heads are duplicated where pairs differ).
 *   - DiffLlama's head norm has no weight and eps = rms_norm_eps; subln is
 *     set to ones and v_proj is scaled by sqrt(1e-5 / rms_norm_eps), since
 *     RMSNorm(s*x, eps) = RMSNorm(x, eps / s^2) and the norm's input is
 *     linear in v. */
#ifndef DA_IO_HF_MODEL_H
#define DA_IO_HF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/model.h"
#include "io/family.h"

/* 1 when path is a folder holding config.json. */
int da_hf_is_folder(const char *path);
/* Loads the folder into m (f32). Errors are one line naming the file and
 * the key or tensor. */
da_status da_hf_model_load(da_model *m, const char *dir);
/* The configuration alone (what da_hf_model_load would build). */
da_status da_hf_config_load(da_config *c, const char *dir);

/* What config.json says beyond the da_config: the family and its head layout. */
typedef struct {
    const da_family *fam; /* the family of model_type */
    int H, Hkv, d;        /* the family's query heads, KV heads, head size */
    int A;                /* o_proj's columns: H * d unless the family's rule says otherwise */
    int n_rep_native;     /* paired heads (heads_per_native 2): diff heads per native KV group */
    float head_norm_eps;  /* folds_head_norm: rms_norm_eps, the head norm's eps */
    float v_scale;        /* heads_per_native 1: v_proj's factor on the way in (a head norm eps folded), else 1 */
} da_hf_shape;
/* config.json of folder dir (hf_config.c); errors name the file and the key. */
da_status da_hf_config_parse(const char *dir, da_config *c, da_hf_shape *hs);

/* A family's config.json keys beyond the common ones (family.h: hf_rule),
 * for a family whose tensors map one to one onto diffattn's (q and k rows
 * in rotate_half order, v_proj scaled by v_scale, its own tensors in the
 * row's layer_own list). */
struct cJSON;
typedef struct da_hf_config_rule {
    /* After the common keys: hs holds H, Hkv, d as read and c the common
     * fields; sets c's variant, heads and options, hs->A and hs->v_scale,
     * and refuses a key turning on what diffattn does not implement (a
     * one-line error naming path and the key). It owns hidden_act and the
     * head counts' checks. */
    da_status (*read)(const char *path, const struct cJSON *root, da_config *c, da_hf_shape *hs);
    /* c's keys written into config.json's object o (after the common ones,
     * which it may replace: the head counts, hidden_act); 0 on success, -1
     * out of memory. */
    int (*write)(struct cJSON *o, const da_config *c);
} da_hf_config_rule;

/* A folder read one tensor at a time, for a conversion that never holds the model (quantize and export to
 * GGUF): tensors in da_model_create_table's order, each as f32 rows; a layer's tensors come from one layer
 * loaded in f32 (its permutations are those of da_hf_model_load), the others straight from the files. */
typedef struct da_hf_stream da_hf_stream;
/* Opens folder dir, checks every shape as da_hf_model_load does, and gives its configuration. */
da_status da_hf_stream_open(da_hf_stream **s, const char *dir, da_config *cfg);
/* Rows [row0, row0 + n_rows) of table tensor i (a vector: row 0 of 1) into dst, in f32. */
da_status da_hf_stream_rows(da_hf_stream *s, int i, int64_t row0, int64_t n_rows, float *dst);
/* Every tensor read: one of the files that no tensor of the model used is refused, naming it. */
da_status da_hf_stream_finish(da_hf_stream *s);
void da_hf_stream_close(da_hf_stream *s);

#endif
