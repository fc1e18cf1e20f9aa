/* Hugging Face config.json, read into a da_config for the family of its
 * model_type (hf_model.h, family.h). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/family.h"
#include "io/json_keys.h"
#include "io/hf_model.h"
#include "io/st_shards.h"

/* ------------------------------------------------------------ config.json */

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* An integer key; absent -> def (or an error when def < 0). */
static da_status cfg_int(const char *path, const cJSON *o, const char *k, int def, int *out) {
    const cJSON *v = get(o, k);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0) return da_errorf("%s: lacks \"%s\"", path, k);
        *out = def;
        return da_ok();
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 || v->valuedouble > 1e9)
        return da_errorf("%s: \"%s\" must be a positive integer", path, k);
    *out = (int)v->valuedouble;
    return da_ok();
}

static da_status cfg_num(const char *path, const cJSON *o, const char *k, double def, int required, double *out) {
    const cJSON *v = get(o, k);
    if (!v || cJSON_IsNull(v)) {
        if (required) return da_errorf("%s: lacks \"%s\"", path, k);
        *out = def;
        return da_ok();
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return da_errorf("%s: \"%s\" must be a number", path, k);
    *out = v->valuedouble;
    return da_ok();
}

static da_status cfg_bool(const char *path, const cJSON *o, const char *k, int def, int *out) {
    const cJSON *v = get(o, k);
    if (!v || cJSON_IsNull(v)) *out = def;
    else if (cJSON_IsBool(v)) *out = cJSON_IsTrue(v);
    else return da_errorf("%s: \"%s\" must be true or false", path, k);
    return da_ok();
}

/* rope_scaling and rope_parameters both given must say the same: each key
 * present in both (and the rope_type, and rope_theta beside the top-level
 * one) is equal, or which one transformers reads decides the model. */
static da_status check_rope_agree(const char *path, const cJSON *root, const cJSON *rs, const cJSON *rp) {
    static const char *const keys[] = {"rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings", "rope_theta"};
    const cJSON *pairs[2][2] = {{rs, rp}, {root, rp}};
    for (int p = 0; p < 2; p++) {
        const cJSON *a = pairs[p][0], *b = pairs[p][1];
        if (!cJSON_IsObject(a) || !cJSON_IsObject(b)) continue;
        for (size_t k = p ? 6 : 0; k < sizeof keys / sizeof keys[0]; k++) {
            const cJSON *x = get(a, keys[k]), *y = get(b, keys[k]);
            if (!x || !y || cJSON_Compare(x, y, 1)) continue;
            return da_errorf("%s: %s%s and rope_parameters.%s differ; which one applies depends on the transformers "
                             "version: keep one",
                             path, p ? "" : "rope_scaling.", keys[k], keys[k]);
        }
    }
    return da_ok();
}

/* A key that appears twice in one object of the tree at o, or NULL. cJSON
 * would take the first, Python the last. *oom is set when the check could
 * not be made. */
static const char *duplicate_key(const cJSON *o, int *oom) {
    if (!cJSON_IsObject(o) && !cJSON_IsArray(o)) return NULL;
    for (const cJSON *e = o->child; e; e = e->next) {
        const char *d = duplicate_key(e, oom);
        if (d || *oom) return d;
    }
    return da_json_duplicate_key(o, oom);
}

/* rope_scaling (older files) or rope_parameters (newer transformers). */
static da_status parse_rope(const char *path, const cJSON *root, da_config *c) {
    const cJSON *rs = get(root, "rope_scaling");
    const char *key = "rope_scaling";
    const cJSON *rp = get(root, "rope_parameters");
    da_status agree = check_rope_agree(path, root, rs, rp);
    if (agree.code) return agree;
    if ((!rs || cJSON_IsNull(rs)) && rp && !cJSON_IsNull(rp)) rs = rp, key = "rope_parameters";
    double theta;
    da_status st = cfg_num(path, root, "rope_theta", 10000.0, 0, &theta);
    if (st.code) return st;
    if (rs && cJSON_IsObject(rs) && get(rs, "rope_theta") && (st = cfg_num(path, rs, "rope_theta", 0, 1, &theta)).code)
        return st;
    c->rope_theta = (float)theta;
    c->rope_freq = DA_ROPE_FREQ_LLAMA;
    c->rope_scaling = DA_ROPE_SCALE_NONE;
    double prf;
    if ((st = cfg_num(path, root, "partial_rotary_factor", 1.0, 0, &prf)).code) return st;
    if (rs && cJSON_IsObject(rs) && (st = cfg_num(path, rs, "partial_rotary_factor", prf, 0, &prf)).code) return st;
    if (prf != 1.0)
        return da_errorf("%s: partial_rotary_factor = %g is not supported (diffattn rotates whole heads)", path, prf);
    if (!rs || cJSON_IsNull(rs)) return da_ok();
    if (!cJSON_IsObject(rs)) return da_errorf("%s: \"%s\" must be an object or null", path, key);
    const cJSON *type = get(rs, "rope_type");
    if (!type) type = get(rs, "type");
    if (!type) return da_ok(); /* rope_parameters holding rope_theta only */
    if (!cJSON_IsString(type)) return da_errorf("%s: %s.rope_type must be a string", path, key);
    const char *t = type->valuestring;
    if (!strcmp(t, "default")) return da_ok();
    double v;
    if (!strcmp(t, "linear")) {
        if ((st = cfg_num(path, rs, "factor", 0, 1, &v)).code) return st;
        c->rope_scaling = DA_ROPE_SCALE_LINEAR;
        c->rope_factor = (float)v;
        return da_ok();
    }
    if (!strcmp(t, "llama3")) {
        c->rope_scaling = DA_ROPE_SCALE_LLAMA3;
        if ((st = cfg_num(path, rs, "factor", 0, 1, &v)).code) return st;
        c->rope_factor = (float)v;
        if ((st = cfg_num(path, rs, "low_freq_factor", 0, 1, &v)).code) return st;
        c->rope_low_freq_factor = (float)v;
        if ((st = cfg_num(path, rs, "high_freq_factor", 0, 1, &v)).code) return st;
        c->rope_high_freq_factor = (float)v;
        /* transformers falls back to max_position_embeddings */
        int orig;
        if ((st = cfg_int(path, rs, "original_max_position_embeddings", c->max_seq_len, &orig)).code) return st;
        c->rope_original_max_pos = orig;
        return da_ok();
    }
    return da_errorf("%s: %s.rope_type \"%s\" is not supported (supported: default, linear, llama3)", path, key, t);
}

/* The model_types of the Hugging Face families: "\"a\" or \"b\"" (quoted) or "a, b". */
static void hf_types(char *out, size_t n, int quoted) {
    int count = 0, k = 0;
    const da_family *f = da_family_all(&count);
    for (int i = 0; i < count; i++)
        if (f[i].container == DA_FAMILY_HF) k++;
    out[0] = 0;
    for (int i = 0, j = 0; i < count; i++) {
        if (f[i].container != DA_FAMILY_HF) continue;
        const char *sep = !j ? "" : !quoted || j < k - 1 ? ", " : " or ";
        snprintf(out + strlen(out), n - strlen(out), quoted ? "%s\"%s\"" : "%s%s", sep, f[i].tag);
        j++;
    }
}

/* The fewest native KV groups for DiffLlama: diff head j (j < H/2) reads the
 * KV heads of query heads j and j + H/2; a group of consecutive diff heads
 * may share one native group only when they read the same pair. */
static int diff_native_rep(int H, int Hkv) {
    const int Hn = H / 2, G = H / Hkv;
    for (int r = Hn; r > 1; r--) {
        if (Hn % r) continue;
        int ok = 1;
        for (int j = 0; j < Hn && ok; j++) {
            int j0 = j / r * r;
            ok = j / G == j0 / G && (j + Hn) / G == (j0 + Hn) / G;
        }
        if (ok) return r;
    }
    return 1;
}

da_status da_hf_config_parse(const char *dir, da_config *c, da_hf_shape *hs) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text;
    da_status st = da_text_file_read(path, &text);
    if (st.code) return st;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return da_errorf("%s: not a JSON object", path);
    }
    int oom = 0;
    const char *dup = duplicate_key(root, &oom);
    if (dup || oom) {
        da_status e = oom ? da_errorf("%s: out of memory", path)
                          : da_errorf("%s: key \"%.80s\" appears twice in one object (Python's json takes the last, "
                                      "other readers the first): keep one",
                                      path, dup);
        cJSON_Delete(root);
        return e;
    }
    da_config_default(c); /* every field is set below, the RoPE scaling's where the file has one */
    memset(hs, 0, sizeof *hs);
    const cJSON *mt = get(root, "model_type");
    int hidden = 0, H = 0, Hkv = 0, head_dim = 0, bias = 0, mlp_bias = 0;
    double eps = 0;
    const da_family *fam = NULL;
    char types[128];
    if (!cJSON_IsString(mt)) hf_types(types, sizeof types, 1), st = da_errorf("%s: lacks \"model_type\" (expected %s)", path, types);
    else if (!(fam = da_family_hf(mt->valuestring)))
        hf_types(types, sizeof types, 0),
            st = da_errorf("%s: model_type \"%s\" is not supported (supported: %s)", path, mt->valuestring, types);
    /* the family's key of a quantity */
#define KEY(q) da_family_key_of(fam, q, NULL, NULL, 0)
    if (!st.code) st = cfg_int(path, root, KEY("dim"), -1, &hidden);
    if (!st.code) st = cfg_int(path, root, KEY("n_layers"), -1, &c->n_layers);
    if (!st.code) st = cfg_int(path, root, KEY("n_heads"), -1, &H);
    if (!st.code) st = cfg_int(path, root, KEY("n_kv_heads"), H, &Hkv);
    if (!st.code) st = cfg_int(path, root, KEY("ffn_hidden"), -1, &c->ffn_hidden);
    if (!st.code) st = cfg_int(path, root, KEY("vocab_size"), -1, &c->vocab_size);
    if (!st.code) st = cfg_int(path, root, KEY("max_seq_len"), 2048, &c->max_seq_len);
    if (!st.code) st = cfg_num(path, root, KEY("norm_eps"), fam->default_norm_eps, 0, &eps);
    if (!st.code) st = cfg_bool(path, root, KEY("tie_embeddings"), 0, &c->tie_embeddings);
    if (!st.code) st = cfg_bool(path, root, "attention_bias", 0, &bias);
    if (!st.code) st = cfg_bool(path, root, "mlp_bias", 0, &mlp_bias);
    if (!st.code && (bias || mlp_bias))
        st = da_errorf("%s: %s is true; diffattn's projections have no biases", path,
                       bias ? "attention_bias" : "mlp_bias");
    const da_hf_config_rule *rule = fam ? fam->hf_rule : NULL;
    if (!st.code && !rule) {
        const cJSON *act = get(root, "hidden_act");
        if (act && !(cJSON_IsString(act) && !strcmp(act->valuestring, "silu")))
            st = da_errorf("%s: hidden_act \"%s\" is not supported (diffattn's feed-forward is SwiGLU: \"silu\")",
                           path, cJSON_IsString(act) ? act->valuestring : "(not a string)");
    }
    if (!st.code && !rule && Hkv > H) st = da_errorf("%s: num_key_value_heads %d exceeds num_attention_heads %d", path, Hkv, H);
    if (!st.code && !rule && H % Hkv)
        st = da_errorf("%s: num_key_value_heads %d does not divide num_attention_heads %d", path, Hkv, H);
    /* head_dim, when given, may differ from hidden_size / num_attention_heads (diffattn's explicit head size) */
    if (!st.code) st = cfg_int(path, root, KEY("head_dim"), hidden % H ? 0 : hidden / H, &head_dim);
#undef KEY
    if (!st.code && !head_dim)
        st = da_errorf("%s: hidden_size %d is not a multiple of num_attention_heads %d, and head_dim is not given",
                       path, hidden, H);
    if (!st.code && head_dim % 2) st = da_errorf("%s: head_dim %d is odd; RoPE rotates pairs", path, head_dim);
    if (!st.code && fam->heads_per_native == 2 && H % 2)
        st = da_errorf("%s: num_attention_heads %d is odd; DiffLlama pairs query heads j and j + H/2", path, H);
    if (!st.code && !(eps >= 1e-10 && eps < 1))
        st = da_errorf("%s: rms_norm_eps %g must lie in [1e-10, 1) (smaller, a zero row's norm overflows)", path, eps);
    if (!st.code) st = parse_rope(path, root, c);
    if (st.code) {
        cJSON_Delete(root);
        return st;
    }
    c->dim = hidden;
    c->norm_eps = (float)eps;
    hs->fam = fam;
    hs->H = H;
    hs->Hkv = Hkv;
    hs->d = head_dim;
    hs->A = H * head_dim;
    hs->v_scale = 1.0f;
    c->head_dim = head_dim * H == hidden ? 0 : head_dim; /* a DIFF head's sub-heads are HF's heads: the same d */
    da_family_variant(fam, &c->arch);
    if (rule) st = rule->read(path, root, c, hs); /* the heads of a family with its own layout */
    cJSON_Delete(root);
    if (st.code) return st;
    if (!rule && fam->heads_per_native == 2) {
        c->n_heads = H / 2;
        hs->n_rep_native = diff_native_rep(H, Hkv);
        c->n_kv_heads = c->n_heads / hs->n_rep_native;
        hs->head_norm_eps = (float)eps;
    } else if (!rule) {
        c->n_heads = H;
        c->n_kv_heads = Hkv;
    }
    st = da_config_validate(c);
    if (st.code) return da_errorf("%s: this configuration does not fit diffattn: %s", path, st.msg);
    return da_ok();
}

da_status da_hf_config_load(da_config *c, const char *dir) {
    da_hf_shape hs;
    return da_hf_config_parse(dir, c, &hs);
}
