/* Model-configuration GGUF keys added after the first diffattn GGUF files,
 * read and written by small helpers so that any GGUF writer can call them. */
#ifndef DA_IO_CONFIG_GGUF_H
#define DA_IO_CONFIG_GGUF_H

#include "diffattn/model.h"
#include "io/gguf.h"

/* The RoPE rule's GGUF keys (diffattn.rope.freq_rule, diffattn.rope.scaling.*).
 * Reading leaves the defaults (DIFF rule, no scaling) when the keys are
 * absent, as in files written before they existed. */
void da_config_gguf_add_rope(da_gguf_writer *w, const da_config *c);
da_status da_config_gguf_get_rope(const da_gguf_file *f, da_config *c);

#endif
