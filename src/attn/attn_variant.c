/* One instruction-set level of the attention kernels, compiled once per
 * da_isa level as ops/ops_variant.c is (see there); only the level's table,
 * da_attn_ops_<name>, leaves this file. */
#include "attn/attention.h"
#include "attn/flash_attention.h"
#include "ops/ops.h"

#include "attn/head_norm.c" /* before attention.c, which uses it */
#include "attn/attention.c"
#include "attn/flash_tile.c" /* before flash_attention.c, which uses it */
#include "attn/flash_attention.c"

#define DA_CAT_(a, b) a##b
#define DA_CAT(a, b) DA_CAT_(a, b)

const da_attn_ops DA_CAT(da_attn_ops_, DA_VARIANT) = {
    .isa = DA_VARIANT_ISA,
    .head_norm_forward = head_norm_forward,
    .head_norm_backward = head_norm_backward,
    .diff_forward = diff_attention_forward,
    .diff_backward = diff_attention_backward,
    .diff2_forward = diff2_attention_forward,
    .diff2_backward = diff2_attention_backward,
    .softmax_forward = softmax_attention_forward,
    .softmax_backward = softmax_attention_backward,
    .flash_forward = flash_attention_forward,
    .flash_backward = flash_attention_backward,
};
