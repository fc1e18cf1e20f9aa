/* Fuzz target: a training state (train_state.safetensors), as --resume reads
 * it: first peeked at for its configuration, then loaded whole. */
#include "diffattn.h"
#include "fuzz_util.h"
#include "train/train_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write("train_state.safetensors", data, size);
    da_config cfg;
    da_train_config tc;
    long step;
    (void)da_train_state_peek(fz_dir(), &cfg, &tc, &step);
    da_model m;
    da_adamw opt;
    da_rng rng;
    if (!da_train_state_load(path, &m, &opt, &tc, &rng).code) {
        da_model_free(&m);
        da_adamw_free(&opt);
    }
    return 0;
}
