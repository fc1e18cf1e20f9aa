/* The CPU's instruction-set level and the default execution context.
 * Detection goes through libgcc's cpuid table (__builtin_cpu_supports), which
 * also checks that the OS saves the AVX and AVX-512 registers. */
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "diffattn/core.h"
#include "diffattn/exec.h"

static const char *const isa_names[DA_ISA_N] = {"scalar", "avx2", "avx512", "avx512-vnni", "avx512-bf16"};

#if defined(__x86_64__) && defined(__GNUC__)
/* Bit `bit` of ECX of CPUID leaf `leaf`: the features that older clang's
 * __builtin_cpu_supports does not name (f16c, movbe, lzcnt). */
static int cpuid_ecx_bit(unsigned leaf, int bit) {
    unsigned a, b, c, d;
    return __get_cpuid(leaf, &a, &b, &c, &d) ? (int)((c >> bit) & 1u) : 0;
}

#define HAS_F16C cpuid_ecx_bit(1, 29)
#ifdef __clang__
/* clang 14 knows no psABI level names: the features of x86-64-v3 and -v4
 * one by one (v2's are implied by any CPU with AVX2). */
#define HAS_X86_64_V3                                                                                     \
    (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") && \
     __builtin_cpu_supports("bmi2") && HAS_F16C && cpuid_ecx_bit(1, 22) && cpuid_ecx_bit(0x80000001u, 5))
#define HAS_X86_64_V4                                                                                      \
    (HAS_X86_64_V3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&         \
     __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
#else
#define HAS_X86_64_V3 (__builtin_cpu_supports("x86-64-v3") > 0)
#define HAS_X86_64_V4 (__builtin_cpu_supports("x86-64-v4") > 0)
#endif
#endif

int da_isa_supported(da_isa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    switch (isa) {
    case DA_ISA_SCALAR: return 1;
    /* The variants are built for these psABI levels (CMakeLists.txt), so
     * the compiler may use any instruction of the level, not only AVX2/FMA. */
    case DA_ISA_AVX2: return HAS_X86_64_V3;
    case DA_ISA_AVX512: return HAS_X86_64_V4;
    case DA_ISA_AVX512_VNNI: return HAS_X86_64_V4 && __builtin_cpu_supports("avx512vnni");
    case DA_ISA_AVX512_BF16:
        return HAS_X86_64_V4 && __builtin_cpu_supports("avx512vnni") &&
               __builtin_cpu_supports("avx512bf16");
    default: return 0;
    }
#else
    return isa == DA_ISA_SCALAR;
#endif
}

int da_cpu_features(const char **name, int *present, int max) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    /* __builtin_cpu_supports takes string literals only */
    const struct {
        const char *name;
        int present;
    } f[] = {
        {"avx2", __builtin_cpu_supports("avx2")},         {"fma", __builtin_cpu_supports("fma")},
        {"f16c", HAS_F16C},         {"bmi2", __builtin_cpu_supports("bmi2")},
        {"avx512f", __builtin_cpu_supports("avx512f")},   {"avx512bw", __builtin_cpu_supports("avx512bw")},
        {"avx512cd", __builtin_cpu_supports("avx512cd")}, {"avx512dq", __builtin_cpu_supports("avx512dq")},
        {"avx512vl", __builtin_cpu_supports("avx512vl")}, {"avx512vnni", __builtin_cpu_supports("avx512vnni")},
        {"avx512bf16", __builtin_cpu_supports("avx512bf16")},
    };
    const int n = (int)(sizeof f / sizeof f[0]);
    for (int i = 0; i < n && i < max; i++) {
        name[i] = f[i].name;
        present[i] = f[i].present > 0;
    }
    return n;
#else
    (void)name, (void)present, (void)max;
    return 0;
#endif
}

da_isa da_isa_detect(void) {
    da_isa best = DA_ISA_SCALAR;
    for (int i = 1; i < DA_ISA_N; i++)
        if (da_isa_supported((da_isa)i)) best = (da_isa)i;
    return best;
}

const char *da_isa_name(da_isa isa) { return (unsigned)isa < DA_ISA_N ? isa_names[isa] : "?"; }

int da_isa_parse(const char *s, da_isa *out) {
    for (int i = 0; i < DA_ISA_N; i++)
        if (!strcmp(s, isa_names[i])) {
            *out = (da_isa)i;
            return 0;
        }
    return -1;
}

da_exec da_exec_default(void) {
    da_exec x = {da_isa_detect(), 0, NULL};
    const char *env = getenv("DIFFATTN_ISA");
    da_isa cap;
    if (env && !da_isa_parse(env, &cap) && cap < x.isa) x.isa = cap;
    return x;
}
