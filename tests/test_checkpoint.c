/* Model files: save/load round trips, BF16 loading, and a clear error (never
 * a crash) for every malformed file the core issue lists. */
#include <unistd.h>

#include "diffattn.h"
#include "harness.h"
#include "io/safetensors.h"

static char dir[64];

static void tiny_config(da_config *c, da_arch arch, int tied) {
    da_config_default(c);
    c->arch = arch;
    c->dim = 32;
    c->n_layers = 2;
    c->n_heads = arch == DA_ARCH_DIFF ? 2 : 4;
    c->n_kv_heads = c->n_heads / 2;
    c->vocab_size = 40;
    c->ffn_hidden = 64;
    c->max_seq_len = 16;
    c->tie_embeddings = tied;
}

static const char *tmp_path(const char *name) {
    static char buf[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Expects loading path to fail with a message containing want. */
static int expect_load_error(const char *path, const char *want) {
    da_model m;
    da_status st = da_model_load(&m, path);
    if (!st.code) {
        fprintf(stderr, "  %s loaded, expected an error containing \"%s\"\n", path, want);
        da_model_free(&m);
        return 1;
    }
    if (!strstr(st.msg, want) || strchr(st.msg, '\n')) {
        fprintf(stderr, "  error \"%s\" lacks \"%s\" (or is not one line)\n", st.msg, want);
        return 1;
    }
    return 0;
}

static int round_trip_w(da_arch arch, int tied, int window) {
    da_config c;
    tiny_config(&c, arch, tied);
    c.window = window;
    da_model a, b;
    CHECK(!da_model_create(&a, &c).code);
    da_model_init(&a, 5);
    const char *p = tmp_path("rt.safetensors");
    CHECK(!da_model_save(&a, p).code);
    da_status st = da_model_load(&b, p);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    CHECK(!memcmp(&a.cfg, &b.cfg, sizeof a.cfg));
    CHECK(a.n_params == b.n_params);
    CHECK(!memcmp(a.params, b.params, a.n_params * sizeof(float)));
    /* a full-attention file has no "window" key (so files from before it read the same) */
    da_st_file f;
    CHECK(!da_st_open(&f, p).code);
    CHECK((da_st_meta_get(&f, "window") != NULL) == (window > 0));
    da_st_close(&f);
    da_model_free(&a);
    da_model_free(&b);
    return 0;
}

static int round_trip(da_arch arch, int tied) { return round_trip_w(arch, tied, 0); }

static int test_round_trip_diff(void) { return round_trip(DA_ARCH_DIFF, 0); }
static int test_round_trip_diff2_window(void) { return round_trip_w(DA_ARCH_DIFF2, 0, 5); }
static int test_round_trip_softmax_tied(void) { return round_trip(DA_ARCH_SOFTMAX, 1); }

/* NSA's hyper-parameters are fields of its files, at any value (defaults
 * included), and of no other arch's (whose files keep their bytes); the
 * shared K/V flag, added later, only when set (older files keep theirs). */
static int test_round_trip_nsa(void) {
    for (int k = 0; k < 3; k++) {
        da_config c;
        tiny_config(&c, DA_ARCH_NSA, k == 1);
        if (k) c.nsa_block = 8, c.nsa_stride = 4, c.nsa_select = 8, c.nsa_topn = 5, c.nsa_window = 7;
        c.nsa_shared_kv = k == 2;
        da_model a, b;
        CHECK(!da_model_create(&a, &c).code);
        da_model_init(&a, 5);
        const char *p = tmp_path("nsa.safetensors");
        CHECK(!da_model_save(&a, p).code);
        da_status st = da_model_load(&b, p);
        if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
        CHECK(!memcmp(&a.cfg, &b.cfg, sizeof a.cfg) && b.cfg.nsa_topn == (k ? 5 : 16));
        CHECK(a.n_params == b.n_params && !memcmp(a.params, b.params, a.n_params * sizeof(float)));
        da_st_file f;
        CHECK(!da_st_open(&f, p).code);
        CHECK(da_st_meta_get(&f, "nsa_block") && da_st_meta_get(&f, "nsa_window"));
        CHECK(!da_st_meta_get(&f, "nsa_shared_kv") == (k != 2) && b.cfg.nsa_shared_kv == (k == 2));
        CHECK(!da_st_find(&f, "layers.0.attn.k_proj.weight") == (k != 2) &&
              !da_st_find(&f, "layers.0.attn.k_slc.weight") == (k == 2));
        da_st_close(&f);
        da_model_free(&a);
        da_model_free(&b);
    }
    da_config c;
    tiny_config(&c, DA_ARCH_SOFTMAX, 0);
    da_model a;
    CHECK(!da_model_create(&a, &c).code);
    CHECK(!da_model_save(&a, tmp_path("sm.safetensors")).code);
    da_st_file f;
    CHECK(!da_st_open(&f, tmp_path("sm.safetensors")).code);
    CHECK(!da_st_meta_get(&f, "nsa_block") && !da_st_meta_get(&f, "nsa_topn"));
    da_st_close(&f);
    da_model_free(&a);
    /* the constraints name the field */
    tiny_config(&c, DA_ARCH_NSA, 0);
    c.nsa_stride = 40;
    da_status st = da_config_validate(&c);
    CHECK(st.code && strstr(st.msg, "nsa_block"));
    tiny_config(&c, DA_ARCH_NSA, 0);
    c.nsa_topn = 2;
    st = da_config_validate(&c);
    CHECK(st.code && strstr(st.msg, "nsa_topn"));
    tiny_config(&c, DA_ARCH_NSA, 0);
    c.nsa_select = 16;
    st = da_config_validate(&c);
    CHECK(st.code && strstr(st.msg, "nsa_select"));
    return 0;
}

/* Writes m's tensors with one change: drop `skip`, add `extra`, or replace
 * the shape of `reshape`; meta_key/meta_val override one metadata entry. */
typedef struct {
    const char *skip, *extra, *reshape, *meta_key, *meta_val;
} edit;

static int write_edited(const da_model *m, const char *path, edit e) {
    da_st_write_tensor ts[64];
    int n = 0;
    static float extra_data[1024];
    for (int i = 0; i < m->n_tensors; i++) {
        const da_tensor *t = &m->tensors[i];
        if (e.skip && !strcmp(e.skip, t->name)) continue;
        ts[n] = (da_st_write_tensor){t->name, t->ndim, {t->shape[0], t->shape[1]}, m->params + t->offset};
        if (e.reshape && !strcmp(e.reshape, t->name)) { /* same numel, other shape */
            ts[n].shape[0] = t->shape[1];
            ts[n].shape[1] = t->shape[0];
        }
        n++;
    }
    if (e.extra) ts[n++] = (da_st_write_tensor){e.extra, 1, {8}, extra_data};
    const char *keys[] = {"format", "version", "arch", "dim", "n_layers", "n_heads", "n_kv_heads",
                          "vocab_size", "ffn_hidden", "norm_eps", "rope_theta", "max_seq_len", "tie_embeddings"};
    char v[8][16];
    const da_config *c = &m->cfg;
    snprintf(v[0], 16, "%d", c->dim);
    snprintf(v[1], 16, "%d", c->n_layers);
    snprintf(v[2], 16, "%d", c->n_heads);
    snprintf(v[3], 16, "%d", c->n_kv_heads);
    snprintf(v[4], 16, "%d", c->vocab_size);
    snprintf(v[5], 16, "%d", c->ffn_hidden);
    snprintf(v[6], 16, "%d", c->max_seq_len);
    const char *vals[] = {"diffattn", "1", da_arch_name(c->arch), v[0], v[1], v[2], v[3], v[4], v[5],
                          "1e-05", "10000", v[6], c->tie_embeddings ? "true" : "false"};
    for (int i = 0; i < 13; i++)
        if (e.meta_key && !strcmp(keys[i], e.meta_key)) vals[i] = e.meta_val;
    return da_st_write(path, ts, n, keys, vals, 13).code;
}

static int edited_error(edit e, const char *want) {
    da_config c;
    tiny_config(&c, DA_ARCH_DIFF, 0);
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    da_model_init(&m, 1);
    const char *p = tmp_path("edited.safetensors");
    CHECK(!write_edited(&m, p, e));
    da_model_free(&m);
    return expect_load_error(p, want);
}

static int test_unchanged_file_loads(void) {
    da_config c;
    tiny_config(&c, DA_ARCH_DIFF, 0);
    da_model m, b;
    CHECK(!da_model_create(&m, &c).code);
    const char *p = tmp_path("plain.safetensors");
    CHECK(!write_edited(&m, p, (edit){0}));
    da_status st = da_model_load(&b, p);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    da_model_free(&b);
    da_model_free(&m);
    return 0;
}

static int test_unknown_tensor(void) { return edited_error((edit){.extra = "layers.0.attn.bias"}, "unknown tensor \"layers.0.attn.bias\""); }
static int test_missing_tensor(void) { return edited_error((edit){.skip = "layers.1.feed_forward.w3.weight"}, "missing tensor layers.1.feed_forward.w3.weight"); }
static int test_misshaped_tensor(void) { return edited_error((edit){.reshape = "layers.0.attn.k_proj.weight"}, "has shape [32, 16], expected [16, 32]"); }
static int test_impossible_dims(void) { return edited_error((edit){.meta_key = "dim", .meta_val = "30"}, "impossible configuration"); }
static int test_zero_layers(void) { return edited_error((edit){.meta_key = "n_layers", .meta_val = "0"}, "n_layers"); }
static int test_huge_vocab(void) { return edited_error((edit){.meta_key = "vocab_size", .meta_val = "99999999999"}, "vocab_size"); }
static int test_not_diffattn(void) { return edited_error((edit){.meta_key = "format", .meta_val = "pt"}, "not a diffattn model"); }
static int test_bad_version(void) { return edited_error((edit){.meta_key = "version", .meta_val = "7"}, "version 7"); }
static int test_bad_arch(void) { return edited_error((edit){.meta_key = "arch", .meta_val = "mamba"}, "arch"); }
static int test_bad_bool(void) { return edited_error((edit){.meta_key = "tie_embeddings", .meta_val = "yes"}, "tie_embeddings"); }
static int test_arch_mismatch(void) {
    /* DIFF tensors under softmax metadata: lambda vectors are unknown there. */
    return edited_error((edit){.meta_key = "arch", .meta_val = "softmax"}, "unknown tensor");
}

static int test_truncated(void) {
    da_config c;
    tiny_config(&c, DA_ARCH_DIFF, 0);
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    const char *p = tmp_path("trunc.safetensors");
    CHECK(!da_model_save(&m, p).code);
    da_model_free(&m);
    FILE *fp = fopen(p, "rb");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fclose(fp);
    int fails = 0;
    /* cut inside the data, inside the header, and inside the length prefix */
    long cuts[] = {size - 1, size / 2, 100, 4, 0};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        CHECK(truncate(p, cuts[i]) == 0);
        fails |= expect_load_error(p, p);
    }
    return fails;
}

static int test_lying_header_length(void) {
    da_config c;
    tiny_config(&c, DA_ARCH_DIFF, 0);
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    const char *p = tmp_path("lying.safetensors");
    CHECK(!da_model_save(&m, p).code);
    da_model_free(&m);
    FILE *fp = fopen(p, "r+b");
    uint64_t n;
    CHECK(fread(&n, 8, 1, fp) == 1);
    n += 1u << 30; /* claims a header far past the end of the file */
    fseek(fp, 0, SEEK_SET);
    fwrite(&n, 8, 1, fp);
    fclose(fp);
    return expect_load_error(p, p);
}

static int test_lying_offsets(void) {
    da_config c;
    tiny_config(&c, DA_ARCH_DIFF, 0);
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    const char *p = tmp_path("offsets.safetensors");
    CHECK(!da_model_save(&m, p).code);
    da_model_free(&m);
    /* Rewrite the first tensor's end offset to a far larger number of the same width. */
    FILE *fp = fopen(p, "r+b");
    char buf[8192];
    size_t got = fread(buf, 1, sizeof buf - 1, fp);
    buf[got] = 0;
    char *off = strstr(buf + 8, "\"data_offsets\":[0,");
    CHECK(off);
    char *num = off + strlen("\"data_offsets\":[0,");
    for (char *q = num; *q >= '0' && *q <= '9'; q++) *q = '9';
    fseek(fp, 0, SEEK_SET);
    fwrite(buf, 1, got, fp);
    fclose(fp);
    return expect_load_error(p, p);
}

static int test_missing_file(void) { return expect_load_error(tmp_path("nope.safetensors"), "nope.safetensors"); }
static int test_directory(void) { return expect_load_error(dir, dir); }

/* A hand-built safetensors file with BF16 tensors loads as the rounded values. */
static int test_bf16_model(void) {
    da_config c;
    tiny_config(&c, DA_ARCH_DIFF, 0);
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    da_model_init(&m, 3);
    /* header */
    char *hdr = malloc(1 << 16);
    int h = snprintf(hdr, 1 << 16, "{\"__metadata__\":{\"format\":\"diffattn\",\"version\":\"1\",\"arch\":\"diff\","
                                   "\"dim\":\"32\",\"n_layers\":\"2\",\"n_heads\":\"2\",\"n_kv_heads\":\"1\","
                                   "\"vocab_size\":\"40\",\"ffn_hidden\":\"64\",\"norm_eps\":\"1e-05\","
                                   "\"rope_theta\":\"10000\",\"max_seq_len\":\"16\",\"tie_embeddings\":\"false\"}");
    size_t off = 0;
    for (int i = 0; i < m.n_tensors; i++) {
        const da_tensor *t = &m.tensors[i];
        if (t->ndim == 2)
            h += snprintf(hdr + h, (1 << 16) - h, ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                          t->name, t->shape[0], t->shape[1], off, off + 2 * t->numel);
        else
            h += snprintf(hdr + h, (1 << 16) - h, ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
                          t->name, t->shape[0], off, off + 2 * t->numel);
        off += 2 * t->numel;
    }
    h += snprintf(hdr + h, (1 << 16) - h, "}");
    while ((8 + h) % 8) hdr[h++] = ' ';
    const char *p = tmp_path("bf16.safetensors");
    FILE *fp = fopen(p, "wb");
    uint64_t hl = (uint64_t)h;
    fwrite(&hl, 8, 1, fp);
    fwrite(hdr, 1, (size_t)h, fp);
    float *want = malloc(m.n_params * sizeof(float));
    for (size_t i = 0; i < m.n_params; i++) {
        uint32_t bits;
        memcpy(&bits, &m.params[i], 4);
        uint16_t top = (uint16_t)(bits >> 16); /* truncation: exactly representable */
        fwrite(&top, 2, 1, fp);
        bits = (uint32_t)top << 16;
        memcpy(&want[i], &bits, 4);
    }
    fclose(fp);
    free(hdr);
    da_model b;
    da_status st = da_model_load(&b, p);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    CHECK(!memcmp(b.params, want, m.n_params * sizeof(float)));
    free(want);
    da_model_free(&b);
    da_model_free(&m);
    return 0;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/da_ckpt_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_round_trip_diff);
    RUN(test_round_trip_diff2_window);
    RUN(test_round_trip_softmax_tied);
    RUN(test_round_trip_nsa);
    RUN(test_unchanged_file_loads);
    RUN(test_bf16_model);
    RUN(test_unknown_tensor);
    RUN(test_missing_tensor);
    RUN(test_misshaped_tensor);
    RUN(test_impossible_dims);
    RUN(test_zero_layers);
    RUN(test_huge_vocab);
    RUN(test_not_diffattn);
    RUN(test_bad_version);
    RUN(test_bad_arch);
    RUN(test_bad_bool);
    RUN(test_arch_mismatch);
    RUN(test_truncated);
    RUN(test_lying_header_length);
    RUN(test_lying_offsets);
    RUN(test_missing_file);
    RUN(test_directory);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    TH_SUMMARY();
}
