/* diffattn model files: safetensors checkpoints, Hugging Face folders (read
 * and written), the GGUF architecture name, the guard against writing
 * over an input, and opening inputs that are regular files only.
 * Implemented in src/io/checkpoint.c, src/io/hf_model.c, src/io/hf_export.c, src/io/gguf_config.c,
 * src/io/atomic_file.c, src/io/regular_file.c. */
#ifndef DIFFATTN_FORMATS_H
#define DIFFATTN_FORMATS_H

#include <stddef.h>
#include <stdio.h>

#include "diffattn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* safetensors checkpoint (format described in docs/formats.md); a GGUF from
 * `diffattn quantize` also loads, its weights dequantized to f32. Loading
 * checks every name, shape and dtype (F32 or BF16) against the metadata. */
da_status da_model_load(da_model *m, const char *path);
/* da_model_load with load options o (NULL: the defaults). */
da_status da_model_load_with(da_model *m, const char *path, const da_load_opts *o);
/* A Hugging Face model folder (config.json with model_type "diffllama" or
 * "llama", model.safetensors or its sharded index; F32, F16 or BF16) loads
 * through da_model_load too, mapped onto the native layout exactly
 * (docs/formats.md). When model_path is a folder holding tokenizer.json,
 * writes that file's path to out and returns 1; else returns 0. */
int da_model_tokenizer_path(const char *model_path, char *out, size_t n);
/* What da_model_load would read at path: "Hugging Face folder (config.json
 * + safetensors)", "GGUF (quantized)" or "diffattn safetensors". */
const char *da_model_format(const char *path);
/* The bytes a model takes on disk: a file's size; a folder's .safetensors
 * files together. 0 when unreadable. */
size_t da_model_file_bytes(const char *path);
da_status da_model_save(const da_model *m, const char *path); /* atomic */
/* Writes m as a Hugging Face folder dir (created if missing): config.json (its family's model_type and class:
 * DiffLlamaForCausalLM for DIFF, LlamaForCausalLM for softmax, docs/formats.md), model.safetensors (F32) and, when m
 * carries one, tokenizer.json (one already in dir is removed when it does not). Exact: subln folds into
 * o_proj's columns, the head norm's eps into v_proj, the DIFF RoPE rule into rope_theta (docs/formats.md).
 * Replaced as a whole, in one step (a new sibling folder swapped in; earlier weight files removed, other files
 * kept, a subfolder refused): a kill or a full disk leaves the previous folder or the new one. Architectures
 * without hf (da_arch_info) and a sliding window have no Hugging Face equivalent: an error naming them. */
da_status da_model_export_hf(const da_model *m, const char *dir);
/* The same with type "f32", "bf16" or "f16" (nearest even); shard_bytes > 0 splits weights over that size into
 * model-0000i-of-0000N.safetensors and model.safetensors.index.json, as Hugging Face's save_pretrained. */
da_status da_model_export_hf_as(const da_model *m, const char *dir, const char *type, size_t shard_bytes);

/* Refuses, before anything is read or written, an output that is one of the
 * inputs: an existing outputs[o] with the same device and inode as inputs[i],
 * or as a file directly inside an input folder (symlinks resolved). NULL
 * entries are skipped; outputs that do not exist yet pass. */
da_status da_check_outputs_not_inputs(const char *const *outputs, int n_outputs, const char *const *inputs,
                                      int n_inputs);

/* Opening a file by name for reading, only when it is a regular file
 * (symlinks followed): a FIFO, a device, a socket or a folder is refused with
 * an error naming path and what it is. The open never blocks (O_NONBLOCK,
 * cleared afterwards) and the check is made on the open descriptor, so a FIFO
 * swapped in after a stat cannot hang the reader. Every file diffattn reads by
 * name goes through these. */
/* The descriptor (O_RDONLY, close-on-exec), or -1 with *st set. */
int da_open_regular(const char *path, da_status *st);
/* da_open_regular as a FILE ("rb"), or NULL with *st set. */
FILE *da_fopen_regular(const char *path, da_status *st);
/* The whole file into a malloc'd buffer with a NUL after its *n bytes (n may
 * be NULL); a file over max_bytes is refused, naming the bound. */
da_status da_read_regular(const char *path, size_t max_bytes, char **data, size_t *n);

/* The general.architecture a GGUF of c is written with: "llama" (what
 * llama.cpp runs: softmax, no window, no head norm), else "diffattn-" and
 * da_arch_name. */
void da_gguf_arch_of(const da_config *c, char *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif
