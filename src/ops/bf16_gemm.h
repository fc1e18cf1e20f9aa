/* bfloat16 GEMM with fp32 accumulation (AVX512-BF16). Element (i, k) of A is
 * a[i*a_rs + k*a_cs], element (k, j) of B is b[k*b_rs + j*b_cs]; C is row-major
 * with leading dimension ldc: C = alpha * A B + beta * C. */
#ifndef DA_BF16_GEMM_H
#define DA_BF16_GEMM_H

/* 1 when this build has the AVX512-BF16 kernel (-march=native on such a CPU). */
int bf16_gemm_available(void);
/* Returns 0, or -1 (C untouched) when the kernel is unavailable or its
 * packing buffer cannot be allocated: the caller falls back to fp32. */
int bf16_gemm(int M, int N, int K, float alpha, const float *a, long a_rs, long a_cs, const float *b, long b_rs,
              long b_cs, float beta, float *c, long ldc);

#endif
