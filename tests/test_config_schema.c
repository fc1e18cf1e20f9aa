/* The configuration tables (da_config_fields, da_train_config_fields): the
 * defaults, range checks, checkpoint metadata and resume rules they drive. */
#include <math.h>
#include <unistd.h>

#include "diffattn.h"
#include "harness.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "train/train_state.h"

static char dir[64];

/* The defaults from before the tables, pinned: a table row that changes one
 * changes every run that relies on it. */
static int test_defaults_unchanged(void) {
    da_config c;
    da_config_default(&c);
    CHECK(c.arch == DA_ARCH_DIFF && c.dim == 256 && c.n_layers == 4 && c.n_heads == 4 && c.n_kv_heads == 4);
    CHECK(c.vocab_size == 256 && c.ffn_hidden == 704 && c.max_seq_len == 256 && c.tie_embeddings == 0);
    CHECK(c.norm_eps == 1e-5f && c.rope_theta == 10000.0f);
    da_train_config t;
    da_train_config_default(&t);
    CHECK(t.batch == 8 && t.seq == 256 && t.grad_accum == 1 && t.steps == 500 && t.warmup == 50);
    CHECK(t.lr == 1e-3f && t.min_lr == 1e-4f && t.weight_decay == 0.1f && t.clip == 1.0f);
    CHECK(t.beta1 == 0.9f && t.beta2 == 0.95f && t.adam_eps == 1e-8f);
    CHECK(t.eval_every == 100 && t.eval_batches == 4 && t.save_every == 100 && t.log_every == 10);
    CHECK(t.seed == 1337 && t.val_fraction == 0.1f && t.bf16 == 0 && t.deterministic == 0 && t.zero == 0);
    CHECK(!da_config_validate(&c).code && !da_train_config_validate(&t).code);
    return 0;
}

/* Sets row f of obj just below its range (or at lo when lo is excluded). */
static void set_below(const da_field *f, void *obj) {
    char *p = (char *)obj + f->offset;
    const int open = f->bounds[0] == '(';
    switch (f->type) {
    case DA_FIELD_INT: *(int *)p = (int)f->lo - !open; break;
    case DA_FIELD_LONG: *(long *)p = (long)f->lo - !open; break;
    case DA_FIELD_FLOAT: *(float *)p = open ? (float)f->lo : nextafterf((float)f->lo, -INFINITY); break;
    default: break;
    }
}

/* Every bounded row is checked, and the message names the field first. */
static int check_rows(const da_field *fields, int n, const void *valid, size_t size,
                      da_status (*validate)(const void *)) {
    int checked = 0;
    for (int i = 0; i < n; i++) {
        const da_field *f = &fields[i];
        if (f->type == DA_FIELD_U64 || f->type == DA_FIELD_ENUM || f->type == DA_FIELD_BOOL || !isfinite(f->lo))
            continue;
        char obj[512];
        CHECK(size <= sizeof obj);
        memcpy(obj, valid, size);
        set_below(f, obj);
        da_status st = validate(obj);
        size_t len = strlen(f->key);
        if (!st.code || strncmp(st.msg, f->key, len) || st.msg[len] != ':') {
            fprintf(stderr, "  %s below its range: %s\n", f->key, st.code ? st.msg : "accepted");
            return 1;
        }
        checked++;
    }
    CHECK(checked > 0);
    return 0;
}

static da_status validate_model(const void *c) { return da_config_validate(c); }
static da_status validate_train(const void *c) { return da_train_config_validate(c); }

static int test_every_range_is_checked(void) {
    da_config c;
    da_config_default(&c);
    da_train_config t;
    da_train_config_default(&t);
    if (check_rows(da_config_fields, DA_CONFIG_N_FIELDS, &c, sizeof c, validate_model)) return 1;
    return check_rows(da_train_config_fields, DA_TRAIN_CONFIG_N_FIELDS, &t, sizeof t, validate_train);
}

/* --heads counts DIFF heads: softmax gets twice as many, GQA groups too; the
 * range check quotes the count as given. */
static int test_from_diff_heads(void) {
    da_config c;
    da_config_default(&c);
    c.arch = DA_ARCH_SOFTMAX, c.n_heads = 4, c.n_kv_heads = 0, c.ffn_hidden = 0, c.dim = 128;
    CHECK(!da_config_from_diff_heads(&c).code);
    CHECK(c.n_heads == 8 && c.n_kv_heads == 8 && c.ffn_hidden == da_default_ffn_hidden(128));
    da_config_default(&c);
    c.arch = DA_ARCH_SOFTMAX, c.n_heads = 4, c.n_kv_heads = 2;
    CHECK(!da_config_from_diff_heads(&c).code && c.n_heads == 8 && c.n_kv_heads == 4);
    da_config_default(&c);
    c.n_kv_heads = 0;
    CHECK(!da_config_from_diff_heads(&c).code && c.n_heads == 4 && c.n_kv_heads == 4);
    CHECK(da_arch_heads(DA_ARCH_SOFTMAX, 3) == 6 && da_arch_heads(DA_ARCH_DIFF, 3) == 3);
    da_config_default(&c);
    c.arch = DA_ARCH_SOFTMAX, c.n_heads = -1;
    da_status st = da_config_from_diff_heads(&c);
    CHECK(st.code && strstr(st.msg, "n_heads: -1 must lie in"));
    return 0;
}

/* The metadata keys, in order, are those of checkpoints written before the
 * tables: old files load, and a model file's bytes do not change. */
static int test_metadata_keys_unchanged(void) {
    static const char *model_keys[] = {"format",     "version",    "arch",     "dim",        "n_layers",
                                       "n_heads",    "n_kv_heads", "vocab_size", "ffn_hidden", "norm_eps",
                                       "rope_theta", "max_seq_len", "tie_embeddings"};
    static const char *train_keys[] = {"batch",       "seq",          "grad_accum", "steps",     "warmup",
                                       "lr",          "min_lr",       "weight_decay", "clip",    "beta1",
                                       "beta2",       "adam_eps",     "eval_every", "eval_batches", "save_every",
                                       "log_every",   "seed",         "val_fraction", "bf16"};
    da_config c;
    da_config_default(&c);
    da_config_meta cm;
    da_config_to_meta(&c, &cm);
    CHECK(cm.n == 13); /* a field that is off by default (window) is written only when set */
    for (int i = 0; i < 13; i++) CHECK(!strcmp(cm.keys[i], model_keys[i]));
    CHECK(!strcmp(cm.vals[9], "1e-05") && !strcmp(cm.vals[10], "10000") && !strcmp(cm.vals[12], "false"));
    c.window = 64;
    da_config_to_meta(&c, &cm);
    CHECK(cm.n == 14 && !strcmp(cm.keys[13], "window") && !strcmp(cm.vals[13], "64"));
    int k = 0;
    for (int i = 0; i < DA_TRAIN_CONFIG_N_FIELDS; i++) {
        if (da_train_config_fields[i].stored != 1) continue; /* DA_STORED_UNLESS_DEFAULT: absent at the default */
        CHECK(k < 19 && !strcmp(da_train_config_fields[i].key, train_keys[k]));
        k++;
    }
    CHECK(k == 19);
    return 0;
}

static void tiny(da_config *c) {
    da_config_default(c);
    c->dim = 16, c->n_layers = 1, c->n_heads = 2, c->n_kv_heads = 2, c->vocab_size = 8, c->ffn_hidden = 32;
    c->max_seq_len = 8;
}

/* A run folder holding a training state with tc. */
static int write_state(const char *run_dir, const da_train_config *tc) {
    char path[256];
    snprintf(path, sizeof path, "mkdir -p %s", run_dir);
    CHECK(system(path) == 0);
    da_config c;
    tiny(&c);
    da_model m;
    da_adamw opt;
    CHECK(!da_model_create(&m, &c).code && !da_adamw_create(&opt, m.n_params).code);
    opt.step = 7;
    da_rng rng;
    da_rng_seed(&rng, 5);
    snprintf(path, sizeof path, "%s/train_state.safetensors", run_dir);
    da_status st = da_train_state_save(path, &m, &opt, tc, &rng);
    da_model_free(&m);
    da_adamw_free(&opt);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    return st.code;
}

/* Every stored field survives a save and a load; the others read as defaults. */
static int test_train_state_round_trip(void) {
    da_train_config t, back, def;
    da_train_config_default(&def);
    t = def;
    t.batch = 6, t.seq = 8, t.grad_accum = 3, t.steps = 123, t.warmup = 7, t.lr = 3.3e-4f, t.min_lr = 1.1e-5f;
    t.weight_decay = 0.05f, t.clip = 0.7f, t.beta1 = 0.8f, t.beta2 = 0.99f, t.adam_eps = 1e-7f, t.eval_every = 9;
    t.eval_batches = 2, t.save_every = 11, t.log_every = 3, t.seed = 0xfedcba9876543210ULL, t.val_fraction = 0.25f;
    t.deterministic = 1, t.zero = 1;
    char run_dir[128];
    snprintf(run_dir, sizeof run_dir, "%s/rt", dir);
    if (write_state(run_dir, &t)) return 1;
    da_config c;
    long step;
    da_status st = da_train_state_peek(run_dir, &c, &back, &step);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(!st.code && step == 7);
    for (int i = 0; i < DA_TRAIN_CONFIG_N_FIELDS; i++) {
        const da_field *f = &da_train_config_fields[i];
        if (!da_field_equal(f, &back, f->stored ? &t : &def)) {
            fprintf(stderr, "  train.%s did not come back\n", f->key);
            return 1;
        }
    }
    return 0;
}

/* A training state as written before the tables (floats as %.9g, bf16 as
 * 0) still loads. */
static int test_old_train_state_loads(void) {
    da_config c;
    tiny(&c);
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    float *zeros = calloc(m.n_params, sizeof(float));
    da_config_meta cm;
    da_config_to_meta(&c, &cm);
    const char *keys[64], *vals[64];
    int n = 0;
    for (int i = 0; i < cm.n; i++, n++) keys[n] = cm.keys[i], vals[n] = cm.vals[i];
    const char *old[][2] = {{"train.batch", "4"},        {"train.seq", "8"},           {"train.grad_accum", "1"},
                            {"train.steps", "30"},       {"train.warmup", "3"},        {"train.lr", "0.00100000005"},
                            {"train.min_lr", "9.99999975e-05"}, {"train.weight_decay", "0.100000001"},
                            {"train.clip", "1"},         {"train.beta1", "0.899999976"}, {"train.beta2", "0.949999988"},
                            {"train.adam_eps", "9.99999994e-09"}, {"train.eval_every", "10"},
                            {"train.eval_batches", "4"}, {"train.save_every", "100"}, {"train.log_every", "10"},
                            {"train.seed", "1337"},      {"train.val_fraction", "0.100000001"}, {"train.bf16", "0"},
                            {"step", "30"},
                            {"rng", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}};
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++, n++) keys[n] = old[i][0], vals[n] = old[i][1];
    da_st_write_tensor ts[3] = {{"params", 1, {(int64_t)m.n_params}, zeros},
                                {"adam.m", 1, {(int64_t)m.n_params}, zeros},
                                {"adam.v", 1, {(int64_t)m.n_params}, zeros}};
    char run_dir[128], path[256];
    snprintf(run_dir, sizeof run_dir, "%s/old", dir);
    snprintf(path, sizeof path, "mkdir -p %s", run_dir);
    CHECK(system(path) == 0);
    snprintf(path, sizeof path, "%s/train_state.safetensors", run_dir);
    da_status st = da_st_write(path, ts, 3, keys, vals, n);
    free(zeros);
    da_model_free(&m);
    CHECK(!st.code);
    da_train_config t;
    long step;
    st = da_train_state_peek(run_dir, &c, &t, &step);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(!st.code && step == 30 && t.batch == 4 && t.steps == 30 && t.lr == 1e-3f && t.min_lr == 1e-4f);
    CHECK(t.beta2 == 0.95f && t.adam_eps == 1e-8f && t.bf16 == 0 && t.seed == 1337 && t.val_fraction == 0.1f);
    return 0;
}

/* Resume: a given field that may change is taken, an ignored one is not, a
 * field the checkpoint does not store comes from the caller, and a model
 * field given again is accepted when it is the run's and refused by name
 * otherwise. */
static int test_resume_rules(void) {
    da_train_config saved;
    da_train_config_default(&saved);
    saved.batch = 4, saved.seq = 8, saved.steps = 20, saved.lr = 2e-3f, saved.seed = 99;
    char run_dir[128];
    snprintf(run_dir, sizeof run_dir, "%s/resume", dir);
    if (write_state(run_dir, &saved)) return 1;
    unsigned char mg[DA_CONFIG_N_FIELDS] = {0}, tg[DA_TRAIN_CONFIG_N_FIELDS] = {0};
    da_train_config now;
    da_train_config_default(&now);
    now.steps = 40, now.seed = 5, now.deterministic = 1, now.lr = 7e-4f;
    const da_field *steps = da_fields_find(da_train_config_fields, DA_TRAIN_CONFIG_N_FIELDS, "steps");
    const da_field *seed = da_fields_find(da_train_config_fields, DA_TRAIN_CONFIG_N_FIELDS, "seed");
    tg[steps - da_train_config_fields] = 1;
    tg[seed - da_train_config_fields] = 1; /* given, but the sampler state decides: ignored */
    da_config c, given;
    da_fields_default(da_config_fields, DA_CONFIG_N_FIELDS, &given);
    long step;
    da_status st = da_train_resume_config(run_dir, &given, mg, tg, &c, &now, &step);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(!st.code && step == 7 && c.dim == 16);
    CHECK(now.steps == 40);            /* given, may change */
    CHECK(now.seed == 99);             /* given, ignored */
    CHECK(now.lr == 2e-3f);            /* not given: the run's */
    CHECK(now.batch == 4 && now.seq == 8);
    CHECK(now.deterministic == 1);     /* not stored: the caller's */
    mg[1] = 1;                         /* dim, as the run has it: accepted */
    given.dim = 16;
    CHECK(!da_train_resume_config(run_dir, &given, mg, tg, &c, &now, &step).code);
    given.dim = 64;                    /* another width: refused by name */
    st = da_train_resume_config(run_dir, &given, mg, tg, &c, &now, &step);
    CHECK(st.code && !strncmp(st.msg, "dim: 64, but the run", 20));
    memset(mg, 0, sizeof mg);
    snprintf(run_dir, sizeof run_dir, "%s/none", dir);
    st = da_train_resume_config(run_dir, &given, mg, tg, &c, &now, &step);
    CHECK(st.code && strstr(st.msg, "run folder"));
    return 0;
}

/* train's flags are the rows of both tables: each flag names one field, a
 * key is unique in its table, and every row has a help line for --help. */
static int test_flags_unique(void) {
    const da_field *rows[DA_CONFIG_N_FIELDS + DA_TRAIN_CONFIG_N_FIELDS];
    int n = 0;
    for (int i = 0; i < DA_CONFIG_N_FIELDS; i++) rows[n++] = &da_config_fields[i];
    for (int i = 0; i < DA_TRAIN_CONFIG_N_FIELDS; i++) rows[n++] = &da_train_config_fields[i];
    for (int i = 0; i < n; i++) {
        CHECK(rows[i]->help && rows[i]->help[0]);
        for (int j = 0; j < i; j++) {
            if (!strcmp(rows[i]->key, rows[j]->key) && (i < DA_CONFIG_N_FIELDS) == (j < DA_CONFIG_N_FIELDS)) {
                fprintf(stderr, "  key %s twice\n", rows[i]->key);
                return 1;
            }
            if (rows[i]->flag && rows[j]->flag && !strcmp(rows[i]->flag, rows[j]->flag)) {
                fprintf(stderr, "  flag --%s names both %s and %s\n", rows[i]->flag, rows[j]->key, rows[i]->key);
                return 1;
            }
        }
    }
    return 0;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/da_schema_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_defaults_unchanged);
    RUN(test_every_range_is_checked);
    RUN(test_from_diff_heads);
    RUN(test_metadata_keys_unchanged);
    RUN(test_train_state_round_trip);
    RUN(test_old_train_state_loads);
    RUN(test_resume_rules);
    RUN(test_flags_unique);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    TH_SUMMARY();
}
