/* NumPy .npy files of float32 ('<f4', C order): the format parity fixtures and
 * dumps use, readable with numpy.load. */
#ifndef DA_IO_NPY_H
#define DA_IO_NPY_H

#include <stdint.h>

#include "diffattn/model.h"

#define DA_NPY_MAX_DIMS 8

/* Writes a version 1.0 file whose data starts at a multiple of 64 bytes, as
 * numpy does. ndim 0..8 (0: a scalar, one float). Atomic. */
da_status da_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape);

/* Reads a version 1.0 or 2.0 '<f4' C-order file. *data is malloc'd (the
 * caller frees it; never NULL on success, even for zero elements), shape[0..
 * *ndim) is filled. The data size must match the file length exactly. */
da_status da_npy_read_f32(const char *path, float **data, int *ndim, int64_t shape[DA_NPY_MAX_DIMS]);

#endif
