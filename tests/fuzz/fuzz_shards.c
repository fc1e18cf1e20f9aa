/* Fuzz target: a token shard (train_000000.bin) in a data folder beside a
 * valid validation shard, as `train --data DIR` loads it. */
#include "data/shard.h"
#include "data/text_data.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int val_written;
    if (!val_written) {
        struct {
            da_shard_header h;
            uint32_t tok[16];
        } val = {{DA_SHARD_MAGIC, DA_SHARD_VERSION, 300, 0, 16}, {0}};
        for (int i = 0; i < 16; i++) val.tok[i] = (uint32_t)(i * 17 % 300);
        fz_write("val_000000.bin", (const uint8_t *)&val, sizeof val);
        val_written = 1;
    }
    fz_write("train_000000.bin", data, size);
    (void)da_data_vocab_size(fz_dir());
    da_text_data d;
    if (!da_text_data_load(&d, fz_dir(), 0.1f, 4).code) {
        da_rng rng;
        da_rng_seed(&rng, 1);
        int tokens[2 * 4], targets[2 * 4];
        da_text_data_sample(&d, &rng, 2, 4, tokens, targets);
        da_text_data_val_window(&d, 0, 2, 4, tokens, targets);
        for (int i = 0; i < 8; i++)
            if (tokens[i] < 0 || tokens[i] >= d.vocab_size) abort();
        da_text_data_free(&d);
    }
    return 0;
}
