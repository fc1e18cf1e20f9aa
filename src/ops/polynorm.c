/* The PolyNorm gate of --mlp polynorm (ops.h). Each row's three powers are
 * normalised by their own RMS, so a row's statistics come first (in double:
 * u^3 spans a wide range) and the output second; the backward recomputes the
 * statistics rather than saving them (three floats per row, cheap to redo). */
#include <math.h>

#include "ops/ops.h"

/* rstd[i]: 1 / sqrt(mean(u^(3-i))^2 + eps) of one row u: (F), for the powers 3, 2, 1. */
static void power_rstds(double *rstd, const float *u, int F) {
    double s[3] = {0, 0, 0};
    for (int j = 0; j < F; j++) {
        const double x = u[j], x2 = x * x;
        s[0] += x2 * x2 * x2;
        s[1] += x2 * x2;
        s[2] += x2;
    }
    for (int i = 0; i < 3; i++) rstd[i] = 1.0 / sqrt(s[i] / F + DA_POLYNORM_EPS);
}

void da_polynorm_forward(float *gate, const float *h1, const float *h3, const float *w, const float *b, int N,
                         int F) {
#pragma omp parallel for if ((size_t)N * F > 32768)
    for (int r = 0; r < N; r++) {
        const float *u = h1 + (size_t)r * F, *v = h3 + (size_t)r * F;
        float *o = gate + (size_t)r * F;
        double rstd[3];
        power_rstds(rstd, u, F);
        const double c3 = w[0] * rstd[0], c2 = w[1] * rstd[1], c1 = w[2] * rstd[2];
        for (int j = 0; j < F; j++) { /* o[j] may be u[j]: read before written */
            const double x = u[j];
            o[j] = (float)(((c3 * x + c2) * x + c1) * x + b[0]) * v[j];
        }
    }
}

void da_polynorm_backward(float *dh1, float *dh3, float *dw, float *db, const float *dgate, const float *h1,
                          const float *h3, const float *w, const float *b, int N, int F) {
    double gw[3] = {0, 0, 0}, gb = 0;
#pragma omp parallel for reduction(+ : gw[:3], gb) if ((size_t)N * F > 32768)
    for (int r = 0; r < N; r++) {
        const float *u = h1 + (size_t)r * F, *v = h3 + (size_t)r * F, *dg = dgate + (size_t)r * F;
        float *du = dh1 + (size_t)r * F, *dv = dh3 + (size_t)r * F;
        double rstd[3];
        power_rstds(rstd, u, F);
        /* dp = dgate * h3; per power: sum dp * n (dw's row term and the norm's projection) */
        double dot[3] = {0, 0, 0}, sdp = 0;
        for (int j = 0; j < F; j++) {
            const double x = u[j], dp = (double)dg[j] * v[j];
            dot[0] += dp * x * x * x * rstd[0];
            dot[1] += dp * x * x * rstd[1];
            dot[2] += dp * x * rstd[2];
            sdp += dp;
            dv[j] = (float)((double)dg[j] * (w[0] * x * x * x * rstd[0] + w[1] * x * x * rstd[1] +
                                            w[2] * x * rstd[2] + b[0]));
        }
        for (int i = 0; i < 3; i++) gw[i] += dot[i];
        gb += sdp;
        /* n = z rstd: dz = rstd (dn - n mean(dn n)), dn = w_i dp; then dz/du = k u^(k-1) */
        for (int j = 0; j < F; j++) {
            const double x = u[j], dp = (double)dg[j] * v[j];
            double g = 0;
            const double z[3] = {x * x * x, x * x, x}, dzdu[3] = {3 * x * x, 2 * x, 1};
            for (int i = 0; i < 3; i++) {
                const double n = z[i] * rstd[i];
                g += rstd[i] * (w[i] * dp - n * w[i] * dot[i] / F) * dzdu[i];
            }
            du[j] = (float)g;
        }
    }
    for (int i = 0; i < 3; i++) dw[i] += (float)gw[i];
    db[0] += (float)gb;
}
