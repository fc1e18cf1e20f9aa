/* diffattn convert: a model file of any format (read by engine_load.c's
 * da_model_load_float) converted to another attention variant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/generate.h"

da_status da_model_convert_file(const char *src_path, da_arch to, da_convert_recipe r, uint64_t seed,
                                const char *out_path, const da_load_opts *o) {
    const char *outs[1] = {out_path}, *ins[1] = {src_path};
    da_status st = da_check_outputs_not_inputs(outs, 1, ins, 1);
    if (st.code) return st;
    da_model src, dst;
    if ((st = da_model_load_float(&src, src_path, o)).code) return st;
    st = da_model_convert(&src, to, r, seed, &dst);
    da_model_free(&src);
    if (st.code) return da_errorf("%s: %s", src_path, st.msg);
    st = da_model_save(&dst, out_path);
    da_model_free(&dst);
    return st;
}
