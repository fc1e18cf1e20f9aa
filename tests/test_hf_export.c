/* export --format hf: a diffattn model written as a Hugging Face folder and
 * loaded back gives the same logits (max error / max |logit| <= 1e-5), for
 * DIFF and softmax, GQA and MQA, tied and untied, both RoPE rules and
 * scalings, and a norm_eps other than the head norm's 1e-5. Every weight is
 * random, subln and the norms far from 1, so that a missing fold (subln into
 * o_proj, the head norm's eps into v_proj, the RoPE rule into rope_theta) or
 * a wrong permutation shows in the logits. The tokenizer travels; diff2 and
 * a window are refused by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diffattn/formats.h"
#include "harness.h"

#define TOL 1e-5
#define T_TOKENS 16

/* Random weights: matrices N(0, 1/C) (embeddings N(0, 1)), norms and subln
 * 1 + N(0, 0.3^2), lambdas N(0, 0.3^2). */
static void randomize(da_model *m, uint64_t seed) {
    da_rng rng;
    da_rng_seed(&rng, seed);
    for (int i = 0; i < m->n_tensors; i++) {
        const da_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        for (size_t k = 0; k < t->numel; k++) {
            float z = da_rng_normal(&rng);
            if (t->ndim == 2) p[k] = z / sqrtf((float)t->shape[1]) * (strstr(t->name, "tok_emb") ? 8.0f : 1.0f);
            else if (strstr(t->name, "lambda_")) p[k] = 0.3f * z;
            else p[k] = 1.0f + 0.3f * z;
        }
    }
}

static void remove_folder(const char *dir) {
    static const char *const names[] = {"config.json", "model.safetensors", "tokenizer.json"};
    char p[512];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

static float *logits_of(da_model *m, const int *tokens) {
    da_acts *a;
    if (da_acts_create(&a, &m->cfg, 1, T_TOKENS).code) return NULL;
    da_forward(m, a, tokens, NULL, 1, T_TOKENS);
    size_t n = (size_t)T_TOKENS * m->cfg.vocab_size;
    float *out = malloc(n * sizeof *out);
    memcpy(out, da_acts_logits(a), n * sizeof *out);
    da_acts_free(a);
    return out;
}

/* Exports a random model of cfg, loads the folder, compares: the native
 * layout comes back (arch, heads, KV groups, tying) and so do the logits. */
static int round_trip(const da_config *cfg_in, uint64_t seed) {
    da_config cfg = *cfg_in;
    CHECK(!da_config_validate(&cfg).code);
    da_model m, back;
    CHECK(!da_model_create(&m, &cfg).code);
    randomize(&m, seed);
    char dir[] = "/tmp/test_hf_export_XXXXXX";
    CHECK(mkdtemp(dir));
    da_status st = da_model_export_hf(&m, dir);
    if (st.code) fprintf(stderr, "  export: %s\n", st.msg);
    CHECK(!st.code);
    st = da_model_load(&back, dir);
    if (st.code) fprintf(stderr, "  load: %s\n", st.msg);
    CHECK(!st.code);
    CHECK(back.cfg.arch == cfg.arch && back.cfg.n_heads == cfg.n_heads && back.cfg.n_kv_heads == cfg.n_kv_heads);
    CHECK(back.cfg.tie_embeddings == cfg.tie_embeddings && back.cfg.norm_eps == cfg.norm_eps);
    CHECK(back.cfg.rope_freq == DA_ROPE_FREQ_LLAMA && back.cfg.rope_scaling == cfg.rope_scaling);
    int tokens[T_TOKENS];
    da_rng rng;
    da_rng_seed(&rng, seed + 100);
    for (int t = 0; t < T_TOKENS; t++) tokens[t] = (int)(da_rng_next(&rng) % (uint64_t)cfg.vocab_size);
    float *want = logits_of(&m, tokens), *got = logits_of(&back, tokens);
    CHECK(want && got);
    const size_t n = (size_t)T_TOKENS * cfg.vocab_size;
    double err = max_rel_error(got, want, n, 0);
    printf("     %s n_heads=%d n_kv_heads=%d tied=%d rope_freq=%s rope_scaling=%s norm_eps=%g: "
           "max error / max |logit| = %.2e\n",
           da_arch_name(cfg.arch), cfg.n_heads, cfg.n_kv_heads, cfg.tie_embeddings, da_rope_freq_name(cfg.rope_freq),
           da_rope_scale_name(cfg.rope_scaling), (double)cfg.norm_eps, err);
    int rc = expect_close_rel("logits after export and load", got, want, n, TOL, 0);
    free(want);
    free(got);
    da_model_free(&m);
    da_model_free(&back);
    remove_folder(dir);
    return rc;
}

static da_config small(da_arch arch, int n_heads, int n_kv_heads) {
    da_config c;
    da_config_default(&c);
    c.arch = arch;
    c.dim = 64;
    c.n_layers = 3; /* lambda_init differs per layer */
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.vocab_size = 50;
    c.ffn_hidden = 96;
    c.max_seq_len = 64;
    return c;
}

/* DIFF, GQA (4 heads, 2 groups), untied, the DIFF RoPE rule, norm_eps 1e-3:
 * the head norm's eps differs from the layer norms' by 100x. */
static int test_diff_gqa(void) {
    da_config c = small(DA_ARCH_DIFF, 4, 2);
    c.norm_eps = 1e-3f;
    return round_trip(&c, 1);
}

/* DIFF, one KV group (two Hugging Face KV heads), tied, llama3 scaling over
 * the DIFF rule's frequencies (d = 8: wavelengths 6.3, 135, 2900, 62800
 * against 128 and 512: kept, blended, divided). */
static int test_diff_mqa_llama3(void) {
    da_config c = small(DA_ARCH_DIFF, 4, 1);
    c.tie_embeddings = 1;
    c.rope_scaling = DA_ROPE_SCALE_LLAMA3;
    c.rope_factor = 8;
    c.rope_low_freq_factor = 1;
    c.rope_high_freq_factor = 4;
    c.rope_original_max_pos = 512;
    return round_trip(&c, 2);
}

/* DIFF MHA with Llama's RoPE rule (a model loaded from Hugging Face),
 * linear scaling, norm_eps 1e-6. */
static int test_diff_mha_llama_rule(void) {
    da_config c = small(DA_ARCH_DIFF, 4, 4);
    c.rope_freq = DA_ROPE_FREQ_LLAMA;
    c.rope_scaling = DA_ROPE_SCALE_LINEAR;
    c.rope_factor = 2;
    c.norm_eps = 1e-6f;
    return round_trip(&c, 3);
}

/* softmax GQA (8 heads, 2 groups), untied, the DIFF rule, norm_eps 1e-6 */
static int test_softmax_gqa(void) {
    da_config c = small(DA_ARCH_SOFTMAX, 8, 2);
    c.norm_eps = 1e-6f;
    return round_trip(&c, 4);
}

/* softmax MHA, tied, linear scaling */
static int test_softmax_tied(void) {
    da_config c = small(DA_ARCH_SOFTMAX, 8, 8);
    c.tie_embeddings = 1;
    c.rope_scaling = DA_ROPE_SCALE_LINEAR;
    c.rope_factor = 4;
    return round_trip(&c, 5);
}

/* The model's tokenizer.json is written byte for byte, loads as the folder's
 * tokenizer, and an export without one removes an earlier export's. */
static int test_tokenizer(void) {
    da_config c = small(DA_ARCH_DIFF, 4, 4);
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    randomize(&m, 6);
    const char *text = "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}";
    m.tokenizer_json = strdup(text);
    char dir[] = "/tmp/test_hf_export_XXXXXX", path[512];
    CHECK(mkdtemp(dir));
    CHECK(!da_model_export_hf(&m, dir).code);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    size_t n = 0;
    char *back = (char *)th_read_file(path, &n);
    CHECK(back && n == strlen(text) && !memcmp(back, text, n));
    free(back);
    char found[600];
    CHECK(da_model_tokenizer_path(dir, found, sizeof found) && !strcmp(found, path));
    free(m.tokenizer_json);
    m.tokenizer_json = NULL;
    CHECK(!da_model_export_hf(&m, dir).code);
    CHECK(access(path, F_OK) != 0);
    da_model_free(&m);
    remove_folder(dir);
    return 0;
}

static int expect_refused(const da_config *c, const char *must_contain) {
    da_model m;
    CHECK(!da_model_create(&m, c).code);
    char dir[] = "/tmp/test_hf_export_XXXXXX", sub[600];
    CHECK(mkdtemp(dir));
    snprintf(sub, sizeof sub, "%s/out", dir);
    da_status st = da_model_export_hf(&m, sub);
    da_model_free(&m);
    int made = access(sub, F_OK) == 0;
    remove_folder(sub);
    rmdir(dir);
    if (!st.code || !strstr(st.msg, must_contain) || made) {
        fprintf(stderr, "  expected an error naming \"%s\" and no folder, got \"%s\"%s\n", must_contain,
                st.code ? st.msg : "success", made ? " and a folder" : "");
        return 1;
    }
    return 0;
}

static int test_refused(void) {
    da_config c = small(DA_ARCH_DIFF2, 4, 4);
    int rc = expect_refused(&c, "arch diff2");
    c = small(DA_ARCH_DIFF, 4, 4);
    c.window = 8;
    rc |= expect_refused(&c, "window 8");
    /* a type the folder does not take, and more shards than the reader opens: nothing written */
    da_model m;
    c.window = 0;
    CHECK(!da_model_create(&m, &c).code);
    char dir[] = "/tmp/test_hf_export_XXXXXX", sub[600];
    CHECK(mkdtemp(dir));
    snprintf(sub, sizeof sub, "%s/out", dir);
    da_status st = da_model_export_hf_as(&m, sub, "q8_0", 0);
    CHECK(st.code && strstr(st.msg, "type \"q8_0\" is not one of f32, bf16, f16") && access(sub, F_OK) != 0);
    da_model_free(&m);
    c.n_layers = 40; /* over 256 tensors, each over 1 byte: a shard each */
    CHECK(!da_model_create(&m, &c).code);
    st = da_model_export_hf_as(&m, sub, "bf16", 1);
    CHECK(st.code && strstr(st.msg, "more than the 256") && access(sub, F_OK) != 0);
    da_model_free(&m);
    remove_folder(sub);
    rmdir(dir);
    return rc;
}

int main(void) {
    RUN(test_diff_gqa);
    RUN(test_diff_mqa_llama3);
    RUN(test_diff_mha_llama_rule);
    RUN(test_softmax_gqa);
    RUN(test_softmax_tied);
    RUN(test_tokenizer);
    RUN(test_refused);
    TH_SUMMARY();
}
