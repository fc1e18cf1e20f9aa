/* One instruction-set level of NSA's hot kernels, compiled once per da_isa
 * level as attn_variant.c is (see there); only the level's table,
 * nsa_kernels_<name>, leaves this file, and nsa_kernels_of (nsa_common.c)
 * picks it. */
#include "attn/nsa.h"

#include "attn/flash_tile.c" /* the small products of nsa_flash.c */
#include "attn/nsa_rows.c" /* before the kernels, which use it */
#include "attn/nsa_flash.c"
#include "attn/nsa_decode.c"

#define DA_CAT_(a, b) a##b
#define DA_CAT(a, b) DA_CAT_(a, b)

const nsa_kernels DA_CAT(nsa_kernels_, DA_VARIANT) = {
    .isa = DA_VARIANT_ISA,
    .flash_forward = nsa_flash_forward,
    .flash_backward = nsa_flash_backward,
    .decode_step = nsa_decode_step,
};
