/* The grid of a study (see grid.h and da_grid_parse). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "study/grid.h"

const char *const DA_GRID_KEY_NAMES[DA_GRID_N_KEYS] = {"heads", "dim", "layers", "lr", "batch"};

da_status da_grid_parse(const char *spec, da_grid_axis *grid, int *n_grid) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    *n_grid = 0;
    for (char *save = NULL, *ax = strtok_r(buf, " ;", &save); ax; ax = strtok_r(NULL, " ;", &save)) {
        char *eq = strchr(ax, '=');
        if (!eq) return da_errorf("--grid: \"%s\" is not key=v1,v2,... (keys heads, dim, layers, lr, batch)", ax);
        *eq = 0;
        int key = -1;
        for (int k = 0; k < DA_GRID_N_KEYS; k++)
            if (!strcmp(ax, DA_GRID_KEY_NAMES[k])) key = k;
        if (key < 0) return da_errorf("--grid: unknown axis \"%s\" (heads, dim, layers, lr, batch)", ax);
        for (int i = 0; i < *n_grid; i++)
            if ((int)grid[i].key == key) return da_errorf("--grid: axis %s given twice", ax);
        da_grid_axis *g = &grid[(*n_grid)++];
        g->key = (da_grid_key)key, g->n = 0;
        for (char *s2 = NULL, *v = strtok_r(eq + 1, ",", &s2); v; v = strtok_r(NULL, ",", &s2)) {
            char *end;
            const double x = strtod(v, &end);
            const int integral = key != DA_GRID_LR;
            if (end == v || *end || !(x > 0) || (integral && x != floor(x)))
                return da_errorf("--grid: %s=%s: expected %s", DA_GRID_KEY_NAMES[key], v,
                                 integral ? "positive integers" : "positive numbers");
            if (integral && x > 1 << 20)
                return da_errorf("--grid: %s=%s is out of range (1..%d)", DA_GRID_KEY_NAMES[key], v, 1 << 20);
            if (g->n == DA_GRID_MAX_VALUES) return da_errorf("--grid: at most %d values per axis", DA_GRID_MAX_VALUES);
            g->values[g->n++] = x;
        }
        if (!g->n) return da_errorf("--grid: axis %s has no values", ax);
    }
    return da_ok();
}

int grid_cells(const da_grid_axis *grid, int n_grid) {
    int n = 1;
    for (int a = 0; a < n_grid; a++) n *= grid[a].n;
    return n;
}

void grid_cell(const da_grid_axis *grid, int n_grid, int g, int *index, grid_shape *shape, char *name, size_t n) {
    int len = 0;
    if (n) name[0] = 0;
    for (int a = n_grid - 1; a >= 0; a--) index[a] = g % grid[a].n, g /= grid[a].n;
    for (int a = 0; a < n_grid; a++) {
        const double v = grid[a].values[index[a]];
        switch (grid[a].key) {
        case DA_GRID_HEADS: shape->heads = (int)v; break;
        case DA_GRID_DIM: shape->dim = (int)v; break;
        case DA_GRID_LAYERS: shape->layers = (int)v; break;
        case DA_GRID_LR: shape->lr = (float)v; break;
        default: shape->batch = (int)v; break;
        }
        len += snprintf(name + len, n - (size_t)len, "%s%s %g", a ? ", " : "", DA_GRID_KEY_NAMES[grid[a].key], v);
        if (len >= (int)n) len = (int)n - 1;
    }
}

void grid_describe(FILE *fp, const da_grid_axis *grid, int n_grid) {
    for (int g = 0; g < n_grid; g++) {
        fprintf(fp, "%s %s ", g ? ";" : " Grid (over the values above):", DA_GRID_KEY_NAMES[grid[g].key]);
        for (int i = 0; i < grid[g].n; i++) fprintf(fp, "%s%g", i ? "," : "", grid[g].values[i]);
    }
    if (n_grid) fprintf(fp, ".");
}
