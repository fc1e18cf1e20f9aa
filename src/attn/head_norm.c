/* The DIFF per-head RMSNorm (subln) and its (1 - lambda_init) scale: the
 * model's RMSNorm over each 2d-wide head row, with the gain w * post: the
 * RMSNorm of this variant's level. */
#include <stdlib.h>

#include "attn/attention.h"
#include "ops/ops.h"

#define MAX_D2 2048 /* head rows are 2d wide, d <= 1024 (da_config_validate) */

static void scaled_gain(float *wp, const float *w, float post, int d2) {
    for (int i = 0; i < d2; i++) wp[i] = w[i] * post;
}

static void head_norm_forward(float *y, float *rstd, const float *x, const float *w, float post, int rows, int d2) {
    float wp[MAX_D2] = {0};
    scaled_gain(wp, w, post, d2);
    da_ops_of(DA_VARIANT_ISA)->rmsnorm_forward(y, rstd, x, wp, rows, d2, DA_SUBLN_EPS);
}

static void head_norm_backward(float *dx, float *dw, const float *dy, const float *x, const float *rstd,
                               const float *w, float post, int rows, int d2) {
    float wp[MAX_D2] = {0}, dwp[MAX_D2] = {0};
    scaled_gain(wp, w, post, d2);
    for (size_t i = 0; i < (size_t)rows * d2; i++) dx[i] = 0.0f;
    da_ops_of(DA_VARIANT_ISA)->rmsnorm_backward(dx, dwp, dy, x, wp, rstd, rows, d2);
    /* d(w * post)/dw = post */
    for (int i = 0; i < d2; i++) dw[i] += dwp[i] * post;
}
