/* Linear layers through CBLAS, torch nn.Linear layout W: (out, in). */
#include <cblas.h>

#include "ops/bf16_gemm.h"
#include "ops/ops.h"

int da_matmul_bf16 = 0;

/* The big training matmuls run in bf16 (fp32 accumulate) when asked and
 * available; small ones are not worth the packing. */
static int use_bf16(long m, long n, long k) { return da_matmul_bf16 && m * n * k >= (1L << 22) && bf16_gemm_available(); }

void matmul_forward(float *out, const float *inp, const float *W, int N, int Cin, int Cout, int accumulate) {
    if (use_bf16(N, Cout, Cin) &&
        bf16_gemm(N, Cout, Cin, 1.0f, inp, Cin, 1, W, 1, Cin, accumulate ? 1.0f : 0.0f, out, Cout) == 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, Cout, Cin, 1.0f, inp, Cin, W, Cin,
                accumulate ? 1.0f : 0.0f, out, Cout);
}

void matmul_backward(float *dinp, float *dW, const float *dout, const float *inp, const float *W,
                     int N, int Cin, int Cout, int accumulate_dinp) {
    const int bf = use_bf16(N, Cin, Cout);
    if (dinp && bf && bf16_gemm(N, Cin, Cout, 1.0f, dout, Cout, 1, W, Cin, 1, accumulate_dinp ? 1.0f : 0.0f, dinp, Cin) == 0)
        dinp = NULL; /* done */
    if (dinp) /* dinp: (N, Cin) = dout: (N, Cout) @ W: (Cout, Cin) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Cin, Cout, 1.0f, dout, Cout, W, Cin,
                    accumulate_dinp ? 1.0f : 0.0f, dinp, Cin);
    if (dW && bf && bf16_gemm(Cout, Cin, N, 1.0f, dout, 1, Cout, inp, Cin, 1, 1.0f, dW, Cin) == 0)
        dW = NULL; /* done */
    if (dW) /* dW: (Cout, Cin) += dout^T: (Cout, N) @ inp: (N, Cin) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Cout, Cin, N, 1.0f, dout, Cout, inp, Cin, 1.0f, dW,
                    Cin);
}
