/* The public attention entry points (include/diffattn/attention.h) over the
 * flash kernel: shape checks, scratch, and the saved-state layout. The
 * kernels are those of da_exec_default()'s level. */
#include <omp.h>
#include <stdlib.h>

#include "attn/attention.h"
#include "attn/flash_attention.h"
#include "attn/variant.h"
#include "diffattn/attention.h"

/* The layouts the header documents: softmax's one map, DIFF's two with a
 * scalar lambda. The other variants take inputs this interface has no room
 * for (a lambda per token, or keys and values per branch). */
static int drop_in(da_arch a) { return a == DA_ARCH_DIFF || a == DA_ARCH_SOFTMAX; }

static da_status to_attn_shape(const da_attention_shape *s, attn_shape *as) {
    if (!drop_in(s->arch))
        return da_errorf("attention: arch %d is not one this entry point runs (DA_ARCH_DIFF or DA_ARCH_SOFTMAX)",
                         (int)s->arch);
    if (s->batch < 1 || s->seq < 1 || s->head_dim < 2 || s->head_dim % 2)
        return da_errorf("attention: batch %d, seq %d, head_dim %d: all must be positive, head_dim even", s->batch,
                         s->seq, s->head_dim);
    if (s->n_heads < 1 || s->n_kv_heads < 1 || s->n_heads % s->n_kv_heads)
        return da_errorf("attention: n_heads %d must be a positive multiple of n_kv_heads %d", s->n_heads,
                         s->n_kv_heads);
    const attn_layout *lay = &da_attn_variant_of(s->arch)->layout;
    const int w = lay->v_subheads * s->head_dim; /* one head's q (and output) width */
    attn_shape a = {s->batch, s->seq, s->n_heads, s->n_kv_heads, s->head_dim, s->n_heads * w, s->n_kv_heads * w,
                    omp_get_max_threads(), 0, 0, 0, NULL};
    *as = a;
    return da_ok();
}

static const attn_layout *layout_of(const da_attention_shape *s) { return &da_attn_variant_of(s->arch)->layout; }

size_t da_attention_saved_floats(const da_attention_shape *s) {
    attn_shape as;
    if (to_attn_shape(s, &as).code) return 0;
    const int maps = layout_of(s)->maps;
    const size_t lse = (size_t)as.B * as.n_heads * maps * as.T;
    return lse + (maps == 2 ? 2 * (size_t)as.B * as.T * as.C : 0);
}

da_status da_attention_forward(float *out, float *saved, const float *q, const float *k, const float *v, float lambda,
                               const da_attention_shape *s) {
    attn_shape as;
    da_status st = to_attn_shape(s, &as);
    if (st.code) return st;
    float *scratch = malloc(da_flash_scratch_size(&as, layout_of(s)) * sizeof(float));
    if (!scratch) return da_errorf("attention: out of memory for the kernel's scratch");
    const int two = layout_of(s)->maps == 2;
    const size_t n_lse = (size_t)as.B * as.n_heads * (two ? 2 : 1) * as.T, BTC = (size_t)as.B * as.T * as.C;
    float *o1 = two ? saved + n_lse : NULL, *o2 = two ? saved + n_lse + BTC : NULL;
    const da_attn_ops *at = da_attn_ops_of(da_exec_default().isa);
    at->flash_forward(out, o1, o2, saved, q, k, v, lambda, NULL, layout_of(s), &as, scratch);
    free(scratch);
    return da_ok();
}

da_status da_attention_backward(float *dq, float *dk, float *dv, float *dlambda, const float *dout, const float *out,
                                const float *saved, const float *q, const float *k, const float *v, float lambda,
                                const da_attention_shape *s) {
    attn_shape as;
    da_status st = to_attn_shape(s, &as);
    if (st.code) return st;
    const int two = layout_of(s)->maps == 2;
    if (two && !dlambda) return da_errorf("attention: the backward of two maps needs dlambda");
    float *scratch = malloc(da_flash_scratch_size(&as, layout_of(s)) * sizeof(float));
    if (!scratch) return da_errorf("attention: out of memory for the kernel's scratch");
    const size_t n_lse = (size_t)as.B * as.n_heads * (two ? 2 : 1) * as.T, BTC = (size_t)as.B * as.T * as.C;
    const float *o1 = two ? saved + n_lse : NULL, *o2 = two ? saved + n_lse + BTC : NULL;
    const da_attn_ops *at = da_attn_ops_of(da_exec_default().isa);
    at->flash_backward(dq, dk, dv, dlambda, NULL, dout, out, o1, o2, saved, q, k, v, lambda, NULL, layout_of(s), &as,
                       scratch);
    free(scratch);
    return da_ok();
}

da_status da_attention_head_norm(float *y, const float *x, const float *w, float lambda_init, int rows, int d2) {
    if (rows < 1 || d2 < 2 || d2 > 2048) return da_errorf("attention: head norm of %d rows of %d: rows must be positive, "
                                                           "the row width 2..2048", rows, d2);
    float *rstd = malloc((size_t)rows * sizeof(float));
    if (!rstd) return da_errorf("attention: out of memory");
    da_attn_ops_of(da_exec_default().isa)->head_norm_forward(y, rstd, x, w, 1.0f - lambda_init, rows, d2);
    free(rstd);
    return da_ok();
}
