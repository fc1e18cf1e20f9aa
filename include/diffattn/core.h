/* diffattn core: version, errors, the random number generator, and the
 * execution context (instruction set, bf16 matmuls, profiling).
 *
 * The library never exits: every call that can fail returns a da_status whose
 * msg names the file, the field and, where there is one, the fix. */
#ifndef DIFFATTN_CORE_H
#define DIFFATTN_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DA_VERSION "0.1.0"
#define DA_FORMAT_VERSION 1 /* the `version` in a model file's metadata */

/* ---------------------------------------------------------------- errors */

typedef struct {
    int code; /* 0 = ok */
    char msg[512];
} da_status;

da_status da_ok(void);
da_status da_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* How a loader treats a model file. A loader refuses weights holding NaN or
 * infinity, naming the tensor (runs stop at non-finite logits in any case);
 * allow_nonfinite = 1 lets them load, for debugging (the CLI's
 * --allow-nonfinite). A zeroed struct, or NULL where a function takes a
 * pointer, is the default. */
typedef struct {
    int allow_nonfinite;
} da_load_opts;

/* ---------------------------------------------------------------- clock */

/* Monotonic wall-clock seconds, for timing (any origin: only differences mean anything). */
double da_now_s(void);

/* ---------------------------------------------------------------- RNG */

typedef struct {
    uint64_t s[4];
} da_rng; /* xoshiro256** */

void da_rng_seed(da_rng *r, uint64_t seed);
uint64_t da_rng_next(da_rng *r);
float da_rng_uniform(da_rng *r); /* [0, 1) */
float da_rng_normal(da_rng *r);

/* ---------------------------------------------------------------- execution context */

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

/* ---------------------------------------------------------------- configuration tables */

/* A configuration struct (da_config, da_train_config) is described by one
 * table of da_field rows: defaults, range checks, checkpoint metadata, CLI
 * flags with their --help, and what --resume may change all read it, so a new
 * hyperparameter is one row. */
typedef enum {
    DA_FIELD_INT,   /* int */
    DA_FIELD_LONG,  /* long */
    DA_FIELD_U64,   /* uint64_t; no range check */
    DA_FIELD_FLOAT, /* float; must also be finite */
    DA_FIELD_BOOL,  /* int 0 or 1; metadata "true" / "false"; a CLI flag without a value */
    DA_FIELD_ENUM,  /* an enum (int-sized); value i is spelled names[i] */
} da_field_type;

typedef enum {
    DA_RESUME_FIXED,      /* the run's stored value stays; giving another one is an error */
    DA_RESUME_MAY_CHANGE, /* a value given on resume replaces the stored one */
    DA_RESUME_IGNORED,    /* the run's stored value stays; a value given on resume is ignored */
} da_resume_rule;

#define DA_STORED_UNLESS_DEFAULT 2

typedef struct {
    const char *key;    /* field name: metadata key (after the table's prefix) and error messages */
    const char *flag;   /* CLI flag without the dashes; NULL: not a flag */
    size_t offset;      /* offsetof(struct, field) */
    da_field_type type;
    double def, lo, hi; /* default and valid range */
    const char *bounds; /* "[]", "[)", "(]" or "()": whether lo and hi themselves are valid */
    da_resume_rule on_resume;
    int stored;         /* 1: written to and read from checkpoints; DA_STORED_UNLESS_DEFAULT: written only
                         * when not the default, and absent reads as the default (a field added later, so
                         * files without it keep their bytes and their meaning) */
    const char *help;
    const char *const *names; /* DA_FIELD_ENUM: NULL-terminated spellings; DA_FIELD_FLOAT: NULL, or names[0]
                               * spells the default (its format and a value the parser accepts) */
} da_field;

/* Every field of obj to its default. */
void da_fields_default(const da_field *fields, int n, void *obj);
/* The first field of obj outside its range, as "key: value must lie in [lo, hi]". */
da_status da_fields_check(const da_field *fields, int n, const void *obj);
/* The row named key, or NULL. */
const da_field *da_fields_find(const da_field *fields, int n, const char *key);
/* The field's value as text: integers in decimal, floats as the shortest
 * decimal that reads back as the same float, bools true/false, enums by name. */
void da_field_format(const da_field *f, const void *obj, char *buf, size_t n);
/* Parses text written by da_field_format (bools also accept 1 and 0) into
 * obj's field, without a range check. The message says what was expected; the
 * caller names the source. */
da_status da_field_parse(const da_field *f, void *obj, const char *s);
/* dst's field = src's. */
void da_field_copy(const da_field *f, void *dst, const void *src);
/* 1 when the field holds the same value in a and b. */
int da_field_equal(const da_field *f, const void *a, const void *b);

#ifdef __cplusplus
}
#endif
#endif
