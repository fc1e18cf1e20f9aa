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

/* The model options of the paper's ablations: diffattn.attention.head_norm
 * ("on" or "off") and diffattn.attention.lambda_init (f32), each written only
 * when not the default, so files without them keep their bytes and meaning. */
void da_config_gguf_add_options(da_gguf_writer *w, const da_config *c);
da_status da_config_gguf_get_options(const da_gguf_file *f, da_config *c);
/* A variant's own hyper-parameters (da_config_field_of_variant) as u32 keys
 * diffattn.<field> (bool keys for its flags), written where
 * da_config_field_written says (a variant's for that variant only). Reading
 * sets every such field to its default, then to the file's value where a key
 * is present. */
void da_config_gguf_add_variant(da_gguf_writer *w, const da_config *c);
da_status da_config_gguf_get_variant(const da_gguf_file *f, da_config *c);

#endif
