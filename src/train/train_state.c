/* Saving and loading the training state (see train_state.h), and the
 * configuration a resumed run continues with: the stored settings merged
 * with the ones given now. */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "parallel/dist.h"
#include "train/train_state.h"

/* The stored rows of da_train_config_fields, as "train." + key. */
#define TRAIN_PREFIX "train."
#define MAX_META (DA_CONFIG_META_N + DA_TRAIN_CONFIG_N_FIELDS + 3)

da_status da_train_state_save(const char *path, const da_model *m, const da_adamw *opt, const da_train_config *tc,
                              const da_rng *rng) {
    da_config_meta cm;
    da_config_to_meta(&m->cfg, &cm);
    char tk[DA_TRAIN_CONFIG_N_FIELDS][48], tv[DA_TRAIN_CONFIG_N_FIELDS][40], step[32], rngs[80];
    const char *keys[MAX_META], *vals[MAX_META];
    int n = 0;
    for (int i = 0; i < cm.n; i++, n++) keys[n] = cm.keys[i], vals[n] = cm.vals[i];
    da_train_config def;
    da_train_config_default(&def);
    for (int i = 0; i < DA_TRAIN_CONFIG_N_FIELDS; i++) {
        const da_field *f = &da_train_config_fields[i];
        if (!f->stored || (f->stored == DA_STORED_UNLESS_DEFAULT && da_field_equal(f, tc, &def))) continue;
        snprintf(tk[i], sizeof tk[i], TRAIN_PREFIX "%s", f->key);
        da_field_format(f, tc, tv[i], sizeof tv[i]);
        keys[n] = tk[i], vals[n++] = tv[i];
    }
    snprintf(step, sizeof step, "%ld", opt->step);
    snprintf(rngs, sizeof rngs, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, rng->s[0], rng->s[1],
             rng->s[2], rng->s[3]);
    keys[n] = "step", vals[n++] = step;
    keys[n] = "rng", vals[n++] = rngs;
    /* the model's tokenizer: a run started from a model (--init) on byte text gets none from its data */
    if (m->tokenizer_json) keys[n] = DA_TOKENIZER_META_KEY, vals[n++] = m->tokenizer_json;
    da_st_write_tensor ts[3] = {
        {"params", 1, {(int64_t)m->n_params}, m->params},
        {"adam.m", 1, {(int64_t)m->n_params}, opt->m},
        {"adam.v", 1, {(int64_t)m->n_params}, opt->v},
    };
    return da_st_write(path, ts, 3, keys, vals, n);
}

static const char *meta_get(const da_st_file *f, const char *key, da_status *st) {
    const char *s = da_st_meta_get(f, key);
    if (!s) *st = da_errorf("%s: __metadata__ lacks \"%s\" (not a diffattn training state?)", f->path, key);
    return s;
}

static da_status read_rng(const da_st_file *f, da_rng *rng) {
    const char *r = da_st_meta_get(f, "rng");
    if (!r || strlen(r) != 64) return da_errorf("%s: __metadata__.rng is missing or not 64 hex digits", f->path);
    for (int i = 0; i < 4; i++) {
        char part[17];
        memcpy(part, r + 16 * i, 16);
        part[16] = 0;
        char *end;
        rng->s[i] = strtoull(part, &end, 16);
        if (*end) return da_errorf("%s: __metadata__.rng is not hexadecimal", f->path);
    }
    return da_ok();
}

static da_status train_from_meta(const da_st_file *f, da_train_config *tc, long *step, da_rng *rng) {
    da_status st = da_ok();
    da_train_config_default(tc); /* fields not stored (deterministic, zero) read as their defaults */
    for (int i = 0; i < DA_TRAIN_CONFIG_N_FIELDS; i++) {
        const da_field *fd = &da_train_config_fields[i];
        if (!fd->stored) continue;
        char key[48];
        snprintf(key, sizeof key, TRAIN_PREFIX "%s", fd->key);
        /* a run from before such a field was added holds its default */
        if (fd->stored == DA_STORED_UNLESS_DEFAULT && !da_st_meta_get(f, key)) continue;
        const char *s = meta_get(f, key, &st);
        if (!s) return st;
        if ((st = da_field_parse(fd, tc, s)).code) return da_errorf("%s: __metadata__.%s = %s", f->path, key, st.msg);
    }
    const char *s = meta_get(f, "step", &st);
    if (!s) return st;
    char *end;
    errno = 0;
    *step = strtol(s, &end, 10);
    if (errno || end == s || *end) return da_errorf("%s: __metadata__.step = \"%s\" is not an integer", f->path, s);
    st = da_train_config_validate(tc);
    if (st.code) return da_errorf("%s: stored training config is invalid: %s", f->path, st.msg);
    if (*step < 0) return da_errorf("%s: __metadata__.step is negative", f->path);
    return rng ? read_rng(f, rng) : da_ok();
}

static da_status read_flat(const da_st_file *f, const char *name, size_t n, float *out) {
    const da_st_tensor *t = da_st_find(f, name);
    if (!t) return da_errorf("%s: missing tensor %s", f->path, name);
    if (t->ndim != 1 || t->numel != n)
        return da_errorf("%s: tensor %s has %zu values, expected %zu (n_params of the stored config)", f->path, name,
                         t->numel, n);
    return da_st_read_f32(f, t, out);
}

da_status da_train_state_load(const char *path, da_model *m, da_adamw *opt, da_train_config *tc, da_rng *rng) {
    memset(m, 0, sizeof *m);
    memset(opt, 0, sizeof *opt);
    da_st_file f;
    da_status st = da_st_open(&f, path);
    if (st.code) return st;
    da_config cfg;
    long step = 0;
    if ((st = da_config_from_meta(&f, &cfg)).code) goto done;
    if ((st = train_from_meta(&f, tc, &step, rng)).code) goto done;
    /* params, adam.m and adam.v each hold n_params values: check that the
     * file does before allocating from the declared configuration */
    for (int i = 0; i < 3; i++) {
        static const char *names[3] = {"params", "adam.m", "adam.v"};
        const da_st_tensor *t = da_st_find(&f, names[i]);
        if (!t) {
            st = da_errorf("%s: missing tensor %s", path, names[i]);
            goto done;
        }
        if ((st = da_config_check_file_size(&f, &cfg, t->numel)).code) goto done;
    }
    if ((st = da_model_create(m, &cfg)).code) goto done;
    if ((st = da_model_alloc_grads(m)).code) goto done;
    if ((st = da_adamw_create(opt, m->n_params)).code) goto done;
    opt->step = step;
    if ((st = read_flat(&f, "params", m->n_params, m->params)).code) goto done;
    if ((st = read_flat(&f, "adam.m", m->n_params, opt->m)).code) goto done;
    if ((st = read_flat(&f, "adam.v", m->n_params, opt->v)).code) goto done;
    const char *tok_json = da_st_meta_get(&f, DA_TOKENIZER_META_KEY);
    if (tok_json && !(m->tokenizer_json = strdup(tok_json))) st = da_errorf("%s: out of memory", path);
done:
    da_st_close(&f);
    if (st.code) {
        da_model_free(m);
        da_adamw_free(opt);
    }
    return st;
}

da_status da_train_state_peek(const char *out_dir, da_config *model_cfg, da_train_config *tc, long *step) {
    char path[4096];
    snprintf(path, sizeof path, "%s/train_state.safetensors", out_dir);
    da_st_file f;
    da_status st = da_st_open(&f, path);
    if (st.code) return st;
    st = da_config_from_meta(&f, model_cfg);
    if (!st.code) st = train_from_meta(&f, tc, step, NULL);
    da_st_close(&f);
    return st;
}

/* Rank 0's peek at the run folder, sent to every rank. */
static da_status peek_run(const char *out_dir, da_config *cfg, da_train_config *saved, long *step) {
    struct {
        da_status st;
        da_config cfg;
        da_train_config saved;
        long step;
    } peek;
    memset(&peek, 0, sizeof peek);
    if (da_dist_rank() == 0) peek.st = da_train_state_peek(out_dir, &peek.cfg, &peek.saved, &peek.step);
    da_status st = da_dist_bcast(&peek, sizeof peek, "the run's configuration");
    if (st.code) return st;
    if (peek.st.code) {
        /* the other ranks stay quiet: rank 0 reports */
        if (da_dist_rank() != 0) peek.st.code = DA_DIST_PEER_FAILED;
        return peek.st;
    }
    *cfg = peek.cfg, *saved = peek.saved, *step = peek.step;
    return da_ok();
}

/* The model fields given again on resume must be the run's own: the run's
 * config with the given ones put in (heads counted as DIFF heads, as given)
 * must come out equal to it. Repeating the command that started the run is
 * then accepted, and a changed value is an error naming the field. */
static da_status check_model_given(const char *out_dir, const da_config *run, const da_config *given,
                                   const unsigned char *model_given) {
    da_config want = *run;
    int any = 0;
    for (int i = 0; i < DA_CONFIG_N_FIELDS; i++)
        if (model_given[i]) da_field_copy(&da_config_fields[i], &want, given), any = 1;
    if (!any) return da_ok();
    /* back to DIFF heads for the fields the run supplies, then forward again */
    const int per = da_arch_heads(want.arch, 1);
    const da_field *h = da_fields_find(da_config_fields, DA_CONFIG_N_FIELDS, "n_heads");
    const da_field *kv = da_fields_find(da_config_fields, DA_CONFIG_N_FIELDS, "n_kv_heads");
    if (!model_given[h - da_config_fields]) want.n_heads = run->n_heads / per;
    if (!model_given[kv - da_config_fields]) want.n_kv_heads = run->n_kv_heads / per;
    da_status st = da_config_from_diff_heads(&want);
    for (int i = 0; i < DA_CONFIG_N_FIELDS && !st.code; i++) {
        const da_field *f = &da_config_fields[i];
        if (f->on_resume != DA_RESUME_FIXED || da_field_equal(f, &want, run)) continue;
        char was[64], now[64];
        da_field_format(f, run, was, sizeof was);
        da_field_format(f, &want, now, sizeof now);
        return da_errorf("%s: %s, but the run in %s has %s; a model field cannot change when resuming", f->key, now,
                         out_dir, was);
    }
    if (st.code) return da_errorf("%s: the model flags given do not make the run's model: %s", out_dir, st.msg);
    return da_ok();
}

da_status da_train_resume_config(const char *out_dir, const da_config *given, const unsigned char *model_given,
                                 const unsigned char *train_given, da_config *cfg, da_train_config *tc, long *step) {
    da_train_config saved;
    da_status st = peek_run(out_dir, cfg, &saved, step);
    if (st.code) {
        if (st.code == DA_DIST_PEER_FAILED) return st;
        return da_errorf("%s (is %s a run folder? to start a new run, do not resume)", st.msg, out_dir);
    }
    if (model_given && (st = check_model_given(out_dir, cfg, given, model_given)).code) return st;
    for (int i = 0; i < DA_TRAIN_CONFIG_N_FIELDS; i++) {
        const da_field *f = &da_train_config_fields[i];
        const int take = !f->stored || (train_given && train_given[i] && f->on_resume == DA_RESUME_MAY_CHANGE);
        if (!take) da_field_copy(f, tc, &saved);
    }
    return da_ok();
}
