/* One instruction-set level of every hot op. CMakeLists.txt compiles this
 * file once per da_isa level, each time with that level's -march and with
 * DA_VARIANT (its name) and DA_VARIANT_ISA (its da_isa) defined, so that the
 * `#pragma omp simd` loops and the `#if __AVX512F__` / `__AVX2__` paths of
 * the files below take that level's instructions. Their functions are
 * static: only the level's table, da_ops_<name>, leaves this file, and
 * da_ops_of (ops.c) picks the table from a da_exec's isa. */
#include "ops/ops.h"
#include "ops/prefetch.h"

#include "ops/adamw.c"
#include "ops/bf16_gemm.c"
#include "ops/cross_entropy.c"
#include "ops/embedding.c"
#include "ops/qdot_read.c"
#include "ops/qdot.c"
#include "ops/qgemm.c"
#include "ops/rmsnorm.c"
#include "ops/rope.c"
#include "ops/swiglu.c"

#define DA_CAT_(a, b) a##b
#define DA_CAT(a, b) DA_CAT_(a, b)

#if defined(__AVX512F__)
#define VECTOR_PATH "avx512: 16-float vectors"
#define EXP_PATH "avx512 polynomial (a few ulp)"
#elif defined(__AVX2__) && defined(__FMA__)
#define VECTOR_PATH "avx2 + fma: 8-float vectors"
#define EXP_PATH "avx2 polynomial (a few ulp)"
#elif defined(__SSE2__)
#define VECTOR_PATH "sse2: 4-float vectors"
#define EXP_PATH "libm expf"
#else
#define VECTOR_PATH "plain C"
#define EXP_PATH "libm expf"
#endif
#if HAVE_VNNI
#define DOT_PATH "avx512-vnni vpdpbusd, 2 blocks per instruction"
#elif HAVE_AVX2
#define DOT_PATH "avx2 vpmaddubsw + vpmaddwd, 1 block per step"
#else
#define DOT_PATH "scalar C"
#endif

const da_ops DA_CAT(da_ops_, DA_VARIANT) = {
    .isa = DA_VARIANT_ISA,
    .vector_path = VECTOR_PATH,
    .exp_path = EXP_PATH,
    .dot_path = DOT_PATH,
    .rmsnorm_forward = rmsnorm_forward,
    .rmsnorm_row = rmsnorm_row,
    .rmsnorm_backward = rmsnorm_backward,
    .rope_apply = rope_apply,
    .rope_row = rope_row,
    .swiglu_forward = swiglu_forward,
    .swiglu_backward = swiglu_backward,
    .embedding_forward = embedding_forward,
    .embedding_backward = embedding_backward,
    .cross_entropy_forward = cross_entropy_forward,
    .cross_entropy_backward = cross_entropy_backward,
    .adamw_update = adamw_update,
#if HAVE_BF16_GEMM
    .bf16_gemm = bf16_gemm,
#else
    .bf16_gemm = NULL,
#endif
    .vec_dot = vec_dot,
    .quantize_act = quantize_act,
    .qgemm_tiled = QGEMM_TILED,
    .q8_0_r16 = HAVE_VNNI,
    .qgemm = qgemm,
    .half_gemm = half_gemm,
    .half_axpy = half_axpy,
    .half_from_f32 = half_from_f32,
};
