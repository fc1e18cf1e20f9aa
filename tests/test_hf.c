/* Hugging Face DiffLlama and Llama folders: logits equal the float64
 * PyTorch port of transformers' eager forward (tools/make_hf_fixtures.py),
 * through every engine (training forward with both attention kernels,
 * KV-cache decoding, the quantized engine at f32); the RoPE rule survives
 * diffattn's own checkpoint and GGUF; bad folders get errors naming the key. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diffattn/generate.h"
#include "diffattn/model.h"
#include "diffattn/quant.h"
#include "harness.h"
#include "io/hf_model.h"

#define TOL 1e-4

typedef struct {
    int T, V;
    int tokens[64];
    float *logits; /* (T, V) */
} expected;

static int load_expected(const char *dir, expected *e) {
    char p[512];
    snprintf(p, sizeof p, "%s/expected.json", dir);
    char *s = (char *)th_read_file(p, NULL);
    if (!s) return 1;
    cJSON *j = cJSON_Parse(s);
    free(s);
    const cJSON *tok = cJSON_GetObjectItem(j, "tokens"), *lg = cJSON_GetObjectItem(j, "logits");
    e->T = cJSON_GetArraySize(tok);
    e->V = cJSON_GetArraySize(lg->child);
    e->logits = malloc((size_t)e->T * e->V * sizeof(float));
    int t = 0;
    for (const cJSON *x = tok->child; x; x = x->next) e->tokens[t++] = x->valueint;
    size_t k = 0;
    for (const cJSON *row = lg->child; row; row = row->next)
        for (const cJSON *x = row->child; x; x = x->next) e->logits[k++] = (float)x->valuedouble;
    cJSON_Delete(j);
    return 0;
}

static int forward_matches(da_model *m, const expected *e, da_attn_kernel kernel, const char *what) {
    da_acts *a;
    da_status st = da_acts_create_ex(&a, &m->cfg, 1, e->T, kernel, NULL);
    CHECK(!st.code);
    da_forward(m, a, e->tokens, NULL, 1, e->T);
    int rc = expect_close_rel(what, da_acts_logits(a), e->logits, (size_t)e->T * e->V, TOL, 0);
    da_acts_free(a);
    return rc;
}

/* The inference engine over m's f32 weights, one token a call (KV cache). */
static int decode_matches(const da_model *m, const expected *e) {
    da_engine *en;
    CHECK(!da_engine_from_model(&en, m).code);
    da_session_opts o = da_session_opts_default();
    o.max_T = e->T;
    da_session *s;
    CHECK(!da_session_create(&s, en, &o).code);
    int rc = 0;
    for (int t = 0; t < e->T && !rc; t++) {
        const float *lg;
        CHECK(!da_session_feed(s, &e->tokens[t], 1, 0, &lg).code);
        char what[64];
        snprintf(what, sizeof what, "decode position %d", t);
        rc = expect_close_rel(what, lg, e->logits + (size_t)t * e->V, (size_t)e->V, TOL, 0);
    }
    da_session_free(s);
    da_engine_free(en);
    return rc;
}

/* The folder quantized to an f32 GGUF (its RoPE keys included), run by the engine. */
static int gguf_matches(const char *dir, const expected *e) {
    char path[] = "/tmp/test_hf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    da_quantize_opts qo;
    da_quantize_opts_default(&qo);
    qo.type = "f32";
    da_status st = da_quantize_file(dir, path, &qo, NULL);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(!st.code);
    da_engine *en;
    CHECK(!da_engine_load(&en, path).code);
    unlink(path);
    da_session *s;
    CHECK(!da_session_create(&s, en, NULL).code);
    const float *lg;
    CHECK(!da_session_feed(s, e->tokens, e->T, 1, &lg).code);
    int rc = expect_close_rel("GGUF (f32) through the engine", lg, e->logits, (size_t)e->T * e->V, TOL, 0);
    da_session_free(s);
    da_engine_free(en);
    return rc;
}

/* Loads fixtures/NAME and checks every engine; arch and n_kv_heads: the
 * native layout expected. */
static int check_folder(const char *name, da_arch arch, int n_heads, int n_kv_heads) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    expected e;
    CHECK(!load_expected(dir, &e));
    da_model m;
    da_status st = da_model_load(&m, dir);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(!st.code);
    CHECK(m.cfg.arch == arch);
    CHECK(m.cfg.n_heads == n_heads);
    CHECK(m.cfg.n_kv_heads == n_kv_heads);
    CHECK(m.cfg.vocab_size == e.V);
    CHECK(m.cfg.rope_freq == DA_ROPE_FREQ_LLAMA);
    int rc = forward_matches(&m, &e, DA_ATTN_FLASH, "forward, flash kernel");
    rc |= forward_matches(&m, &e, DA_ATTN_REFERENCE, "forward, reference kernel");
    rc |= decode_matches(&m, &e);
    rc |= gguf_matches(dir, &e);
    da_model_free(&m);
    free(e.logits);
    return rc;
}

/* MHA, default RoPE, untied, F32 */
static int test_diffllama_mha(void) { return check_folder("hf_diffllama_mha", DA_ARCH_DIFF, 2, 2); }
/* 8 query heads, 4 KV heads: diff heads 0,1 read KV heads (0, 2), 2,3 read (1, 3): two native groups;
 * llama3 scaling, tied, eps 1e-6, BF16, two shards */
static int test_diffllama_gqa(void) { return check_folder("hf_diffllama_gqa", DA_ARCH_DIFF, 4, 2); }
/* 6 query heads, 3 KV heads: diff heads read (0,1), (0,2), (1,2): one native group each, KV heads
 * duplicated; linear scaling, F16 */
static int test_diffllama_kv3(void) { return check_folder("hf_diffllama_kv3", DA_ARCH_DIFF, 3, 3); }
static int test_llama_gqa(void) { return check_folder("hf_llama_gqa", DA_ARCH_SOFTMAX, 8, 2); }
static int test_llama_tied(void) { return check_folder("hf_llama_tied", DA_ARCH_SOFTMAX, 4, 4); }

/* The llama3 rule survives diffattn's own checkpoint (a loader that dropped
 * the RoPE keys would rebuild the DIFF rule and miss the logits), and a
 * checkpoint without them (written before they existed) loads with the DIFF
 * rule. */
static int test_saved_copies(void) {
    const char *dir = "tests/fixtures/hf_diffllama_gqa";
    expected e;
    CHECK(!load_expected(dir, &e));
    da_model m, back;
    CHECK(!da_model_load(&m, dir).code);
    char st_path[] = "/tmp/test_hf_XXXXXX";
    int fd = mkstemp(st_path);
    CHECK(fd >= 0);
    close(fd);
    CHECK(!da_model_save(&m, st_path).code);
    CHECK(!da_model_load(&back, st_path).code);
    CHECK(back.cfg.rope_freq == DA_ROPE_FREQ_LLAMA && back.cfg.rope_scaling == DA_ROPE_SCALE_LLAMA3);
    CHECK(back.cfg.rope_factor == 8 && back.cfg.rope_high_freq_factor == 4 && back.cfg.rope_original_max_pos == 64);
    int rc = forward_matches(&back, &e, DA_ATTN_FLASH, "reloaded checkpoint");
    unlink(st_path);
    da_model_free(&m);
    da_model_free(&back);
    free(e.logits);
    /* an older checkpoint: no rope_* keys but rope_theta */
    da_model old;
    CHECK(!da_model_load(&old, "tests/fixtures/diff_mha.model.safetensors").code);
    CHECK(old.cfg.rope_freq == DA_ROPE_FREQ_DIFF && old.cfg.rope_scaling == DA_ROPE_SCALE_NONE);
    da_model_free(&old);
    return rc;
}

/* A folder holding config.json (text) and, when copy_from is set, that
 * fixture's model.safetensors; returns the error of loading it. */
static da_status load_with_config(const char *config, const char *copy_from, char *dir_out) {
    strcpy(dir_out, "/tmp/test_hf_dir_XXXXXX");
    if (!mkdtemp(dir_out)) return da_errorf("mkdtemp failed");
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", dir_out);
    FILE *f = fopen(p, "w");
    fputs(config, f);
    fclose(f);
    if (copy_from) {
        char src[512];
        snprintf(src, sizeof src, "tests/fixtures/%s/model.safetensors", copy_from);
        size_t n;
        unsigned char *b = th_read_file(src, &n);
        snprintf(p, sizeof p, "%s/model.safetensors", dir_out);
        f = fopen(p, "wb");
        fwrite(b, 1, n, f);
        fclose(f);
        free(b);
    }
    da_model m;
    da_status st = da_model_load(&m, dir_out);
    if (!st.code) da_model_free(&m);
    return st;
}

static void remove_dir(const char *dir) {
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    unlink(p);
    rmdir(dir);
}

/* The config of hf_diffllama_mha with one key replaced (or added). */
static int expect_config_error(const char *key_json, const char *must_contain) {
    char cfg[2048], dir[64];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"diffllama\", \"hidden_size\": 32, \"intermediate_size\": 48, "
             "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 4, "
             "\"vocab_size\": 61, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-5, %s}",
             key_json);
    da_status st = load_with_config(cfg, "hf_diffllama_mha", dir);
    remove_dir(dir);
    if (!st.code || !strstr(st.msg, must_contain)) {
        fprintf(stderr, "  %s: got \"%s\", expected an error naming \"%s\"\n", key_json, st.code ? st.msg : "ok",
                must_contain);
        return 1;
    }
    return 0;
}

static int test_errors(void) {
    int rc = 0;
    { /* control: the base config with defaults for the keys left out loads */
        char cfg[1024], dir[64];
        snprintf(cfg, sizeof cfg,
                 "{\"model_type\": \"diffllama\", \"hidden_size\": 32, \"intermediate_size\": 48, "
                 "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 61, "
                 "\"max_position_embeddings\": 64}");
        da_status st = load_with_config(cfg, "hf_diffllama_mha", dir);
        remove_dir(dir);
        if (st.code) fprintf(stderr, "  control config: %s\n", st.msg);
        rc |= st.code != 0;
    }
    rc |= expect_config_error("\"attention_bias\": true", "attention_bias");
    rc |= expect_config_error("\"hidden_act\": \"gelu\"", "hidden_act");
    rc |= expect_config_error("\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}", "rope_type \"yarn\"");
    /* a head_dim other than hidden / heads is diffattn's explicit head size: the weights must have it */
    rc |= expect_config_error("\"head_dim\": 16", "o_proj.weight has shape [32, 32], expected [32, 64]");
    rc |= expect_config_error("\"head_dim\": 7", "head_dim 7 is odd");
    rc |= expect_config_error("\"partial_rotary_factor\": 0.5", "partial_rotary_factor");
    /* a tensor the config does not want: 3 layers declared, 2 stored */
    {
        char cfg[1024], dir[64];
        snprintf(cfg, sizeof cfg,
                 "{\"model_type\": \"diffllama\", \"hidden_size\": 32, \"intermediate_size\": 48, "
                 "\"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"vocab_size\": 61}");
        da_status st = load_with_config(cfg, "hf_diffllama_mha", dir);
        remove_dir(dir);
        if (!st.code || !strstr(st.msg, "missing tensor model.layers.2.")) {
            fprintf(stderr, "  3 layers: %s\n", st.code ? st.msg : "loaded");
            rc = 1;
        }
        snprintf(cfg, sizeof cfg,
                 "{\"model_type\": \"diffllama\", \"hidden_size\": 32, \"intermediate_size\": 48, "
                 "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": 61}");
        st = load_with_config(cfg, "hf_diffllama_mha", dir);
        remove_dir(dir);
        if (!st.code || !strstr(st.msg, "unexpected tensor model.layers.1.")) {
            fprintf(stderr, "  1 layer: %s\n", st.code ? st.msg : "loaded");
            rc = 1;
        }
        /* the Llama port of the same weights: the lambda vectors are extra */
        snprintf(cfg, sizeof cfg,
                 "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 48, "
                 "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 61}");
        st = load_with_config(cfg, "hf_diffllama_mha", dir);
        remove_dir(dir);
        if (!st.code || !strstr(st.msg, "lambda_")) {
            fprintf(stderr, "  llama over diffllama weights: %s\n", st.code ? st.msg : "loaded");
            rc = 1;
        }
        /* untied config over a file without lm_head */
        snprintf(cfg, sizeof cfg,
                 "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 48, "
                 "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 256, "
                 "\"tie_word_embeddings\": false}");
        st = load_with_config(cfg, "hf_llama_tied", dir);
        remove_dir(dir);
        if (!st.code || !strstr(st.msg, "lm_head.weight")) {
            fprintf(stderr, "  untied without lm_head: %s\n", st.code ? st.msg : "loaded");
            rc = 1;
        }
    }
    /* a shard index naming a missing file */
    {
        char dir[64] = "/tmp/test_hf_dir_XXXXXX", p[512];
        CHECK(mkdtemp(dir));
        snprintf(p, sizeof p, "%s/config.json", dir);
        FILE *f = fopen(p, "w");
        fputs("{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 2, "
              "\"num_attention_heads\": 4, \"vocab_size\": 61}",
              f);
        fclose(f);
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
        f = fopen(p, "w");
        fputs("{\"weight_map\": {\"model.norm.weight\": \"model-00001-of-00002.safetensors\"}}", f);
        fclose(f);
        da_model m;
        da_status st = da_model_load(&m, dir);
        remove_dir(dir);
        if (!st.code || !strstr(st.msg, "model-00001-of-00002.safetensors, which is missing")) {
            fprintf(stderr, "  missing shard: %s\n", st.code ? st.msg : "loaded");
            rc = 1;
        }
    }
    return rc;
}

static int test_tokenizer_path(void) {
    char p[512];
    CHECK(!da_model_tokenizer_path("tests/fixtures/hf_llama_tied", p, sizeof p));
    CHECK(!da_model_tokenizer_path("tests/fixtures/diff_mha.model.safetensors", p, sizeof p));
    char dir[64] = "/tmp/test_hf_dir_XXXXXX";
    CHECK(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    FILE *f = fopen(p, "w");
    fputs("{}", f);
    fclose(f);
    char got[512];
    int found = da_model_tokenizer_path(dir, got, sizeof got);
    unlink(p);
    rmdir(dir);
    CHECK(found && !strcmp(got, p));
    return 0;
}

int main(void) {
    RUN(test_diffllama_mha);
    RUN(test_diffllama_gqa);
    RUN(test_diffllama_kv3);
    RUN(test_llama_gqa);
    RUN(test_llama_tied);
    RUN(test_saved_copies);
    RUN(test_errors);
    RUN(test_tokenizer_path);
    TH_SUMMARY();
}
