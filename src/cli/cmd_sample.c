/* diffattn sample: byte-level generation with the KV cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "io/gguf.h"
#include "quant/qmodel.h"
#include "infer/sample.h"
#include "tok/tokenizer.h"
#include <sys/stat.h>

/* One decoding step: the f32 model's KV cache, or a GGUF's quantized state. */
static da_status step(const da_model *m, da_kv_cache *kv, const da_qmodel *q, da_qstate *qs, int tok,
                      const float **logits) {
    return qs ? da_qforward(q, qs, &tok, 1, 0, logits) : da_decode_step(m, kv, tok, logits);
}

int cmd_sample(int argc, char **argv) {
    const char *model = NULL, *prompt = "", *tok_path = NULL, *kv_s = "f32";
    int max_new = 256;
    float temperature = 0.8f, top_p = 0.9f;
    uint64_t seed = 1337;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (.safetensors, or a .gguf from diffattn quantize: run quantized)", 0},
        {"prompt", OPT_STR, &prompt, "text to continue (bytes are tokens; empty starts from a newline)", 0},
        {"max-new", OPT_INT, &max_new, "tokens to generate", 0},
        {"temperature", OPT_FLOAT, &temperature, "softmax temperature (0 = greedy)", 0},
        {"top-p", OPT_FLOAT, &top_p, "nucleus sampling mass in (0, 1]", 0},
        {"seed", OPT_U64, &seed, "sampling seed", 0},
        {"tokenizer", OPT_STR, &tok_path,
         "tokenizer (default: a model folder's tokenizer.json, or the one saved next to the model by train --data SHARDS; else bytes)", 0},
        {"kv", OPT_STR, &kv_s, "GGUF models: KV cache f32 or int8", 0},
    };
    const char *req[] = {"model", NULL};
    int rc = cli_parse("sample", "Generates text, one token at a time with a KV cache.", argc,
                       argv, opts, 8, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (max_new < 0) return cli_fail("--max-new must be >= 0");
    if (!(temperature >= 0)) return cli_fail("--temperature must be >= 0");
    if (!(top_p > 0 && top_p <= 1)) return cli_fail("--top-p must lie in (0, 1]");
    if (strcmp(kv_s, "f32") && strcmp(kv_s, "int8")) return cli_fail("--kv: expected f32 or int8");
    da_model m;
    da_qmodel q;
    memset(&q, 0, sizeof q);
    const int gguf = da_gguf_is_gguf(model);
    da_status st = gguf ? da_qmodel_load(&q, model) : da_model_load(&m, model);
    if (st.code) return cli_fail(st.msg);
    if (gguf) {
        memset(&m, 0, sizeof m); /* only its cfg is used; the weights are q's */
        m.cfg = q.cfg;
    }
    /* the tokenizer: given, or saved beside the model, or none (bytes) */
    char beside[4096];
    snprintf(beside, sizeof beside, "%s", model);
    char *slash = strrchr(beside, '/');
    if (slash) *slash = 0;
    else snprintf(beside, sizeof beside, ".");
    struct stat sb;
    char probe[4200], probe2[4200];
    snprintf(probe, sizeof probe, "%s/tokenizer.json", beside);
    snprintf(probe2, sizeof probe2, "%s/encoder.json", beside);
    char in_folder[4200]; /* a Hugging Face folder's own tokenizer.json */
    if (!tok_path && da_model_tokenizer_path(model, in_folder, sizeof in_folder)) tok_path = in_folder;
    if (!tok_path && (stat(probe, &sb) == 0 || stat(probe2, &sb) == 0)) tok_path = beside;
    da_tokenizer *tok = NULL;
    if (tok_path && (st = da_tokenizer_load(&tok, tok_path)).code) {
        da_model_free(&m);
        da_qmodel_free(&q);
        return cli_fail(st.msg);
    }
    if (tok && da_tokenizer_vocab_size(tok) > m.cfg.vocab_size) {
        da_tokenizer_free(tok);
        da_model_free(&m);
        da_qmodel_free(&q);
        return cli_fail("the tokenizer's vocabulary is larger than the model's (wrong --tokenizer?)");
    }
    if (!tok && m.cfg.vocab_size < 256) {
        da_model_free(&m);
        da_qmodel_free(&q);
        return cli_fail("no tokenizer next to the model, and it is not byte-level (vocab_size < 256): pass --tokenizer");
    }
    const char *text = prompt[0] ? prompt : "\n";
    int *pids = NULL;
    size_t n_prompt = 0, pcap = 0;
    if (tok) st = da_tokenizer_encode(tok, (const uint8_t *)text, strlen(text), &pids, &n_prompt, &pcap);
    else {
        n_prompt = strlen(text);
        pids = malloc(n_prompt * sizeof(int));
        if (!pids) st = da_errorf("out of memory");
        for (size_t i = 0; pids && i < n_prompt; i++) pids[i] = (unsigned char)text[i];
    }
    long total = (long)n_prompt + max_new;
    if (!st.code && total > m.cfg.max_seq_len)
        st = da_errorf("prompt (%zu tokens) + --max-new %d exceeds the model's max_seq_len %d", n_prompt, max_new,
                       m.cfg.max_seq_len);
    if (st.code) {
        free(pids);
        da_tokenizer_free(tok);
        da_model_free(&m);
        da_qmodel_free(&q);
        return cli_fail(st.msg);
    }
    da_kv_cache *kv = NULL;
    float *scratch = malloc(2 * (size_t)m.cfg.vocab_size * sizeof(float));
    if (!scratch) st = da_errorf("out of memory");
    da_qstate *qs = NULL;
    da_qrun_opts ro = {q.act, !strcmp(kv_s, "int8")};
    if (!st.code) st = gguf ? da_qstate_create(&qs, &q, &ro, (int)total, 1) : da_kv_create(&kv, &m.cfg, (int)total);
    da_rng rng;
    da_rng_seed(&rng, seed);
    const float *logits = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (prompt[0]) fwrite(prompt, 1, strlen(prompt), stdout);
    for (size_t i = 0; i < n_prompt && !st.code; i++) st = step(&m, kv, &q, qs, pids[i], &logits);
    int generated = 0;
    uint8_t *bytes = NULL;
    size_t bcap = 0;
    for (; generated < max_new && !st.code; generated++) {
        int tk = da_sample_token(logits, m.cfg.vocab_size, temperature, top_p, &rng, scratch);
        if (tok) {
            size_t nb = 0;
            if (tk < da_tokenizer_vocab_size(tok) && !da_tokenizer_decode(tok, &tk, 1, &bytes, &nb, &bcap).code)
                fwrite(bytes, 1, nb, stdout);
        } else if (tk < 256) {
            fputc(tk, stdout);
        }
        fflush(stdout);
        if (generated + 1 < max_new) st = step(&m, kv, &q, qs, tk, &logits);
    }
    free(bytes);
    free(pids);
    da_tokenizer_free(tok);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("\n");
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (!st.code)
        fprintf(stderr, "[%zu tokens in %.2fs, %.1f tok/s]\n", n_prompt + (size_t)generated, s,
                ((double)n_prompt + generated) / s);
    da_kv_free(kv);
    da_qstate_free(qs);
    da_qmodel_free(&q);
    free(scratch);
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : 0;
}
