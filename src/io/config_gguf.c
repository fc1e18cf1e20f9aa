/* The RoPE rule's and the variants' own GGUF keys (config_gguf.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "io/config_gguf.h"

void da_config_gguf_add_rope(da_gguf_writer *w, const da_config *c) {
    da_gguf_add_str(w, "diffattn.rope.freq_rule", da_rope_freq_name(c->rope_freq));
    da_gguf_add_str(w, "diffattn.rope.scaling.type", da_rope_scale_name(c->rope_scaling));
    if (c->rope_scaling == DA_ROPE_SCALE_NONE) return;
    da_gguf_add_f32(w, "diffattn.rope.scaling.factor", c->rope_factor);
    if (c->rope_scaling != DA_ROPE_SCALE_LLAMA3) return;
    da_gguf_add_f32(w, "diffattn.rope.scaling.low_freq_factor", c->rope_low_freq_factor);
    da_gguf_add_f32(w, "diffattn.rope.scaling.high_freq_factor", c->rope_high_freq_factor);
    da_gguf_add_u32(w, "diffattn.rope.scaling.original_context_length", (uint32_t)c->rope_original_max_pos);
}

da_status da_config_gguf_get_rope(const da_gguf_file *f, da_config *c) {
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

void da_config_gguf_add_variant(da_gguf_writer *w, const da_config *c) {
    for (int i = 0; i < DA_CONFIG_N_FIELDS; i++) {
        const da_field *fd = &da_config_fields[i];
        if (!da_config_field_of_variant(i) || !da_config_field_written(c, i)) continue;
        if (fd->type != DA_FIELD_INT && fd->type != DA_FIELD_BOOL) continue;
        char key[96];
        int v;
        memcpy(&v, (const char *)c + fd->offset, sizeof v);
        snprintf(key, sizeof key, "diffattn.%s", fd->key);
        if (fd->type == DA_FIELD_BOOL) da_gguf_add_bool(w, key, v);
        else da_gguf_add_u32(w, key, (uint32_t)v);
    }
}

da_status da_config_gguf_get_variant(const da_gguf_file *f, da_config *c) {
    da_config def;
    da_config_default(&def);
    for (int i = 0; i < DA_CONFIG_N_FIELDS; i++) {
        const da_field *fd = &da_config_fields[i];
        if (!da_config_field_of_variant(i) || (fd->type != DA_FIELD_INT && fd->type != DA_FIELD_BOOL)) continue;
        da_field_copy(fd, c, &def);
        char key[96];
        snprintf(key, sizeof key, "diffattn.%s", fd->key);
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

void da_config_gguf_add_options(da_gguf_writer *w, const da_config *c) {
    if (c->head_norm != DA_HEAD_NORM_DEFAULT)
        da_gguf_add_str(w, "diffattn.attention.head_norm", c->head_norm == DA_HEAD_NORM_ON ? "on" : "off");
    if (c->lambda_init > 0.0f) da_gguf_add_f32(w, "diffattn.attention.lambda_init", c->lambda_init);
    /* llama.cpp's attention.key_length says it too, but only for archs whose heads it knows */
    if (c->head_dim > 0) da_gguf_add_u32(w, "diffattn.attention.head_dim", (uint32_t)c->head_dim);
    if (c->lambda_hold > 0.0f) da_gguf_add_f32(w, "diffattn.attention.lambda_hold", c->lambda_hold);
}

da_status da_config_gguf_get_options(const da_gguf_file *f, da_config *c) {
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
