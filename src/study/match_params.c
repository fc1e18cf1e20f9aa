/* compare's --match-params: every column at the largest column's parameter
 * count, by widening its SwiGLU FFN (arch_column.h). */
#include "study/arch_column.h"

void da_match_params(da_config *cfgs, int n) {
    size_t most = 0;
    for (int i = 0; i < n; i++) {
        const size_t p = da_config_param_count(&cfgs[i]);
        if (p > most) most = p;
    }
    for (int i = 0; i < n; i++) {
        /* each unit of ffn_hidden is one row of w1 and w3 and one column of w2 in every layer */
        const double per_unit = 3.0 * cfgs[i].dim * cfgs[i].n_layers;
        const double gap = (double)most - (double)da_config_param_count(&cfgs[i]);
        cfgs[i].ffn_hidden += (int)(gap / per_unit + 0.5);
    }
}
