/* Model files: safetensors with the tensor names of docs/formats.md and the
 * configuration in __metadata__. Loading trusts nothing in the file. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/variant.h"
#include "diffattn/model.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/hf_model.h"
#include "io/safetensors.h"
#include "ops/finite.h"

static da_status meta_int(const da_st_file *f, const char *key, int *out) {
    const char *s = da_st_meta_get(f, key);
    if (!s) return da_errorf("%s: __metadata__ lacks \"%s\"", f->path, key);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < INT_MIN || v > INT_MAX)
        return da_errorf("%s: __metadata__.%s = \"%s\" is not an integer", f->path, key, s);
    *out = (int)v;
    return da_ok();
}

da_status da_config_from_meta(const da_st_file *f, da_config *c) {
    memset(c, 0, sizeof *c);
    const char *fmt = da_st_meta_get(f, "format");
    if (!fmt || strcmp(fmt, "diffattn"))
        return da_errorf("%s: not a diffattn model (__metadata__.format is %s%s%s, expected \"diffattn\")", f->path,
                         fmt ? "\"" : "absent", fmt ? fmt : "", fmt ? "\"" : "");
    int version = 0;
    da_status st = meta_int(f, "version", &version);
    if (st.code) return st;
    if (version != DA_FORMAT_VERSION)
        return da_errorf("%s: format version %d is not supported (this build reads version %d)", f->path, version,
                         DA_FORMAT_VERSION);
    da_fields_default(da_config_fields, DA_CONFIG_N_FIELDS, c);
    for (int i = 0; i < DA_CONFIG_N_FIELDS; i++) {
        const da_field *fd = &da_config_fields[i];
        const char *s = da_st_meta_get(f, fd->key);
        /* a variant's own fields are written at every value (da_config_field_written), those added later
         * only when set: a file of that arch without one of the first kind was not written as it is, and is
         * refused rather than given the default */
        const int variant = da_config_field_of_variant(i);
        const int own = variant && da_config_field_of_arch(c, i) && fd->stored != DA_STORED_UNLESS_DEFAULT;
        if (!s && (variant ? !own : fd->stored == DA_STORED_UNLESS_DEFAULT)) continue;
        if (!s)
            return da_errorf("%s: __metadata__ lacks \"%s\"%s", f->path, fd->key,
                             own ? " (an --arch of that field's writes it at every value: was the file edited?)" : "");
        if ((st = da_field_parse(fd, c, s)).code)
            return da_errorf("%s: __metadata__.%s = %s", f->path, fd->key, st.msg);
    }
    st = da_config_validate(c);
    if (st.code) return da_errorf("%s: impossible configuration: %s", f->path, st.msg);
    return da_ok();
}

/* A hint for a shape mismatch, from which dimension the tensor depends on. */
static const char *shape_hint(const char *name) {
    if (strstr(name, "k_proj") || strstr(name, "v_proj")) return " (was this model saved with another n_kv_heads?)";
    if (strstr(name, "lambda_") || strstr(name, "subln")) return " (was this model saved with another n_heads?)";
    if (strstr(name, "feed_forward")) return " (was this model saved with another ffn_hidden?)";
    if (strstr(name, "tok_embeddings") || strstr(name, "output")) return " (does vocab_size match?)";
    return "";
}

const char *da_model_format(const char *path) {
    if (da_hf_is_folder(path)) return "Hugging Face folder (config.json + safetensors)";
    if (da_gguf_is_gguf(path)) return "GGUF (quantized)";
    return "diffattn safetensors";
}

da_status da_config_check_file_size(const da_st_file *f, const da_config *c, size_t values) {
    size_t need = da_config_param_count(c);
    /* Some slack, so that a tensor of a wrong shape still gets its own
     * message (with a hint) from the checks made after allocation. */
    if (need / 2 <= values + ((size_t)1 << 20)) return da_ok();
    return da_errorf("%s: the file declares a %s model of %zu parameters (dim=%d, n_layers=%d, n_heads=%d, "
                     "n_kv_heads=%d, vocab_size=%d, ffn_hidden=%d, tie_embeddings=%s), but its tensors hold %zu "
                     "values; is __metadata__ wrong or the file truncated?",
                     f->path, da_arch_name(c->arch), need, c->dim, c->n_layers, c->n_heads, c->n_kv_heads,
                     c->vocab_size, c->ffn_hidden, c->tie_embeddings ? "true" : "false", values);
}

da_status da_model_check_finite(const da_model *m, const char *path) {
    for (int i = 0; i < m->n_tensors; i++) {
        const da_tensor *t = &m->tensors[i];
        const float *x = m->params + t->offset;
        size_t at = da_first_nonfinite(x, t->numel);
        if (at < t->numel)
            return da_errorf("%s: tensor %s holds %g at element %zu; a model with non-finite weights is refused "
                             "(--allow-nonfinite loads it anyway, for debugging)",
                             path, t->name, (double)x[at], at);
    }
    return da_ok();
}

static da_status load_model_file(da_model *m, const char *path);

da_status da_model_load_with(da_model *m, const char *path, const da_load_opts *o) {
    const int check = !(o && o->allow_nonfinite);
    da_status st = load_model_file(m, path);
    if (!st.code && check && (st = da_model_check_finite(m, path)).code) da_model_free(m);
    return st;
}

da_status da_model_load(da_model *m, const char *path) {
    return da_model_load_with(m, path, NULL);
}

static da_status load_model_file(da_model *m, const char *path) {
    memset(m, 0, sizeof *m);
    if (da_hf_is_folder(path)) return da_hf_model_load(m, path);
    if (da_gguf_is_gguf(path))
        return da_errorf("%s: a GGUF file, not a safetensors checkpoint (load it with da_engine_load, or "
                         "da_model_load_any for its weights in f32)",
                         path);
    da_st_file f;
    da_status st = da_st_open(&f, path);
    if (st.code) return st;
    da_config cfg;
    if ((st = da_config_from_meta(&f, &cfg)).code) goto done;
    /* The model is allocated from the declared configuration: check first
     * that the file holds about that many values, so that a small file
     * cannot claim terabytes. */
    size_t values = 0;
    for (int i = 0; i < f.n_tensors; i++) values += f.tensors[i].numel; /* each lies inside the file */
    if ((st = da_config_check_file_size(&f, &cfg, values)).code) goto done;
    if ((st = da_model_create(m, &cfg)).code) goto done;
    for (int i = 0; i < f.n_tensors; i++) {
        const da_st_tensor *ft = &f.tensors[i];
        const da_tensor *t = da_model_find(m, ft->name);
        if (!t) {
            st = da_errorf("%s: unknown tensor \"%s\" for a %s model with %d layers%s", path, ft->name,
                           da_arch_name(cfg.arch), cfg.n_layers,
                           !strcmp(ft->name, "output.weight") ? " (tie_embeddings is true, so output.weight must be absent)"
                           : strstr(ft->name, "lambda_") || strstr(ft->name, "subln") ? " (is __metadata__.arch right?)"
                                                                                      : "");
            goto done;
        }
        if (ft->dtype != DA_ST_F32 && ft->dtype != DA_ST_BF16) {
            st = da_errorf("%s: tensor %s has dtype %s, expected F32 or BF16", path, ft->name,
                           da_st_dtype_name(ft->dtype));
            goto done;
        }
        int same = ft->ndim == t->ndim;
        for (int k = 0; same && k < t->ndim; k++) same = ft->shape[k] == t->shape[k];
        if (!same) {
            char got[128] = "[", want[64];
            for (int k = 0; k < ft->ndim; k++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "", (long long)ft->shape[k]);
            strncat(got, "]", sizeof got - strlen(got) - 1);
            if (t->ndim == 2) snprintf(want, sizeof want, "[%d, %d]", t->shape[0], t->shape[1]);
            else snprintf(want, sizeof want, "[%d]", t->shape[0]);
            st = da_errorf("%s: tensor %s has shape %s, expected %s%s", path, ft->name, got, want, shape_hint(ft->name));
            goto done;
        }
        if ((st = da_st_read_f32(&f, ft, m->params + t->offset)).code) goto done;
    }
    const char *tok_json = da_st_meta_get(&f, DA_TOKENIZER_META_KEY);
    if (tok_json && !(m->tokenizer_json = strdup(tok_json))) st = da_errorf("%s: out of memory", path);
    for (int i = 0; !st.code && i < m->n_tensors; i++) {
        if (!da_st_find(&f, m->tensors[i].name)) {
            st = da_errorf("%s: missing tensor %s%s", path, m->tensors[i].name,
                           !strcmp(m->tensors[i].name, "output.weight") ? " (set tie_embeddings=true if the head is tied)"
                                                                        : "");
            goto done;
        }
    }
done:
    da_st_close(&f);
    if (st.code) da_model_free(m);
    return st;
}

void da_config_to_meta(const da_config *c, da_config_meta *cm) {
    cm->keys[0] = "format";
    cm->vals[0] = "diffattn";
    cm->keys[1] = "version";
    snprintf(cm->buf[1], sizeof cm->buf[1], "%d", DA_FORMAT_VERSION);
    cm->vals[1] = cm->buf[1];
    cm->n = 2;
    for (int i = 0; i < DA_CONFIG_N_FIELDS; i++) {
        const da_field *fd = &da_config_fields[i];
        if (!da_config_field_written(c, i)) continue;
        cm->keys[cm->n] = fd->key;
        da_field_format(fd, c, cm->buf[cm->n], sizeof cm->buf[cm->n]);
        cm->vals[cm->n] = cm->buf[cm->n];
        cm->n++;
    }
}

da_status da_model_save(const da_model *m, const char *path) {
    const da_config *c = &m->cfg;
    da_st_write_tensor *ts = calloc((size_t)m->n_tensors, sizeof *ts);
    if (!ts) return da_errorf("%s: out of memory", path);
    for (int i = 0; i < m->n_tensors; i++) {
        const da_tensor *t = &m->tensors[i];
        ts[i].name = t->name;
        ts[i].ndim = t->ndim;
        ts[i].shape[0] = t->shape[0];
        ts[i].shape[1] = t->shape[1];
        ts[i].data = m->params + t->offset;
    }
    da_config_meta cm;
    da_config_to_meta(c, &cm);
    /* the tokenizer travels with the model, after the configuration keys */
    const char *keys[DA_CONFIG_META_N + 1], *vals[DA_CONFIG_META_N + 1];
    memcpy(keys, cm.keys, sizeof cm.keys);
    memcpy(vals, cm.vals, sizeof cm.vals);
    int n_meta = cm.n;
    if (m->tokenizer_json) {
        keys[n_meta] = DA_TOKENIZER_META_KEY;
        vals[n_meta++] = m->tokenizer_json;
    }
    da_status st = da_st_write(path, ts, m->n_tensors, keys, vals, n_meta);
    free(ts);
    return st;
}
