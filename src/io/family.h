/* The family table: how each model family outside diffattn's own files names
 * a model's tensors and hyper-parameters, one row per family (family.c), in
 * the manner of llama.cpp's llama-arch.cpp. The readers and writers of model
 * files (hf_config.c, hf_model.c, hf_export.c, gguf_config.c, infer/engine_gguf.c)
 * look names and keys up here, in both directions, and branch on a row's
 * columns, never on an attention variant; the containers they read
 * (safetensors.c, st_shards.c, gguf.c) know nothing of models.
 *
 * Adding a family is a row of FAMILIES with its name and key lists; code is
 * needed only for what no column describes yet (a new permutation of rows,
 * a new RoPE rule): a new column, read where the family's container is read. */
#ifndef DA_IO_FAMILY_H
#define DA_IO_FAMILY_H

#include <stddef.h>

#include "diffattn/model.h"

typedef enum {
    DA_FAMILY_NATIVE, /* diffattn's safetensors: da_model's names, da_config_fields as __metadata__ (checkpoint.c) */
    DA_FAMILY_HF,     /* a Hugging Face folder: config.json and safetensors */
    DA_FAMILY_GGUF,   /* a GGUF file */
} da_family_container;

/* One tensor: diffattn's name and the family's. In a layer list both are the
 * part after the layer's prefix ("layers.N." natively). */
typedef struct {
    const char *native, *file;
} da_family_name;

/* One hyper-parameter: the quantity (a da_config_fields key such as "dim",
 * or "n_heads", counted in the family's own heads) and the family's key. */
typedef struct {
    const char *quantity, *key;
} da_family_key;

typedef struct da_family {
    const char *name;               /* "hf-diffllama": in messages and docs/formats.md */
    da_family_container container;
    /* HF: config.json's model_type. GGUF: general.architecture, where "%s"
     * stands for the variant's name (da_arch_name). */
    const char *tag;
    const char *hf_class;           /* HF: config.json's architectures[0] */
    const char *variant;            /* the attention variant it maps onto; NULL: any (the tag or a key names it) */
    const char *layer_prefix;       /* a layer's tensors: printf format of one int ("model.layers.%d.") */
    int names_native;               /* tensors keep diffattn's own names (the lists below are unused) */
    const da_family_name *globals;  /* {NULL, NULL}-terminated */
    const da_family_name *layer;    /* the tensors of every variant's layer; {NULL, NULL}-terminated */
    const da_family_name *layer_own; /* the variant's own tensors (DiffLlama's lambdas); NULL: none */
    /* An attention tensor of no row keeps its native name after the family's
     * layer prefix ("blk.N.attn.<name>") when set; else it has no name here. */
    int other_attn_kept;
    int keys_under_arch;            /* GGUF: a key is "<general.architecture>." and the listed one */
    const da_family_key *keys;      /* {NULL, NULL}-terminated */
    const da_family_key *keys_own;  /* the family's own keys (a variant field such as GDA's noise heads), after keys; NULL: none */
    int heads_per_native;           /* the family's query heads per native head (DiffLlama 2: heads j, j + H/2) */
    int folds_head_norm;            /* the head norm's weight and eps travel as o_proj and v_proj scales */
    float default_norm_eps;         /* HF: rms_norm_eps when config.json has none */
    int writes_mlp_bias;            /* HF: config.json says "mlp_bias": false */
    /* GGUF: written only for a model the family's own runtime runs as it is
     * (llama.cpp's llama: no sliding window, no head norm, SwiGLU). */
    int plain_only;
    int read_only;                  /* a layout of older files: read, never written */
    /* HF: config.json's keys that no column above maps (head counts of another
     * layout, the family's own options), read and written by the family's own
     * file (hf_model.h); NULL: none */
    const struct da_hf_config_rule *hf_rule;
    /* The MLP gate the family maps and implies (da_config.mlp's spelling, "polynorm"); NULL: any, named in
     * the file where it is not SwiGLU (GGUF: diffattn.mlp) */
    const char *mlp;
} da_family;

/* Every row, in the order export picks the first that fits; n: their count. */
const da_family *da_family_all(int *n);

/* The Hugging Face family of config.json's model_type, or NULL. */
const da_family *da_family_hf(const char *model_type);
/* The Hugging Face family c exports as, or NULL when it has none. */
const da_family *da_family_hf_of(const da_config *c);
/* The GGUF family of general.architecture arch, with the variant it names
 * (*variant; untouched for a family whose files name it in a key), or NULL. */
const da_family *da_family_gguf(const char *arch, da_arch *variant);
/* The GGUF family c is written as (never a read_only one), and its
 * general.architecture (arch). */
const da_family *da_family_gguf_of(const da_config *c, char *arch, size_t n);
/* The attention variant of a family with one (its variant column); 0 on
 * success, -1 for a family of any variant. */
int da_family_variant(const da_family *f, da_arch *out);

/* The MLP gate the family implies, into c->mlp; 0 on success, -1 for a family of any gate. */
int da_family_mlp(const da_family *f, da_config *c);

/* The family's key of a quantity ("dim" -> "hidden_size"); NULL when it has
 * none. Under the architecture (keys_under_arch), written into buf as
 * "<arch>.<key>" (arch: the file's general.architecture). */
const char *da_family_key_of(const da_family *f, const char *quantity, const char *arch, char *buf, size_t n);

/* A native tensor name as the family's ("layers.3.attn.q_proj.weight" ->
 * "model.layers.3.self_attn.q_proj.weight"), and back. 0 on success, -1 for
 * a name the family has no row for. */
int da_family_to_file(const da_family *f, const char *native, char *out, size_t n);
int da_family_from_file(const da_family *f, const char *file, char *out, size_t n);
/* The family's name of layer l's tensor whose native suffix is native
 * ("attn.q_proj.weight"); the native name itself when the family has none. */
const char *da_family_layer_name(const da_family *f, int l, const char *native, char *out, size_t n);

#endif
