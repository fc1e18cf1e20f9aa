/* A Hugging Face folder to GGUF one tensor at a time (quantize.h): the
 * tensor table and types are planned from config.json alone, the header is
 * written, and each tensor is read in f32 rows, rounded to its type and
 * written before the next is read, so that the memory held is one layer in
 * f32 and a bounded chunk of rows, never the model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/hf_model.h"
#include "ops/finite.h"
#include "quant/quantize.h"

#define CHUNK_FLOATS ((size_t)1 << 22) /* 16 MB of f32 rows per step */

typedef struct {
    da_hf_stream *s;
    const da_engine *q;
    const char *dir;
    int check_finite;
    int last; /* the last tensor the source writes */
} stream_ctx;

static da_status write_tensor(void *vctx, int i, FILE *fp) {
    stream_ctx *x = vctx;
    const da_qtensor *t = &x->q->t[i];
    const int type = i == 0 ? da_engine_file_embed_type(x->q) : t->cols ? t->type : DA_QT_F32;
    const int rows = t->cols ? t->rows : 1, cols = t->cols ? t->cols : t->rows;
    const size_t rb = da_qtype_row_bytes(type, cols);
    int chunk = (int)(CHUNK_FLOATS / (size_t)cols);
    if (chunk < 1) chunk = 1;
    if (chunk > rows) chunk = rows;
    float *f = malloc((size_t)chunk * (size_t)cols * sizeof *f);
    unsigned char *b = malloc((size_t)chunk * rb);
    da_status st = f && b ? da_ok() : da_errorf("out of memory converting %s", t->name);
    for (int r0 = 0; r0 < rows && !st.code; r0 += chunk) {
        const int n = rows - r0 < chunk ? rows - r0 : chunk;
        if ((st = da_hf_stream_rows(x->s, i, r0, n, f)).code) break;
        const size_t total = (size_t)n * (size_t)cols, at = x->check_finite ? da_first_nonfinite(f, total) : total;
        if (at < total) {
            st = da_errorf("%s: tensor %s holds %g at element %zu; a model with non-finite weights is refused "
                           "(--allow-nonfinite loads it anyway, for debugging)",
                           x->dir, t->name, (double)f[at], (size_t)r0 * (size_t)cols + at);
            break;
        }
#pragma omp parallel for schedule(dynamic, 16)
        for (int r = 0; r < n; r++) da_quantize_row(type, b + (size_t)r * rb, f + (size_t)r * cols, cols);
        if (fwrite(b, rb, (size_t)n, fp) != (size_t)n) st = da_errorf("writing %s failed", t->name);
    }
    free(f);
    free(b);
    if (!st.code && i == x->last) st = da_hf_stream_finish(x->s);
    return st;
}

da_status da_quantize_folder(const char *dir, const char *out_path, const da_quantize_types *types, da_act_mode act,
                             int check_finite, da_engine *plan) {
    memset(plan, 0, sizeof *plan);
    da_hf_stream *s = NULL;
    da_config cfg;
    da_status st = da_hf_stream_open(&s, dir, &cfg);
    if (st.code) return st;
    if ((st = da_quantize_plan(plan, &cfg, types)).code) {
        da_hf_stream_close(s);
        return da_errorf("%s: %s", dir, st.msg);
    }
    plan->act = act;
    da_model tok = {0}; /* the folder's tokenizer.json, as every loader of a folder takes it */
    if (!(st = da_model_take_folder_tokenizer(&tok, dir)).code && tok.tokenizer_json)
        st = da_engine_set_tokenizer(plan, tok.tokenizer_json, dir);
    free(tok.tokenizer_json);
    stream_ctx x = {s, plan, dir, check_finite, plan->n_tensors - plan->head_copy - 1};
    if (!st.code) st = da_engine_save_gguf_streamed(plan, out_path, write_tensor, &x);
    da_hf_stream_close(s);
    if (st.code) da_engine_release(plan);
    return st;
}
