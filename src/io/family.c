/* The family table (family.h): diffattn's own files, Hugging Face Llama,
 * DiffLlama and Motif, llama.cpp's GGUF llama, Motif's GGUF (grouped
 * differential attention with PolyNorm MLPs) and diffattn's GGUF layout for
 * every variant. The mappings of values that a rename cannot express (DiffLlama's
 * head pairs, the head norm's folding) are the columns documented in
 * docs/formats.md; every Hugging Face family's q and k rows are in
 * rotate_half order (hf_model.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/family.h"

/* ---------------------------------------------------------------- Hugging Face */

static const da_family_name HF_GLOBALS[] = {
    {"tok_embeddings.weight", "model.embed_tokens.weight"},
    {"norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {NULL, NULL},
};

static const da_family_name HF_LAYER[] = {
    {"attention_norm.weight", "input_layernorm.weight"},
    {"attn.q_proj.weight", "self_attn.q_proj.weight"},
    {"attn.k_proj.weight", "self_attn.k_proj.weight"},
    {"attn.v_proj.weight", "self_attn.v_proj.weight"},
    {"attn.out_proj.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight"},
    {NULL, NULL},
};

static const da_family_name DIFFLLAMA_LAYER[] = {
    {"attn.lambda_q1", "self_attn.lambda_q1"},
    {"attn.lambda_k1", "self_attn.lambda_k1"},
    {"attn.lambda_q2", "self_attn.lambda_q2"},
    {"attn.lambda_k2", "self_attn.lambda_k2"},
    {NULL, NULL},
};

/* Motif's own tensors: DIFF's lambdas and learned head norm, PolyNorm's weights */
static const da_family_name MOTIF_LAYER[] = {
    {"attn.lambda_q1", "self_attn.lambda_q1"},
    {"attn.lambda_k1", "self_attn.lambda_k1"},
    {"attn.lambda_q2", "self_attn.lambda_q2"},
    {"attn.lambda_k2", "self_attn.lambda_k2"},
    {"attn.subln.weight", "self_attn.subln.weight"},
    {"feed_forward.poly.weight", "mlp.act_fn.weight"},
    {"feed_forward.poly.bias", "mlp.act_fn.bias"},
    {NULL, NULL},
};

/* Motif's head counts, num_noise_heads and attn_rms_norm_eps (hf_motif.c) */
extern const struct da_hf_config_rule da_hf_motif_rule;

/* n_heads and n_kv_heads count the family's heads (heads_per_native each native head). */
static const da_family_key HF_KEYS[] = {
    {"dim", "hidden_size"},
    {"n_layers", "num_hidden_layers"},
    {"n_heads", "num_attention_heads"},
    {"n_kv_heads", "num_key_value_heads"},
    {"head_dim", "head_dim"},
    {"ffn_hidden", "intermediate_size"},
    {"vocab_size", "vocab_size"},
    {"max_seq_len", "max_position_embeddings"},
    {"norm_eps", "rms_norm_eps"},
    {"rope_theta", "rope_theta"},
    {"tie_embeddings", "tie_word_embeddings"},
    {NULL, NULL},
};

/* ---------------------------------------------------------------- GGUF */

static const da_family_name GGUF_GLOBALS[] = {
    {"tok_embeddings.weight", "token_embd.weight"},
    {"norm.weight", "output_norm.weight"},
    {"output.weight", "output.weight"},
    {NULL, NULL},
};

/* llama.cpp's names, and DIFF's own tensors named in the same style */
static const da_family_name GGUF_LAYER[] = {
    {"attention_norm.weight", "attn_norm.weight"},
    {"attn.q_proj.weight", "attn_q.weight"},
    {"attn.k_proj.weight", "attn_k.weight"},
    {"attn.v_proj.weight", "attn_v.weight"},
    {"attn.out_proj.weight", "attn_output.weight"},
    {"attn.lambda_proj.weight", "attn_lambda.weight"},
    {"attn.lambda_q1", "attn_lambda_q1.weight"},
    {"attn.lambda_k1", "attn_lambda_k1.weight"},
    {"attn.lambda_q2", "attn_lambda_q2.weight"},
    {"attn.lambda_k2", "attn_lambda_k2.weight"},
    {"attn.subln.weight", "attn_sub_norm.weight"},
    {"ffn_norm.weight", "ffn_norm.weight"},
    {"feed_forward.w1.weight", "ffn_gate.weight"},
    {"feed_forward.w2.weight", "ffn_down.weight"},
    {"feed_forward.w3.weight", "ffn_up.weight"},
    {"feed_forward.poly.weight", "ffn_act_norm.weight"}, /* --mlp polynorm: PolyNorm's w0 w1 w2, b */
    {"feed_forward.poly.bias", "ffn_act_norm.bias"},
    {NULL, NULL},
};

/* under "<general.architecture>."; the older "diffattn" architecture uses the same keys */
static const da_family_key GGUF_KEYS[] = {
    {"max_seq_len", "context_length"},
    {"dim", "embedding_length"},
    {"n_layers", "block_count"},
    {"ffn_hidden", "feed_forward_length"},
    {"n_heads", "attention.head_count"},
    {"n_kv_heads", "attention.head_count_kv"},
    {"rope_dims", "rope.dimension_count"},
    {"key_length", "attention.key_length"},
    {"value_length", "attention.value_length"},
    {"rope_theta", "rope.freq_base"},
    {"rope_scaling", "rope.scaling.type"},
    {"rope_factor", "rope.scaling.factor"},
    {"rope_scale_linear", "rope.scale_linear"},
    {"rope_original_max_pos", "rope.scaling.original_context_length"},
    {"norm_eps", "attention.layer_norm_rms_epsilon"},
    {"vocab_size", "vocab_size"},
    {"window", "attention.sliding_window"},
    {NULL, NULL},
};

/* Motif's own, under "motif." (G of grouped differential attention; V1 when it is the signal heads') */
static const da_family_key MOTIF_GGUF_KEYS[] = {
    {"gda_noise_heads", "attention.noise_head_count"},
    {NULL, NULL},
};

/* ---------------------------------------------------------------- the table */

/* The columns every row of one container's layout shares: its names, keys and
 * the prefix of a layer's tensors. */
#define HF_LAYOUT                                                                                                   \
    .container = DA_FAMILY_HF, .layer_prefix = "model.layers.%d.", .globals = HF_GLOBALS, .layer = HF_LAYER,       \
    .keys = HF_KEYS
#define GGUF_LAYOUT                                                                                                 \
    .container = DA_FAMILY_GGUF, .layer_prefix = "blk.%d.", .globals = GGUF_GLOBALS, .layer = GGUF_LAYER,          \
    .other_attn_kept = 1, .keys_under_arch = 1, .keys = GGUF_KEYS

static const da_family FAMILIES[] = {
    {.name = "diffattn",
     .container = DA_FAMILY_NATIVE,
     .tag = "diffattn",
     .layer_prefix = "layers.%d.",
     .names_native = 1,
     .heads_per_native = 1},
    {.name = "hf-diffllama",
     HF_LAYOUT,
     .tag = "diffllama",
     .hf_class = "DiffLlamaForCausalLM",
     .variant = "diff",
     .layer_own = DIFFLLAMA_LAYER,
     .heads_per_native = 2,
     .folds_head_norm = 1,
     .default_norm_eps = 1e-5f},
    {.name = "hf-llama",
     HF_LAYOUT,
     .tag = "llama",
     .hf_class = "LlamaForCausalLM",
     .variant = "softmax",
     .heads_per_native = 1,
     .default_norm_eps = 1e-6f,
     .writes_mlp_bias = 1},
    /* Motif-2.6B (DIFF V1) and Motif-2-12.7B (grouped differential attention) */
    {.name = "hf-motif",
     HF_LAYOUT,
     .tag = "motif",
     .hf_class = "MotifForCausalLM",
     .variant = "gda",
     .layer_own = MOTIF_LAYER,
     .heads_per_native = 1,
     .default_norm_eps = 1e-6f,
     .hf_rule = &da_hf_motif_rule},
    {.name = "gguf-llama",
     GGUF_LAYOUT,
     .tag = "llama",
     .variant = "softmax",
     .heads_per_native = 1,
     .plain_only = 1},
    /* Motif-2.6B (V1) and Motif-2-12.7B (grouped): GDA with PolyNorm MLPs, in llama.cpp's layout */
    {.name = "gguf-motif",
     GGUF_LAYOUT,
     .tag = "motif",
     .variant = "gda",
     .keys_own = MOTIF_GGUF_KEYS,
     .heads_per_native = 1,
     .mlp = "polynorm"},
    {.name = "gguf-diffattn",
     GGUF_LAYOUT,
     .tag = "diffattn-%s",
     .heads_per_native = 1},
    /* diffattn's GGUF files before llama.cpp's layout: its own names, the same keys under "diffattn.",
     * the variant in diffattn.variant */
    {.name = "gguf-diffattn-v1",
     .container = DA_FAMILY_GGUF,
     .tag = "diffattn",
     .layer_prefix = "layers.%d.",
     .names_native = 1,
     .keys_under_arch = 1,
     .keys = GGUF_KEYS,
     .heads_per_native = 1,
     .read_only = 1},
};

#define N_FAMILIES ((int)(sizeof FAMILIES / sizeof FAMILIES[0]))

const da_family *da_family_all(int *n) {
    *n = N_FAMILIES;
    return FAMILIES;
}

int da_family_variant(const da_family *f, da_arch *out) { return f->variant ? da_arch_parse(f->variant, out) : -1; }

int da_family_mlp(const da_family *f, da_config *c) {
    if (!f->mlp) return -1;
    return da_field_parse(da_fields_find(da_config_fields, DA_CONFIG_N_FIELDS, "mlp"), c, f->mlp).code ? -1 : 0;
}

/* 1 when f maps c's variant (any, for a family of every variant) and its MLP gate (any, for a family of none). */
static int maps_variant(const da_family *f, const da_config *c) {
    da_arch a;
    if (f->mlp) {
        da_config m = *c;
        if (da_family_mlp(f, &m) || m.mlp != c->mlp) return 0;
    }
    return !f->variant || (!da_family_variant(f, &a) && a == c->arch);
}

const da_family *da_family_hf(const char *model_type) {
    for (int i = 0; i < N_FAMILIES; i++)
        if (FAMILIES[i].container == DA_FAMILY_HF && !strcmp(FAMILIES[i].tag, model_type)) return &FAMILIES[i];
    return NULL;
}

const da_family *da_family_hf_of(const da_config *c) {
    for (int i = 0; i < N_FAMILIES; i++)
        if (FAMILIES[i].container == DA_FAMILY_HF && maps_variant(&FAMILIES[i], c)) return &FAMILIES[i];
    return NULL;
}

const da_family *da_family_gguf(const char *arch, da_arch *variant) {
    for (int i = 0; i < N_FAMILIES; i++) {
        const da_family *f = &FAMILIES[i];
        if (f->container != DA_FAMILY_GGUF) continue;
        const char *hole = strstr(f->tag, "%s");
        if (!hole) {
            if (strcmp(f->tag, arch)) continue;
            if (!f->variant || !da_family_variant(f, variant)) return f;
            continue;
        }
        const size_t pre = (size_t)(hole - f->tag);
        if (!strncmp(arch, f->tag, pre) && !strcmp(hole + 2, "") && !da_arch_parse(arch + pre, variant)) return f;
    }
    return NULL;
}

const da_family *da_family_gguf_of(const da_config *c, char *arch, size_t n) {
    for (int i = 0; i < N_FAMILIES; i++) {
        const da_family *f = &FAMILIES[i];
        if (f->container != DA_FAMILY_GGUF || f->read_only || !maps_variant(f, c)) continue;
        if (f->plain_only && (c->window > 0 || da_config_head_norm(c) || c->mlp != DA_MLP_SWIGLU)) continue;
        const char *hole = strstr(f->tag, "%s");
        if (hole) snprintf(arch, n, "%.*s%s%s", (int)(hole - f->tag), f->tag, da_arch_name(c->arch), hole + 2);
        else snprintf(arch, n, "%s", f->tag);
        return f;
    }
    return NULL;
}

static const da_family_key *key_row(const da_family_key *list, const char *quantity) {
    for (const da_family_key *k = list; k && k->quantity; k++)
        if (!strcmp(k->quantity, quantity)) return k;
    return NULL;
}

const char *da_family_key_of(const da_family *f, const char *quantity, const char *arch, char *buf, size_t n) {
    const da_family_key *k = key_row(f->keys, quantity);
    if (!k) k = key_row(f->keys_own, quantity);
    if (!k) return NULL;
    if (!f->keys_under_arch) return k->key;
    snprintf(buf, n, "%s.%s", arch, k->key);
    return buf;
}

/* ---------------------------------------------------------------- tensor names */

/* The row of list whose native (from = 0) or file (from = 1) name is name, or NULL. */
static const da_family_name *row_of(const da_family_name *list, const char *name, int from) {
    for (const da_family_name *r = list; r && r->native; r++)
        if (!strcmp(name, from ? r->file : r->native)) return r;
    return NULL;
}

/* The layer index after prefix fmt ("blk.%d.") at the start of name, and
 * where the rest begins; -1 when name does not start so. */
static long layer_of(const char *fmt, const char *name, const char **rest) {
    const char *hole = strstr(fmt, "%d");
    const size_t pre = (size_t)(hole - fmt), post = strlen(hole + 2);
    if (strncmp(name, fmt, pre)) return -1;
    char *end;
    const long layer = strtol(name + pre, &end, 10);
    if (end == name + pre || layer < 0 || layer > (1L << 20) || strncmp(end, hole + 2, post)) return -1;
    *rest = end + post;
    return layer;
}

/* from: 0 maps native -> file, 1 file -> native. */
static int map_name(const da_family *f, const char *name, char *out, size_t n, int from) {
    if (f->names_native) {
        snprintf(out, n, "%s", name);
        return 0;
    }
    const da_family_name *r = row_of(f->globals, name, from);
    if (r) {
        snprintf(out, n, "%s", from ? r->native : r->file);
        return 0;
    }
    const char *native_fmt = "layers.%d.", *in_fmt = from ? f->layer_prefix : native_fmt;
    const char *out_fmt = from ? native_fmt : f->layer_prefix, *rest;
    const long layer = layer_of(in_fmt, name, &rest);
    if (layer < 0) return -1;
    const char *mapped = NULL;
    if ((r = row_of(f->layer, rest, from)) || (r = row_of(f->layer_own, rest, from))) mapped = from ? r->native : r->file;
    else if (f->other_attn_kept && !strncmp(rest, "attn.", 5)) mapped = rest;
    if (!mapped) return -1;
    char prefix[64];
    snprintf(prefix, sizeof prefix, out_fmt, (int)layer);
    snprintf(out, n, "%s%s", prefix, mapped);
    return 0;
}

int da_family_to_file(const da_family *f, const char *native, char *out, size_t n) {
    return map_name(f, native, out, n, 0);
}

int da_family_from_file(const da_family *f, const char *file, char *out, size_t n) {
    return map_name(f, file, out, n, 1);
}

const char *da_family_layer_name(const da_family *f, int l, const char *native, char *out, size_t n) {
    char nat[192];
    snprintf(nat, sizeof nat, "layers.%d.%s", l, native);
    if (da_family_to_file(f, nat, out, n)) snprintf(out, n, "%s", nat);
    return out;
}
