/* The grid of a study (--grid heads=1,2 dim=64,128): its cells are every
 * combination of the axes' values, the last axis varying fastest; each sets
 * the model and training shape it names (grid.c). */
#ifndef DA_GRID_H
#define DA_GRID_H

#include <stddef.h>
#include <stdio.h>

#include "diffattn/core.h"

/* combination of the axes' values is a cell, the last axis varying fastest;
 * plain compare and compare --task read it alike. */
typedef enum { DA_GRID_HEADS = 0, DA_GRID_DIM, DA_GRID_LAYERS, DA_GRID_LR, DA_GRID_BATCH, DA_GRID_N_KEYS } da_grid_key;
#define DA_GRID_MAX_VALUES 8

typedef struct {
    da_grid_key key;
    int n;
    double values[DA_GRID_MAX_VALUES];
} da_grid_axis;

/* "heads=1,2,4 dim=64,128 lr=1e-3,3e-3" (axes separated by spaces or
 * semicolons; keys heads, dim, layers, lr, batch) into grid (DA_GRID_N_KEYS
 * long) and *n_grid. */
da_status da_grid_parse(const char *spec, da_grid_axis *grid, int *n_grid);

extern const char *const DA_GRID_KEY_NAMES[DA_GRID_N_KEYS]; /* "heads", "dim", "layers", "lr", "batch" */

typedef struct {
    int dim, layers, heads, batch;
    float lr;
} grid_shape;

/* How many cells the axes make (1 without any). */
int grid_cells(const da_grid_axis *grid, int n_grid);
/* Cell g: each axis's value index into index (n_grid of them), its values
 * applied to *shape, and its name ("heads 2, dim 64"; "" without axes). */
void grid_cell(const da_grid_axis *grid, int n_grid, int g, int *index, grid_shape *shape, char *name, size_t n);

/* " Grid (over the values above): heads 1,2; dim 64,128." for a report; nothing without axes. */
void grid_describe(FILE *fp, const da_grid_axis *grid, int n_grid);

#endif
