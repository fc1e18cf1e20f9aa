/* The training-state file, out_dir/train_state.safetensors: one atomic write
 * holding everything --resume needs, so a kill at any moment leaves either
 * the previous complete state or the new one. Tensors: "params", "adam.m",
 * "adam.v" (each (n_params) F32, in the model's tensor-table order).
 * __metadata__: the model configuration keys, the training configuration
 * (train.*), "step", "rng" (the data sampler's xoshiro state, 4 x u64 hex) and, when the model carries
 * one, its tokenizer ("tokenizer.json", as in a model file). */
#ifndef DA_TRAIN_STATE_H
#define DA_TRAIN_STATE_H

#include "diffattn/train.h"

da_status da_train_state_save(const char *path, const da_model *m, const da_adamw *opt, const da_train_config *tc,
                              const da_rng *rng);
/* Creates m (and its grads) and opt from the file; fills tc, rng. */
da_status da_train_state_load(const char *path, da_model *m, da_adamw *opt, da_train_config *tc, da_rng *rng);

#endif
