/* diffattn sample: byte-level generation with the KV cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "sample.h"

int cmd_sample(int argc, char **argv) {
    const char *model = NULL, *prompt = "";
    int max_new = 256;
    float temperature = 0.8f, top_p = 0.9f;
    uint64_t seed = 1337;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (.safetensors)", 0},
        {"prompt", OPT_STR, &prompt, "text to continue (bytes are tokens; empty starts from a newline)", 0},
        {"max-new", OPT_INT, &max_new, "tokens to generate", 0},
        {"temperature", OPT_FLOAT, &temperature, "softmax temperature (0 = greedy)", 0},
        {"top-p", OPT_FLOAT, &top_p, "nucleus sampling mass in (0, 1]", 0},
        {"seed", OPT_U64, &seed, "sampling seed", 0},
    };
    const char *req[] = {"model", NULL};
    int rc = cli_parse("sample", "Generates text from a byte-level model, one token at a time with a KV cache.", argc,
                       argv, opts, 6, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (max_new < 0) return cli_fail("--max-new must be >= 0");
    if (!(temperature >= 0)) return cli_fail("--temperature must be >= 0");
    if (!(top_p > 0 && top_p <= 1)) return cli_fail("--top-p must lie in (0, 1]");
    da_model m;
    da_status st = da_model_load(&m, model);
    if (st.code) return cli_fail(st.msg);
    if (m.cfg.vocab_size < 256) {
        da_model_free(&m);
        return cli_fail("sample works on byte-level models (vocab_size >= 256)");
    }
    const char *text = prompt[0] ? prompt : "\n";
    int n_prompt = (int)strlen(text);
    long total = (long)n_prompt + max_new;
    if (total > m.cfg.max_seq_len) {
        char msg[256];
        snprintf(msg, sizeof msg, "prompt (%d bytes) + --max-new %d exceeds the model's max_seq_len %d", n_prompt,
                 max_new, m.cfg.max_seq_len);
        da_model_free(&m);
        return cli_fail(msg);
    }
    da_kv_cache *kv = NULL;
    float *scratch = malloc(2 * (size_t)m.cfg.vocab_size * sizeof(float));
    if (!scratch) st = da_errorf("out of memory");
    if (!st.code) st = da_kv_create(&kv, &m.cfg, (int)total);
    da_rng rng;
    da_rng_seed(&rng, seed);
    const float *logits = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (prompt[0]) fwrite(prompt, 1, (size_t)n_prompt, stdout);
    for (int i = 0; i < n_prompt && !st.code; i++) st = da_decode_step(&m, kv, (unsigned char)text[i], &logits);
    int generated = 0;
    for (; generated < max_new && !st.code; generated++) {
        int tok = da_sample_token(logits, m.cfg.vocab_size, temperature, top_p, &rng, scratch);
        if (tok < 256) fputc(tok, stdout);
        fflush(stdout);
        if (generated + 1 < max_new) st = da_decode_step(&m, kv, tok, &logits);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("\n");
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (!st.code) fprintf(stderr, "[%d tokens in %.2fs, %.1f tok/s]\n", n_prompt + generated, s, (n_prompt + generated) / s);
    da_kv_free(kv);
    free(scratch);
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : 0;
}
