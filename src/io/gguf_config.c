/* A model's configuration as GGUF keys, for every GGUF family of the family
 * table (gguf_config.h): written in llama.cpp's layout, read from it, from
 * llama.cpp's own files (gguf_config_llama.c) and from diffattn's older
 * "diffattn" architecture. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/variant.h"
#include "io/family.h"
#include "io/gguf_config.h"
#include "ops/ops.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

void da_gguf_arch_of(const da_config *c, char *out, size_t n) {
    if (!da_family_gguf_of(c, out, n)) snprintf(out, n, "?");
}


static void gguf_diffattn_add_rope(da_gguf_writer *w, const da_config *c) {
    da_gguf_add_str(w, "diffattn.rope.freq_rule", da_rope_freq_name(c->rope_freq));
    da_gguf_add_str(w, "diffattn.rope.scaling.type", da_rope_scale_name(c->rope_scaling));
    if (c->rope_scaling == DA_ROPE_SCALE_NONE) return;
    da_gguf_add_f32(w, "diffattn.rope.scaling.factor", c->rope_factor);
    if (c->rope_scaling != DA_ROPE_SCALE_LLAMA3) return;
    da_gguf_add_f32(w, "diffattn.rope.scaling.low_freq_factor", c->rope_low_freq_factor);
    da_gguf_add_f32(w, "diffattn.rope.scaling.high_freq_factor", c->rope_high_freq_factor);
    da_gguf_add_u32(w, "diffattn.rope.scaling.original_context_length", (uint32_t)c->rope_original_max_pos);
}

static da_status gguf_diffattn_get_rope(const da_gguf_file *f, da_config *c) {
    const char *s;
    da_status st;
    da_config def;
    da_config_default(&def);
    c->rope_freq = def.rope_freq;
    c->rope_scaling = def.rope_scaling;
    c->rope_factor = def.rope_factor;
    c->rope_low_freq_factor = def.rope_low_freq_factor;
    c->rope_high_freq_factor = def.rope_high_freq_factor;
    c->rope_original_max_pos = def.rope_original_max_pos;
    if (da_gguf_kv_find(f, "diffattn.rope.freq_rule")) {
        if ((st = da_gguf_get_str(f, "diffattn.rope.freq_rule", &s)).code) return st;
        if (da_rope_freq_parse(s, &c->rope_freq))
            return da_errorf("%s: diffattn.rope.freq_rule = \"%s\" (expected diff or llama)", f->path, s);
    }
    if (da_gguf_kv_find(f, "diffattn.rope.scaling.type")) {
        if ((st = da_gguf_get_str(f, "diffattn.rope.scaling.type", &s)).code) return st;
        if (da_rope_scale_parse(s, &c->rope_scaling))
            return da_errorf("%s: diffattn.rope.scaling.type = \"%s\" (expected none, linear or llama3)", f->path, s);
    }
    if (c->rope_scaling == DA_ROPE_SCALE_NONE) return da_ok();
    if ((st = da_gguf_get_f32(f, "diffattn.rope.scaling.factor", &c->rope_factor)).code) return st;
    if (c->rope_scaling != DA_ROPE_SCALE_LLAMA3) return da_ok();
    if ((st = da_gguf_get_f32(f, "diffattn.rope.scaling.low_freq_factor", &c->rope_low_freq_factor)).code) return st;
    if ((st = da_gguf_get_f32(f, "diffattn.rope.scaling.high_freq_factor", &c->rope_high_freq_factor)).code) return st;
    int64_t v;
    if ((st = da_gguf_get_int(f, "diffattn.rope.scaling.original_context_length", &v)).code) return st;
    if (v <= 0 || v > (1 << 30))
        return da_errorf("%s: diffattn.rope.scaling.original_context_length = %lld is out of range", f->path,
                         (long long)v);
    c->rope_original_max_pos = (int)v;
    return da_ok();
}

/* The key of config field fd: the family's own (keys_own), else diffattn.<field>. */
static const char *variant_key(const da_family *fam, const char *arch, const da_field *fd, char *key, size_t n) {
    if (fam && da_family_key_of(fam, fd->key, arch, key, n)) return key;
    snprintf(key, n, "diffattn.%s", fd->key);
    return key;
}

static void gguf_diffattn_add_variant(da_gguf_writer *w, const da_family *fam, const char *arch, const da_config *c) {
    for (int i = 0; i < DA_CONFIG_N_FIELDS; i++) {
        const da_field *fd = &da_config_fields[i];
        if (!da_config_field_of_variant(i) || !da_config_field_written(c, i)) continue;
        if (fd->type != DA_FIELD_INT && fd->type != DA_FIELD_BOOL) continue;
        char key[128];
        int v;
        memcpy(&v, (const char *)c + fd->offset, sizeof v);
        variant_key(fam, arch, fd, key, sizeof key);
        if (fd->type == DA_FIELD_BOOL) da_gguf_add_bool(w, key, v);
        else da_gguf_add_u32(w, key, (uint32_t)v);
    }
}

static da_status gguf_diffattn_get_variant(const da_gguf_file *f, const da_family *fam, const char *arch, da_config *c) {
    da_config def;
    da_config_default(&def);
    for (int i = 0; i < DA_CONFIG_N_FIELDS; i++) {
        const da_field *fd = &da_config_fields[i];
        if (!da_config_field_of_variant(i) || (fd->type != DA_FIELD_INT && fd->type != DA_FIELD_BOOL)) continue;
        da_field_copy(fd, c, &def);
        char key[128];
        variant_key(fam, arch, fd, key, sizeof key);
        if (!da_gguf_kv_find(f, key)) {
            if (!da_config_field_written(c, i)) continue; /* another variant's field */
            return da_errorf("%s: %s is missing (a %s file stores its variant's fields at every value: was the file "
                             "edited?)",
                             f->path, key, da_arch_name(c->arch));
        }
        int64_t v;
        int b;
        da_status st = fd->type == DA_FIELD_BOOL ? da_gguf_get_bool(f, key, &b) : da_gguf_get_int(f, key, &v);
        if (st.code) return st;
        if (fd->type == DA_FIELD_BOOL) v = b;
        if (v < fd->lo || v > fd->hi)
            return da_errorf("%s: %s = %lld is out of range (%g..%g)", f->path, key, (long long)v, fd->lo, fd->hi);
        const int iv = (int)v;
        memcpy((char *)c + fd->offset, &iv, sizeof iv);
    }
    return da_ok();
}

/* The MLP gate, when the family does not imply it and it is not SwiGLU: diffattn.mlp. */
static void gguf_add_mlp(da_gguf_writer *w, const da_family *fam, const da_config *c) {
    if (fam->mlp || c->mlp == DA_MLP_SWIGLU) return;
    char v[32];
    da_field_format(da_fields_find(da_config_fields, DA_CONFIG_N_FIELDS, "mlp"), c, v, sizeof v);
    da_gguf_add_str(w, "diffattn.mlp", v);
}

static da_status gguf_get_mlp(const da_gguf_file *f, const da_family *fam, da_config *c) {
    c->mlp = DA_MLP_SWIGLU;
    if (!da_family_mlp(fam, c) || !da_gguf_kv_find(f, "diffattn.mlp")) return da_ok();
    const char *s;
    da_status st = da_gguf_get_str(f, "diffattn.mlp", &s);
    if (st.code) return st;
    if (da_field_parse(da_fields_find(da_config_fields, DA_CONFIG_N_FIELDS, "mlp"), c, s).code)
        return da_errorf("%s: diffattn.mlp = \"%s\" (expected swiglu or polynorm)", f->path, s);
    return da_ok();
}

static void gguf_diffattn_add_options(da_gguf_writer *w, const da_config *c) {
    if (c->head_norm != DA_HEAD_NORM_DEFAULT)
        da_gguf_add_str(w, "diffattn.attention.head_norm", c->head_norm == DA_HEAD_NORM_ON ? "on" : "off");
    if (c->lambda_init > 0.0f) da_gguf_add_f32(w, "diffattn.attention.lambda_init", c->lambda_init);
    /* llama.cpp's attention.key_length says it too, but only for archs whose heads it knows */
    if (c->head_dim > 0) da_gguf_add_u32(w, "diffattn.attention.head_dim", (uint32_t)c->head_dim);
    if (c->lambda_hold > 0.0f) da_gguf_add_f32(w, "diffattn.attention.lambda_hold", c->lambda_hold);
}

static da_status gguf_diffattn_get_options(const da_gguf_file *f, da_config *c) {
    const char *s;
    da_status st;
    c->head_norm = DA_HEAD_NORM_DEFAULT;
    c->lambda_init = 0.0f;
    c->head_dim = 0;
    c->lambda_hold = 0.0f;
    if (da_gguf_kv_find(f, "diffattn.attention.head_dim")) {
        int64_t v;
        if ((st = da_gguf_get_int(f, "diffattn.attention.head_dim", &v)).code) return st;
        if (v < 2 || v > 65536)
            return da_errorf("%s: diffattn.attention.head_dim = %lld is out of range (2..65536)", f->path, (long long)v);
        c->head_dim = (int)v;
    }
    if (da_gguf_kv_find(f, "diffattn.attention.lambda_hold") &&
        (st = da_gguf_get_f32(f, "diffattn.attention.lambda_hold", &c->lambda_hold)).code)
        return st;
    if (da_gguf_kv_find(f, "diffattn.attention.head_norm")) {
        if ((st = da_gguf_get_str(f, "diffattn.attention.head_norm", &s)).code) return st;
        if (!strcmp(s, "on")) c->head_norm = DA_HEAD_NORM_ON;
        else if (!strcmp(s, "off")) c->head_norm = DA_HEAD_NORM_OFF;
        else return da_errorf("%s: diffattn.attention.head_norm = \"%s\" (expected on or off)", f->path, s);
    }
    if (da_gguf_kv_find(f, "diffattn.attention.lambda_init") &&
        (st = da_gguf_get_f32(f, "diffattn.attention.lambda_init", &c->lambda_init)).code)
        return st;
    return da_ok();
}

/* ---------------------------------------------------------------- llama.cpp's layout */

/* Llama's freq_base giving c's unscaled frequencies: theta itself, or for the
 * DIFF framework's rule theta^(-j/(d/2-1)) = (theta^(d/(d-2)))^(-2j/d). */
static double llama_freq_base(const da_config *c) {
    const double d = da_head_dim(c);
    return c->rope_freq == DA_ROPE_FREQ_LLAMA || d <= 2 ? (double)c->rope_theta : pow((double)c->rope_theta, d / (d - 2));
}

/* The key of quantity q in family fam's layout under arch, into buf (K). */
#define K(q) da_family_key_of(fam, q, arch, k, sizeof k)

static void add_llama_keys(da_gguf_writer *w, const da_family *fam, const char *arch, const da_config *c) {
    char k[128];
    /* a variant's heads of sub-heads (DIFF: two d-wide query/key sub-heads, a 2d-wide value) and an explicit
     * head_dim, as llama.cpp reads them */
    const int sub = da_attn_variant_of(c->arch)->sub_heads_per_head;
    da_gguf_add_u32(w, K("max_seq_len"), (uint32_t)c->max_seq_len);
    da_gguf_add_u32(w, K("dim"), (uint32_t)c->dim);
    da_gguf_add_u32(w, K("n_layers"), (uint32_t)c->n_layers);
    da_gguf_add_u32(w, K("ffn_hidden"), (uint32_t)c->ffn_hidden);
    da_gguf_add_u32(w, K("n_heads"), (uint32_t)c->n_heads);
    da_gguf_add_u32(w, K("n_kv_heads"), (uint32_t)c->n_kv_heads);
    da_gguf_add_u32(w, K("rope_dims"), (uint32_t)da_head_dim(c));
    if (sub > 1 || c->head_dim > 0) {
        da_gguf_add_u32(w, K("key_length"), (uint32_t)da_head_dim(c));
        da_gguf_add_u32(w, K("value_length"), (uint32_t)(sub * da_head_dim(c)));
    }
    da_gguf_add_f32(w, K("rope_theta"), (float)llama_freq_base(c));
    if (c->rope_scaling == DA_ROPE_SCALE_LINEAR) {
        da_gguf_add_str(w, K("rope_scaling"), "linear");
        da_gguf_add_f32(w, K("rope_factor"), c->rope_factor);
    }
    da_gguf_add_f32(w, K("norm_eps"), c->norm_eps);
    da_gguf_add_u32(w, K("vocab_size"), (uint32_t)c->vocab_size);
    if (c->window > 0) da_gguf_add_u32(w, K("window"), (uint32_t)c->window);
}

void da_gguf_config_write(da_gguf_writer *w, const da_config *c) {
    char arch[64];
    const da_family *fam = da_family_gguf_of(c, arch, sizeof arch);
    add_llama_keys(w, fam, arch, c);
    /* the exact rule, which the f32 freq_base above only approximates for the DIFF rule */
    da_gguf_add_f32(w, "diffattn.rope.freq_base", c->rope_theta);
    gguf_diffattn_add_rope(w, c);
    gguf_diffattn_add_options(w, c);
    gguf_add_mlp(w, fam, c);
    gguf_diffattn_add_variant(w, fam, arch, c);
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
static da_status get_rope(const da_gguf_file *f, const da_family *fam, const char *arch, da_config *c) {
    char k[128];
    if (da_gguf_kv_find(f, "diffattn.rope.freq_base")) {
        da_status st = da_gguf_get_f32(f, "diffattn.rope.freq_base", &c->rope_theta);
        return st.code ? st : gguf_diffattn_get_rope(f, c);
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
    da_status st;
    if (da_gguf_kv_find(f, K("rope_theta")) && (st = da_gguf_get_f32(f, k, &c->rope_theta)).code) return st;
    if (da_gguf_tensor_find(f, "rope_freqs.weight"))
        return da_errorf("%s: rope_freqs.weight (llama.cpp's per-frequency RoPE factors) is not read by this build",
                         f->path);
    const char *type = "none";
    if (da_gguf_kv_find(f, K("rope_scaling")) && (st = da_gguf_get_str(f, k, &type)).code) return st;
    if (!strcmp(type, "linear")) {
        c->rope_scaling = DA_ROPE_SCALE_LINEAR;
        if ((st = da_gguf_get_f32(f, K("rope_factor"), &c->rope_factor)).code) return st;
    } else if (strcmp(type, "none")) {
        return da_errorf("%s: %s = \"%s\" (this build reads none and linear)", f->path, K("rope_scaling"), type);
    }
    return da_ok();
}

/* A file diffattn wrote in llama.cpp's layout (family fam, general.architecture arch). */
static da_status get_llama_layout(const da_gguf_file *f, const da_family *fam, const char *arch, da_config *c) {
    char k[128];
    da_status st;
    const struct {
        const char *quantity;
        int *dst, def;
    } ints[] = {
        {"max_seq_len", &c->max_seq_len, -1}, {"dim", &c->dim, -1},         {"n_layers", &c->n_layers, -1},
        {"ffn_hidden", &c->ffn_hidden, -1},   {"n_heads", &c->n_heads, -1}, {"window", &c->window, 0},
    };
    for (size_t i = 0; i < N_OF(ints); i++)
        if ((st = get_int(f, K(ints[i].quantity), ints[i].def, ints[i].dst)).code) return st;
    if ((st = get_int(f, K("n_kv_heads"), c->n_heads, &c->n_kv_heads)).code) return st;
    if ((st = da_gguf_get_f32(f, K("norm_eps"), &c->norm_eps)).code) return st;
    char emb_name[64];
    da_family_to_file(fam, "tok_embeddings.weight", emb_name, sizeof emb_name);
    const da_gguf_tensor *emb = da_gguf_tensor_find(f, emb_name);
    if (da_gguf_kv_find(f, K("vocab_size"))) st = get_int(f, k, -1, &c->vocab_size);
    else if (emb && emb->n_dims == 2 && emb->ne[1] > 0 && emb->ne[1] <= (1 << 30)) c->vocab_size = (int)emb->ne[1];
    else st = da_errorf("%s: neither %s nor tensor %s gives the vocabulary size", f->path, k, emb_name);
    if (st.code) return st;
    char out_name[64];
    da_family_to_file(fam, "output.weight", out_name, sizeof out_name);
    c->tie_embeddings = da_gguf_tensor_find(f, out_name) == NULL;
    if ((st = get_rope(f, fam, arch, c)).code) return st;
    if ((st = gguf_diffattn_get_options(f, c)).code) return st;
    if ((st = gguf_get_mlp(f, fam, c)).code) return st;
    if ((st = gguf_diffattn_get_variant(f, fam, arch, c)).code) return st;
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

/* ---------------------------------------------------------------- every layout */

static da_status get_int_range(const da_gguf_file *f, const char *key, int lo, int hi, int *out) {
    int64_t v;
    da_status st = da_gguf_get_int(f, key, &v);
    if (st.code) return st;
    if (v < lo || v > hi) return da_errorf("%s: %s = %lld is out of range (%d..%d)", f->path, key, (long long)v, lo, hi);
    *out = (int)v;
    return da_ok();
}

da_status da_gguf_config_read(const da_gguf_file *f, da_config *c, const da_family **family) {
    memset(c, 0, sizeof *c);
    const char *arch, *variant;
    da_status st = da_gguf_get_str(f, "general.architecture", &arch);
    if (st.code) return da_errorf("%s: general.architecture is missing: not a model GGUF", f->path);
    const da_family *fam = *family = da_family_gguf(arch, &c->arch);
    /* a file of the family's own runtime (llama.cpp's llama: no diffattn.* RoPE keys): every key it reads */
    if (fam && fam->plain_only && !da_gguf_kv_find(f, "diffattn.rope.freq_base")) return da_gguf_config_llama_cpp(f, fam, c);
    if (fam && !fam->names_native) return get_llama_layout(f, fam, arch, c);
    char names[128];
    if (!fam)
        return da_errorf("%s: general.architecture is \"%s\"; diffattn runs llama and diffattn-<arch> for arch %s "
                         "(and diffattn, its files before llama.cpp's layout)",
                         f->path, arch, da_arch_names_all(names, sizeof names, ", "));
    int fv;
    if ((st = get_int_range(f, "diffattn.format_version", 0, 1 << 30, &fv)).code) return st;
    if (fv != DA_FORMAT_VERSION)
        return da_errorf("%s: diffattn.format_version %d is not supported (this build reads %d)", f->path, fv,
                         DA_FORMAT_VERSION);
    if ((st = da_gguf_get_str(f, "diffattn.variant", &variant)).code) return st;
    if (da_arch_parse(variant, &c->arch))
        return da_errorf("%s: diffattn.variant = \"%s\" (expected one of %s)", f->path, variant,
                         da_arch_names_all(names, sizeof names, ", "));
    char k[128];
    const struct { const char *quantity; int *dst; } ints[] = {
        {"max_seq_len", &c->max_seq_len}, {"dim", &c->dim},         {"n_layers", &c->n_layers},
        {"ffn_hidden", &c->ffn_hidden},   {"n_heads", &c->n_heads}, {"n_kv_heads", &c->n_kv_heads},
        {"vocab_size", &c->vocab_size},
    };
    for (size_t i = 0; i < N_OF(ints); i++)
        if ((st = get_int_range(f, K(ints[i].quantity), 0, 1 << 30, ints[i].dst)).code) return st;
    if ((st = da_gguf_get_f32(f, K("rope_theta"), &c->rope_theta)).code) return st;
    if ((st = gguf_diffattn_get_rope(f, c)).code) return st;
    if ((st = da_gguf_get_f32(f, K("norm_eps"), &c->norm_eps)).code) return st;
    if ((st = da_gguf_get_bool(f, "diffattn.tie_embeddings", &c->tie_embeddings)).code) return st;
    if (da_gguf_kv_find(f, K("window")) && (st = get_int_range(f, k, 0, 1 << 30, &c->window)).code) return st;
    if ((st = gguf_diffattn_get_variant(f, NULL, arch, c)).code) return st;
    st = da_config_validate(c);
    if (st.code) return da_errorf("%s: impossible configuration: %s", f->path, st.msg);
    return da_ok();
}
