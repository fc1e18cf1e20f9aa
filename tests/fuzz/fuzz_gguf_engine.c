/* Fuzz target: a GGUF through the engine's loader and then its binding: a
 * model that loads runs a prompt of 2 tokens (batches through every matmul
 * weight in its own type, the variant's parameters as bound) and one decoded
 * token, under each activation mode its types allow. The mixed-type files of
 * issue 35 crashed here (a NULL dequantization buffer); the F16 NSA
 * parameters read past their tensor. Models too large to run quickly are
 * loaded only. */
#include "diffattn/generate.h"
#include "fuzz_util.h"

static void run(const da_engine *e, int act) {
    const da_config *c = da_engine_config(e);
    da_session_opts o = da_session_opts_default();
    o.act = act;
    o.max_T = c->max_seq_len < 4 ? c->max_seq_len : 4;
    o.max_batch = o.max_T < 2 ? o.max_T : 2;
    da_session *s;
    if (da_session_create(&s, e, &o).code) return;
    const int prompt[2] = {0, c->vocab_size - 1};
    const float *logits;
    if (!da_session_feed(s, prompt, o.max_batch, 0, &logits).code && o.max_T > o.max_batch) {
        const int next = 1 % c->vocab_size;
        (void)da_session_feed(s, &next, 1, 0, &logits);
    }
    da_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write("engine.gguf", data, size);
    da_engine *e;
    if (da_engine_load(&e, path).code) return 0;
    const da_config *c = da_engine_config(e);
    const double work = (double)c->n_layers * c->dim * (4.0 * c->dim + 3.0 * c->ffn_hidden) + (double)c->vocab_size * c->dim;
    if (work < 4e6 && c->dim <= 1024) {
        run(e, -1);              /* the file's default */
        run(e, DA_ACTQ_Q8);      /* integer activations where the weights are integer-quantized */
        run(e, DA_ACTQ_F32);
    }
    da_engine_free(e);
    return 0;
}
