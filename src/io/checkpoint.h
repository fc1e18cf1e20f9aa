/* The model configuration as safetensors __metadata__, shared by model files
 * and training-state files. */
#ifndef DA_CHECKPOINT_H
#define DA_CHECKPOINT_H

#include "diffattn/model.h"
#include "io/safetensors.h"

/* The __metadata__ key of a model's tokenizer: Hugging Face tokenizer.json text. */
#define DA_TOKENIZER_META_KEY "tokenizer.json"

/* "format", "version", then one key per row of da_config_fields. */
#define DA_CONFIG_META_N (2 + DA_CONFIG_N_FIELDS)

typedef struct {
    const char *keys[DA_CONFIG_META_N];
    const char *vals[DA_CONFIG_META_N];
    char buf[DA_CONFIG_META_N][32];
    int n; /* keys in use: a DA_STORED_UNLESS_DEFAULT field at its default is left out */
} da_config_meta;

/* Reads and validates the configuration keys; errors name the file and key. */
da_status da_config_from_meta(const da_st_file *f, da_config *c);
/* An error naming the first tensor of m holding a NaN or an infinity (and
 * path), da_model_load calls it unless its options allow them. */
da_status da_model_check_finite(const da_model *m, const char *path);
/* An error ("the file declares ...") when c declares far more parameters
 * than `values`, the number of values the file f holds (at most about twice
 * as many): the check to make before allocating a model from a file, so
 * that memory stays bounded by the file's size. */
da_status da_config_check_file_size(const da_st_file *f, const da_config *c, size_t values);
/* Fills cm with the keys and string values (pointing into cm and static text). */
void da_config_to_meta(const da_config *c, da_config_meta *cm);

#endif
