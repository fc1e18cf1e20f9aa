/* Linear layers through CBLAS, torch nn.Linear layout W: (out, in). */
#include <cblas.h>

#include "ops/ops.h"

/* The big training matmuls run in bf16 (fp32 accumulate) when the context
 * asks and the CPU has the kernel; small ones are not worth the packing. */
static const da_ops *bf16_ops(const da_exec *x, long m, long n, long k) {
    if (!x->bf16_matmul || m * n * k < (1L << 22)) return NULL;
    const da_ops *op = da_ops_of(x->isa);
    return op->bf16_gemm ? op : NULL;
}

void da_matmul_forward(const da_exec *x, float *out, const float *inp, const float *W, int N, int Cin, int Cout,
                    int accumulate) {
    const da_ops *bf = bf16_ops(x, N, Cout, Cin);
    if (bf && bf->bf16_gemm(N, Cout, Cin, 1.0f, inp, Cin, 1, W, 1, Cin, accumulate ? 1.0f : 0.0f, out, Cout) == 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, Cout, Cin, 1.0f, inp, Cin, W, Cin,
                accumulate ? 1.0f : 0.0f, out, Cout);
}

void da_matmul_backward(const da_exec *x, float *dinp, float *dW, const float *dout, const float *inp, const float *W,
                     int N, int Cin, int Cout, int accumulate_dinp) {
    const da_ops *bf = bf16_ops(x, N, Cin, Cout);
    if (dinp && bf &&
        bf->bf16_gemm(N, Cin, Cout, 1.0f, dout, Cout, 1, W, Cin, 1, accumulate_dinp ? 1.0f : 0.0f, dinp, Cin) == 0)
        dinp = NULL; /* done */
    if (dinp) /* dinp: (N, Cin) = dout: (N, Cout) @ W: (Cout, Cin) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Cin, Cout, 1.0f, dout, Cout, W, Cin,
                    accumulate_dinp ? 1.0f : 0.0f, dinp, Cin);
    if (dW && bf && bf->bf16_gemm(Cout, Cin, N, 1.0f, dout, 1, Cout, inp, Cin, 1, 1.0f, dW, Cin) == 0)
        dW = NULL; /* done */
    if (dW) /* dW: (Cout, Cin) += dout^T: (Cout, N) @ inp: (N, Cin) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Cout, Cin, N, 1.0f, dout, Cout, inp, Cin, 1.0f, dW,
                    Cin);
}
