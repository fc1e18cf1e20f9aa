/* Saving and loading the training state (see train_state.h). */
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
#include "train/train_state.h"

#define N_TRAIN_KEYS 19

/* Training config <-> strings; floats with %.9g so they read back exactly. */
static void train_to_strings(const da_train_config *tc, char v[N_TRAIN_KEYS][40]) {
    snprintf(v[0], 40, "%d", tc->batch);
    snprintf(v[1], 40, "%d", tc->seq);
    snprintf(v[2], 40, "%d", tc->grad_accum);
    snprintf(v[3], 40, "%ld", tc->steps);
    snprintf(v[4], 40, "%ld", tc->warmup);
    snprintf(v[5], 40, "%.9g", (double)tc->lr);
    snprintf(v[6], 40, "%.9g", (double)tc->min_lr);
    snprintf(v[7], 40, "%.9g", (double)tc->weight_decay);
    snprintf(v[8], 40, "%.9g", (double)tc->clip);
    snprintf(v[9], 40, "%.9g", (double)tc->beta1);
    snprintf(v[10], 40, "%.9g", (double)tc->beta2);
    snprintf(v[11], 40, "%.9g", (double)tc->adam_eps);
    snprintf(v[12], 40, "%ld", tc->eval_every);
    snprintf(v[13], 40, "%d", tc->eval_batches);
    snprintf(v[14], 40, "%ld", tc->save_every);
    snprintf(v[15], 40, "%ld", tc->log_every);
    snprintf(v[16], 40, "%" PRIu64, tc->seed);
    snprintf(v[17], 40, "%.9g", (double)tc->val_fraction);
    snprintf(v[18], 40, "%d", tc->bf16);
}

static const char *train_keys[N_TRAIN_KEYS] = {
    "train.batch", "train.seq", "train.grad_accum", "train.steps", "train.warmup", "train.lr",
    "train.min_lr", "train.weight_decay", "train.clip", "train.beta1", "train.beta2", "train.adam_eps",
    "train.eval_every", "train.eval_batches", "train.save_every", "train.log_every", "train.seed",
    "train.val_fraction", "train.bf16"};

da_status da_train_state_save(const char *path, const da_model *m, const da_adamw *opt, const da_train_config *tc,
                              const da_rng *rng) {
    da_config_meta cm;
    da_config_to_meta(&m->cfg, &cm);
    char tv[N_TRAIN_KEYS][40], step[32], rngs[80];
    train_to_strings(tc, tv);
    snprintf(step, sizeof step, "%ld", opt->step);
    snprintf(rngs, sizeof rngs, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, rng->s[0], rng->s[1],
             rng->s[2], rng->s[3]);
    const char *keys[DA_CONFIG_META_N + N_TRAIN_KEYS + 2], *vals[DA_CONFIG_META_N + N_TRAIN_KEYS + 2];
    int n = 0;
    for (int i = 0; i < DA_CONFIG_META_N; i++, n++) keys[n] = cm.keys[i], vals[n] = cm.vals[i];
    for (int i = 0; i < N_TRAIN_KEYS; i++, n++) keys[n] = train_keys[i], vals[n] = tv[i];
    keys[n] = "step", vals[n++] = step;
    keys[n] = "rng", vals[n++] = rngs;
    da_st_write_tensor ts[3] = {
        {"params", 1, {(int64_t)m->n_params}, m->params},
        {"adam.m", 1, {(int64_t)m->n_params}, opt->m},
        {"adam.v", 1, {(int64_t)m->n_params}, opt->v},
    };
    return da_st_write(path, ts, 3, keys, vals, n);
}

/* How each train_keys entry is stored in da_train_config. */
typedef enum { AS_INT, AS_LONG, AS_FLOAT } num_kind;
static const num_kind train_kinds[N_TRAIN_KEYS] = {
    AS_INT,   AS_INT,   AS_INT,   AS_LONG,  AS_LONG,  AS_FLOAT, AS_FLOAT, AS_FLOAT, AS_FLOAT, AS_FLOAT,
    AS_FLOAT, AS_FLOAT, AS_LONG,  AS_INT,   AS_LONG,  AS_LONG,  AS_LONG,  AS_FLOAT, AS_INT};

/* A metadata value as a number that fits its field: an integer within the
 * range of an int or a long, or a finite float. Converting anything else is
 * undefined behaviour in C, and a file may hold anything. */
static da_status meta_number(const da_st_file *f, const char *key, num_kind kind, double *out) {
    const char *s = da_st_meta_get(f, key);
    if (!s) return da_errorf("%s: __metadata__ lacks \"%s\" (not a diffattn training state?)", f->path, key);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return da_errorf("%s: __metadata__.%s = \"%.40s\" is not a finite number", f->path, key, s);
    if (kind == AS_FLOAT && fabs(v) > FLT_MAX)
        return da_errorf("%s: __metadata__.%s = \"%.40s\" is out of range for a float", f->path, key, s);
    const double lo = kind == AS_INT ? INT_MIN : -9.2e18, hi = kind == AS_INT ? INT_MAX : 9.2e18;
    if (kind != AS_FLOAT && (v != floor(v) || v < lo || v > hi))
        return da_errorf("%s: __metadata__.%s = \"%.40s\" is not an integer in [%.0f, %.0f]", f->path, key, s, lo,
                         hi);
    *out = v;
    return da_ok();
}

static da_status train_from_meta(const da_st_file *f, da_train_config *tc, long *step, da_rng *rng) {
    double v[N_TRAIN_KEYS + 1];
    da_status st;
    memset(tc, 0, sizeof *tc); /* fields not stored (deterministic, zero) read as 0 */
    for (int i = 0; i < N_TRAIN_KEYS; i++)
        if ((st = meta_number(f, train_keys[i], train_kinds[i], &v[i])).code) return st;
    if ((st = meta_number(f, "step", AS_LONG, &v[N_TRAIN_KEYS])).code) return st;
    tc->batch = (int)v[0];
    tc->seq = (int)v[1];
    tc->grad_accum = (int)v[2];
    tc->steps = (long)v[3];
    tc->warmup = (long)v[4];
    tc->lr = (float)v[5];
    tc->min_lr = (float)v[6];
    tc->weight_decay = (float)v[7];
    tc->clip = (float)v[8];
    tc->beta1 = (float)v[9];
    tc->beta2 = (float)v[10];
    tc->adam_eps = (float)v[11];
    tc->eval_every = (long)v[12];
    tc->eval_batches = (int)v[13];
    tc->save_every = (long)v[14];
    tc->log_every = (long)v[15];
    /* the seed is a u64: re-read it as one, not through a double */
    const char *seed = da_st_meta_get(f, "train.seed");
    char *end;
    errno = 0;
    tc->seed = strtoull(seed, &end, 10);
    if (errno || *end || seed[0] == '-')
        return da_errorf("%s: __metadata__.train.seed = \"%.40s\" is not an unsigned 64-bit integer", f->path, seed);
    tc->val_fraction = (float)v[17];
    tc->bf16 = (int)v[18];
    *step = (long)v[N_TRAIN_KEYS];
    st = da_train_config_validate(tc);
    if (st.code) return da_errorf("%s: stored training config is invalid: %s", f->path, st.msg);
    if (*step < 0) return da_errorf("%s: __metadata__.step is negative", f->path);
    if (rng) {
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
    }
    return da_ok();
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
