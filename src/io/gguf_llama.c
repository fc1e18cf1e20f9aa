/* llama.cpp's GGUF layout for diffattn's models (gguf_llama.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/config_gguf.h"
#include "io/gguf_llama.h"
#include "ops/ops.h"

void da_gguf_arch_of(const da_config *c, char *out, size_t n) {
    /* llama.cpp's llama has no sliding window and no per-head norm */
    if (c->arch == DA_ARCH_SOFTMAX && c->window == 0 && !da_config_head_norm(c)) snprintf(out, n, "llama");
    else snprintf(out, n, "diffattn-%s", da_arch_name(c->arch));
}

int da_gguf_arch_parse(const char *arch, da_arch *out) {
    if (!strcmp(arch, "llama")) {
        *out = DA_ARCH_SOFTMAX;
        return 1;
    }
    return !strncmp(arch, "diffattn-", 9) && !da_arch_parse(arch + 9, out);
}

/* ---------------------------------------------------------------- tensor names */

static const struct {
    const char *native, *gguf;
} LAYER_NAMES[] = {
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
},
  GLOBAL_NAMES[] = {
      {"tok_embeddings.weight", "token_embd.weight"},
      {"norm.weight", "output_norm.weight"},
      {"output.weight", "output.weight"},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* from: 0 maps native -> gguf, 1 gguf -> native. */
static int map_name(const char *name, char *out, size_t n, int from) {
    for (size_t i = 0; i < N_OF(GLOBAL_NAMES); i++)
        if (!strcmp(name, from ? GLOBAL_NAMES[i].gguf : GLOBAL_NAMES[i].native)) {
            snprintf(out, n, "%s", from ? GLOBAL_NAMES[i].native : GLOBAL_NAMES[i].gguf);
            return 0;
        }
    const char *prefix = from ? "blk." : "layers.";
    const size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl)) return -1;
    char *end;
    const long layer = strtol(name + pl, &end, 10);
    if (end == name + pl || *end != '.' || layer < 0 || layer > (1L << 20)) return -1;
    for (size_t i = 0; i < N_OF(LAYER_NAMES); i++)
        if (!strcmp(end + 1, from ? LAYER_NAMES[i].gguf : LAYER_NAMES[i].native)) {
            snprintf(out, n, "%s%ld.%s", from ? "layers." : "blk.", layer,
                     from ? LAYER_NAMES[i].native : LAYER_NAMES[i].gguf);
            return 0;
        }
    /* an attention tensor llama.cpp has no name for keeps its variant's own after the block's prefix */
    if (!strncmp(end + 1, "attn.", 5)) {
        snprintf(out, n, "%s%ld.%s", from ? "layers." : "blk.", layer, end + 1);
        return 0;
    }
    return -1;
}

int da_gguf_name_to_llama(const char *native, char *out, size_t n) { return map_name(native, out, n, 0); }
int da_gguf_name_from_llama(const char *name, char *out, size_t n) { return map_name(name, out, n, 1); }

/* ---------------------------------------------------------------- keys */

/* Llama's freq_base giving c's unscaled frequencies: theta itself, or for the
 * DIFF framework's rule theta^(-j/(d/2-1)) = (theta^(d/(d-2)))^(-2j/d). */
static double llama_freq_base(const da_config *c) {
    const double d = da_head_dim(c);
    return c->rope_freq == DA_ROPE_FREQ_LLAMA || d <= 2 ? (double)c->rope_theta : pow((double)c->rope_theta, d / (d - 2));
}

void da_config_gguf_add_llama(da_gguf_writer *w, const da_config *c) {
    char arch[64], k[128];
    da_gguf_arch_of(c, arch, sizeof arch);
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
    da_gguf_add_u32(w, KEY("context_length"), (uint32_t)c->max_seq_len);
    da_gguf_add_u32(w, KEY("embedding_length"), (uint32_t)c->dim);
    da_gguf_add_u32(w, KEY("block_count"), (uint32_t)c->n_layers);
    da_gguf_add_u32(w, KEY("feed_forward_length"), (uint32_t)c->ffn_hidden);
    da_gguf_add_u32(w, KEY("attention.head_count"), (uint32_t)c->n_heads);
    da_gguf_add_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    da_gguf_add_u32(w, KEY("rope.dimension_count"), (uint32_t)da_head_dim(c));
    /* each DIFF head: two d-wide query/key sub-heads, a 2d-wide value; an explicit head_dim, as llama.cpp reads it */
    if (c->arch == DA_ARCH_DIFF || c->head_dim > 0) {
        da_gguf_add_u32(w, KEY("attention.key_length"), (uint32_t)da_head_dim(c));
        da_gguf_add_u32(w, KEY("attention.value_length"), (uint32_t)((c->arch == DA_ARCH_DIFF ? 2 : 1) * da_head_dim(c)));
    }
    da_gguf_add_f32(w, KEY("rope.freq_base"), (float)llama_freq_base(c));
    if (c->rope_scaling == DA_ROPE_SCALE_LINEAR) {
        da_gguf_add_str(w, KEY("rope.scaling.type"), "linear");
        da_gguf_add_f32(w, KEY("rope.scaling.factor"), c->rope_factor);
    }
    da_gguf_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), c->norm_eps);
    da_gguf_add_u32(w, KEY("vocab_size"), (uint32_t)c->vocab_size);
    if (c->window > 0) da_gguf_add_u32(w, KEY("attention.sliding_window"), (uint32_t)c->window);
#undef KEY
    /* the exact rule, which the f32 freq_base above only approximates for the DIFF rule */
    da_gguf_add_f32(w, "diffattn.rope.freq_base", c->rope_theta);
    da_config_gguf_add_rope(w, c);
    da_config_gguf_add_options(w, c);
    da_config_gguf_add_variant(w, c);
}

static da_status get_int(const da_gguf_file *f, const char *key, int def, int *out) {
    if (def >= 0 && !da_gguf_kv_find(f, key)) {
        *out = def;
        return da_ok();
    }
    int64_t v;
    da_status st = da_gguf_get_int(f, key, &v);
    if (st.code) return st;
    if (v < 0 || v > (1 << 30)) return da_errorf("%s: %s = %lld is out of range (0..2^30)", f->path, key, (long long)v);
    *out = (int)v;
    return da_ok();
}

/* The RoPE fields: diffattn's exact keys, else llama.cpp's. */
static da_status get_rope(const da_gguf_file *f, const char *arch, da_config *c) {
    char k[96];
    if (da_gguf_kv_find(f, "diffattn.rope.freq_base")) {
        da_status st = da_gguf_get_f32(f, "diffattn.rope.freq_base", &c->rope_theta);
        return st.code ? st : da_config_gguf_get_rope(f, c);
    }
    da_config def;
    da_config_default(&def);
    c->rope_scaling = DA_ROPE_SCALE_NONE;
    c->rope_factor = def.rope_factor;
    c->rope_low_freq_factor = def.rope_low_freq_factor;
    c->rope_high_freq_factor = def.rope_high_freq_factor;
    c->rope_original_max_pos = def.rope_original_max_pos;
    c->rope_freq = DA_ROPE_FREQ_LLAMA;
    c->rope_theta = 10000.0f;
    snprintf(k, sizeof k, "%s.rope.freq_base", arch);
    da_status st;
    if (da_gguf_kv_find(f, k) && (st = da_gguf_get_f32(f, k, &c->rope_theta)).code) return st;
    if (da_gguf_tensor_find(f, "rope_freqs.weight"))
        return da_errorf("%s: rope_freqs.weight (llama.cpp's per-frequency RoPE factors) is not read by this build",
                         f->path);
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    const char *type = "none";
    if (da_gguf_kv_find(f, k) && (st = da_gguf_get_str(f, k, &type)).code) return st;
    if (!strcmp(type, "linear")) {
        c->rope_scaling = DA_ROPE_SCALE_LINEAR;
        snprintf(k, sizeof k, "%s.rope.scaling.factor", arch);
        if ((st = da_gguf_get_f32(f, k, &c->rope_factor)).code) return st;
    } else if (strcmp(type, "none")) {
        return da_errorf("%s: %s.rope.scaling.type = \"%s\" (this build reads none and linear)", f->path, arch, type);
    }
    return da_ok();
}

da_status da_config_gguf_get_llama(const da_gguf_file *f, const char *arch, da_config *c) {
    memset(c, 0, sizeof *c);
    if (!da_gguf_arch_parse(arch, &c->arch))
        return da_errorf("%s: general.architecture \"%s\" is not one diffattn writes", f->path, arch);
    char k[96];
    da_status st;
    const struct {
        const char *key;
        int *dst, def;
    } ints[] = {
        {"context_length", &c->max_seq_len, -1},   {"embedding_length", &c->dim, -1},
        {"block_count", &c->n_layers, -1},         {"feed_forward_length", &c->ffn_hidden, -1},
        {"attention.head_count", &c->n_heads, -1}, {"attention.sliding_window", &c->window, 0},
    };
    for (size_t i = 0; i < N_OF(ints); i++) {
        snprintf(k, sizeof k, "%s.%s", arch, ints[i].key);
        if ((st = get_int(f, k, ints[i].def, ints[i].dst)).code) return st;
    }
    snprintf(k, sizeof k, "%s.attention.head_count_kv", arch);
    if ((st = get_int(f, k, c->n_heads, &c->n_kv_heads)).code) return st;
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch);
    if ((st = da_gguf_get_f32(f, k, &c->norm_eps)).code) return st;
    const da_gguf_tensor *emb = da_gguf_tensor_find(f, "token_embd.weight");
    snprintf(k, sizeof k, "%s.vocab_size", arch);
    if (da_gguf_kv_find(f, k)) st = get_int(f, k, -1, &c->vocab_size);
    else if (emb && emb->n_dims == 2 && emb->ne[1] > 0 && emb->ne[1] <= (1 << 30)) c->vocab_size = (int)emb->ne[1];
    else st = da_errorf("%s: neither %s nor tensor token_embd.weight gives the vocabulary size", f->path, k);
    if (st.code) return st;
    c->tie_embeddings = da_gguf_tensor_find(f, "output.weight") == NULL;
    if ((st = get_rope(f, arch, c)).code) return st;
    if ((st = da_config_gguf_get_options(f, c)).code) return st;
    if ((st = da_config_gguf_get_variant(f, c)).code) return st;
    st = da_config_validate(c);
    if (st.code) return da_errorf("%s: impossible configuration: %s", f->path, st.msg);
    return da_ok();
}

float *da_gguf_rope_freqs(const da_config *c, int *n) {
    *n = 0;
    if (c->rope_scaling != DA_ROPE_SCALE_LLAMA3) return NULL;
    const int d = da_head_dim(c);
    rope_freq_spec plain = {.rule = 1, .theta = (float)llama_freq_base(c)}; /* what llama.cpp computes */
    double *a = malloc((size_t)d * sizeof *a), *b = a ? a + d / 2 : NULL;
    float *out = malloc((size_t)(d / 2) * sizeof *out);
    if (!a || !out) {
        free(a);
        free(out);
        return NULL;
    }
    da_rope_inv_freq_of(c, a);
    da_rope_inv_freq(b, d, &plain);
    for (int j = 0; j < d / 2; j++) out[j] = (float)(b[j] / a[j]);
    free(a);
    *n = d / 2;
    return out;
}
