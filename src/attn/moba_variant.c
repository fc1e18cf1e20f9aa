/* One instruction-set level of MoBA's kernels, compiled once per da_isa
 * level as attn_variant.c is (see there); only the level's table,
 * moba_kernels_<name>, leaves this file, and moba_kernels_of (moba_common.c)
 * picks it. */
#include "attn/moba.h"

#include "attn/moba_kernels.c"

#define DA_CAT_(a, b) a##b
#define DA_CAT(a, b) DA_CAT_(a, b)

const moba_kernels DA_CAT(moba_kernels_, DA_VARIANT) = {
    .isa = DA_VARIANT_ISA,
    .dot = moba_dot,
    .select = moba_select,
    .flash_forward = moba_flash_forward,
    .flash_backward = moba_flash_backward,
    .reference_forward = moba_reference_forward,
    .reference_backward = moba_reference_backward,
};
