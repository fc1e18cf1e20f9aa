/* Greedy generation with the public API: loads a model file, feeds a prompt
 * of token ids, and prints the ids of the N tokens that follow.
 *
 *   generate MODEL [N [TOKEN...]]   (N default 16; prompt default: 10, a newline)
 *
 * Build against an installed diffattn:
 *   cc generate.c $(pkg-config --cflags --libs diffattn) -o generate */
#include <stdio.h>
#include <stdlib.h>

#include <diffattn.h>

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [N [TOKEN...]]\n", argv[0]);
        return 2;
    }
    const int n_new = argc > 2 ? atoi(argv[2]) : 16;
    int n_prompt = argc > 3 ? argc - 3 : 1;
    int *prompt = malloc((size_t)n_prompt * sizeof(int));
    if (!prompt) return 1;
    for (int i = 0; i < n_prompt; i++) prompt[i] = argc > 3 ? atoi(argv[3 + i]) : 10;

    da_model m;
    da_status st = da_model_load(&m, argv[1]);
    if (st.code) {
        fprintf(stderr, "generate: %s\n", st.msg);
        free(prompt);
        return 1;
    }
    da_kv_cache *kv = NULL;
    da_acts *acts = NULL;
    const float *logits = NULL;
    if (n_new < 1 || n_prompt + n_new > m.cfg.max_seq_len)
        st = da_errorf("%d prompt + %d new tokens: need 1..%d new, within max_seq_len %d", n_prompt, n_new,
                       m.cfg.max_seq_len - n_prompt, m.cfg.max_seq_len);
    for (int i = 0; i < n_prompt && !st.code; i++)
        if (prompt[i] < 0 || prompt[i] >= m.cfg.vocab_size)
            st = da_errorf("prompt token %d is outside the vocabulary (0..%d)", prompt[i], m.cfg.vocab_size - 1);
    if (!st.code) st = da_kv_create(&kv, &m.cfg, n_prompt + n_new);
    if (!st.code) st = da_acts_create(&acts, &m.cfg, 1, n_prompt);
    if (!st.code) st = da_kv_prefill(&m, kv, acts, prompt, n_prompt, &logits);
    for (int i = 0; i < n_new && !st.code; i++) {
        const int next = argmax(logits, m.cfg.vocab_size);
        printf("%s%d", i ? " " : "", next);
        if (i + 1 < n_new) st = da_decode_step(&m, kv, next, &logits);
    }
    printf("\n");
    if (st.code) fprintf(stderr, "generate: %s\n", st.msg);
    da_acts_free(acts);
    da_kv_free(kv);
    da_model_free(&m);
    free(prompt);
    return st.code ? 1 : 0;
}
