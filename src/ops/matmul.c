/* Linear layers through CBLAS, torch nn.Linear layout W: (out, in). */
#include <cblas.h>

#include "ops/ops.h"

void matmul_forward(float *out, const float *inp, const float *W, int N, int Cin, int Cout, int accumulate) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, Cout, Cin, 1.0f, inp, Cin, W, Cin,
                accumulate ? 1.0f : 0.0f, out, Cout);
}

void matmul_backward(float *dinp, float *dW, const float *dout, const float *inp, const float *W,
                     int N, int Cin, int Cout, int accumulate_dinp) {
    if (dinp) /* dinp: (N, Cin) = dout: (N, Cout) @ W: (Cout, Cin) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Cin, Cout, 1.0f, dout, Cout, W, Cin,
                    accumulate_dinp ? 1.0f : 0.0f, dinp, Cin);
    if (dW) /* dW: (Cout, Cin) += dout^T: (Cout, N) @ inp: (N, Cin) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Cout, Cin, N, 1.0f, dout, Cout, inp, Cin, 1.0f, dW,
                    Cin);
}
