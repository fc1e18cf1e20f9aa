/* Calibration statistics of a session's matmul inputs (engine.h's da_qstats). */
#include <stdlib.h>
#include <string.h>

#include "infer/engine.h"
#include "infer/session.h"

da_status da_qstats_create(da_qstats *st, const da_config *cfg) {
    memset(st, 0, sizeof *st);
    const int n = DA_N_SITES(cfg);
    st->absmax = calloc((size_t)n, sizeof *st->absmax);
    st->chan_off = calloc((size_t)n + 1, sizeof *st->chan_off);
    if (!st->absmax || !st->chan_off) {
        da_qstats_free(st);
        return da_errorf("out of memory");
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        st->chan_off[i] = off;
        off += (i < n - 1 && i % DA_SITES_PER_LAYER == DA_SITE_FFN_GATE) ? (size_t)cfg->ffn_hidden : (size_t)cfg->dim;
    }
    st->chan_off[n] = off;
    st->chan = calloc(off, sizeof *st->chan);
    st->chan2 = calloc(off, sizeof *st->chan2);
    if (!st->chan || !st->chan2) {
        da_qstats_free(st);
        return da_errorf("out of memory");
    }
    return da_ok();
}

void da_qstats_free(da_qstats *st) {
    free(st->absmax);
    free(st->chan);
    free(st->chan2);
    free(st->chan_off);
    memset(st, 0, sizeof *st);
}

void da_session_attach_stats(da_session *s, da_qstats *st) { s->stats = st; }
