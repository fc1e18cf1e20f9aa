/* diffattn execution context: the kernels' instruction-set level, what this
 * CPU has and runs, bf16 matmuls, and the per-phase profile of a step.
 * Implemented in src/core/isa.c, src/core/profile.c, src/ops/ops.c. */
#ifndef DIFFATTN_EXEC_H
#define DIFFATTN_EXEC_H


#ifdef __cplusplus
extern "C" {
#endif

/* Instruction-set levels of the kernels, each a superset of the one before:
 *   SCALAR       any x86-64 (SSE2)
 *   AVX2         x86-64-v3: AVX2, FMA, F16C, BMI1/2 (Haswell, Zen 1 and later)
 *   AVX512       x86-64-v4: AVX-512 F/BW/CD/DQ/VL (Skylake-SP)
 *   AVX512_VNNI  + VNNI: int8 dot products (Cascade Lake, Ice Lake)
 *   AVX512_BF16  + VNNI + BF16: bf16 matmuls (Cooper Lake, Sapphire Rapids, Zen 4) */
typedef enum {
    DA_ISA_SCALAR = 0,
    DA_ISA_AVX2 = 1,
    DA_ISA_AVX512 = 2,
    DA_ISA_AVX512_VNNI = 3,
    DA_ISA_AVX512_BF16 = 4,
    DA_ISA_N
} da_isa;

/* The highest level this CPU (and its OS) supports. */
da_isa da_isa_detect(void);
/* 1 when this CPU can run kernels of level isa. */
int da_isa_supported(da_isa isa);
const char *da_isa_name(da_isa isa); /* "scalar", "avx2", "avx512", "avx512-vnni", "avx512-bf16" */
int da_isa_parse(const char *s, da_isa *out); /* 0 ok, -1 unknown */

/* The CPU features the levels are made of: name[i] and present[i] (1 when
 * this CPU has it) for i below the count returned (at most max filled). */
int da_cpu_features(const char **name, int *present, int max);
/* For reports: the code each kernel family runs at level isa (after the
 * fall-back to what the CPU runs): family[i], path[i], as above. */
int da_kernel_paths(da_isa isa, const char **family, const char **path, int max);

/* Phases of a training step that a profile charges time to. */
typedef enum {
    DA_PROF_EMBEDDING,
    DA_PROF_RMSNORM,
    DA_PROF_MATMUL_FWD,
    DA_PROF_MATMUL_BWD,
    DA_PROF_ROPE,
    DA_PROF_ATTN_FWD,
    DA_PROF_ATTN_BWD,
    DA_PROF_HEAD_NORM,
    DA_PROF_SWIGLU,
    DA_PROF_RESIDUAL,
    DA_PROF_LOSS,
    DA_PROF_ZERO_GRADS,
    DA_PROF_ADAMW,
    DA_PROF_N
} da_prof_phase;

const char *da_prof_name(da_prof_phase p); /* "rmsnorm", "attention_forward", ... */

/* How a model runs: each da_acts (and optimizer) keeps its own copy, so two
 * models with different settings can run in one process at once. */
typedef struct {
    da_isa isa;       /* kernel level; above what the CPU has, the CPU's best is used */
    int bf16_matmul;  /* 1: large matmuls take bf16 inputs, fp32 accumulation (needs AVX512_BF16) */
    double *prof_s;   /* NULL, or DA_PROF_N seconds to which each phase's wall time is added */
} da_exec;

/* isa = da_isa_detect(), lowered to the environment's DIFFATTN_ISA when that
 * names a level (e.g. DIFFATTN_ISA=scalar; it never raises it); bf16 off,
 * no profile. */
da_exec da_exec_default(void);

#ifdef __cplusplus
}
#endif
#endif
