/* Greedy generation with the public API: loads a model file (safetensors
 * from `diffattn init` or `train`, or a GGUF from `quantize`), feeds a
 * prompt of token ids, and prints the ids of the N tokens that follow.
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
    const int n_prompt = argc > 3 ? argc - 3 : 1;
    int *prompt = malloc((size_t)n_prompt * sizeof(int));
    if (!prompt) return 1;
    for (int i = 0; i < n_prompt; i++) prompt[i] = argc > 3 ? atoi(argv[3 + i]) : 10;

    da_engine *e = NULL;
    da_session *s = NULL;
    const float *logits = NULL;
    da_status st = da_engine_load(&e, argv[1]);
    if (!st.code) {
        const da_config *c = da_engine_config(e);
        if (n_new < 1 || n_prompt + n_new > c->max_seq_len)
            st = da_errorf("%d prompt + %d new tokens: need 1..%d new, within max_seq_len %d", n_prompt, n_new,
                           c->max_seq_len - n_prompt, c->max_seq_len);
        for (int i = 0; i < n_prompt && !st.code; i++)
            if (prompt[i] < 0 || prompt[i] >= c->vocab_size)
                st = da_errorf("prompt token %d is outside the vocabulary (0..%d)", prompt[i], c->vocab_size - 1);
    }
    if (!st.code) st = da_session_create(&s, e, NULL);
    if (!st.code) st = da_session_feed(s, prompt, n_prompt, 0, &logits);
    for (int i = 0; i < n_new && !st.code; i++) {
        int next = argmax(logits, da_session_vocab_size(s));
        printf("%s%d", i ? " " : "", next);
        if (i + 1 < n_new) st = da_session_feed(s, &next, 1, 0, &logits);
    }
    printf("\n");
    if (st.code) fprintf(stderr, "generate: %s\n", st.msg);
    da_session_free(s);
    da_engine_free(e);
    free(prompt);
    return st.code ? 1 : 0;
}
