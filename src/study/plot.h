/* PNG figures for reports, drawn with cairo: line charts and grouped bar
 * charts, 800 x 500, one color per series (DIFF blue, baseline orange). */
#ifndef DA_PLOT_H
#define DA_PLOT_H

#include "diffattn/core.h"

/* PNG figures drawn with cairo, 800 x 500, one color per series (DIFF blue,
 * baseline orange). */
#define DA_PLOT_WIDTH 800
#define DA_PLOT_HEIGHT 500

typedef struct {
    const char *name;
    const double *x, *y; /* n points; NAN y values are skipped */
    int n;
} da_series;

da_status da_plot_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                        const da_series *s, int n_series);
/* The same with a shaded band lo[k][i]..hi[k][i] under series k (e.g. mean
 * ± sd over seeds); lo[k] or hi[k] NULL: no band for that series. */
da_status da_plot_lines_band(const char *path, const char *title, const char *xlabel, const char *ylabel,
                             const da_series *s, const double *const *lo, const double *const *hi, int n_series);

/* values[g][c]: group g (a series, e.g. an architecture), category c. */
da_status da_plot_bars(const char *path, const char *title, const char *ylabel, const char *const *categories,
                       int n_cat, const char *const *groups, const double *const *values, int n_groups);

/* Attention of a few query rows over a long context, one band per model
 * (the paper's Figure 1): map (rows, cols), weights may be negative (DIFF),
 * with the asked needle [needle_begin, needle_end) and its answer
 * [span_begin, span_end) marked under the band. All bands share one scale. */
typedef struct {
    const char *name;
    const float *map;
    int rows, cols;
    int span_begin, span_end, needle_begin, needle_end;
} da_attention_band;

da_status da_plot_attention_bands(const char *path, const char *title, const da_attention_band *bands, int n_bands);

/* A grid of cells, values (n_rows, n_cols), each printed in its cell with
 * an optional note under it (notes NULL, or "" for none); NAN cells are grey.
 * Sequential (white to blue over [lo, hi]) or diverging (red below 0, blue
 * above, saturated at +-hi). */
da_status da_plot_heatmap(const char *path, const char *title, const char *xlabel, const char *ylabel,
                          const char *const *rows, int n_rows, const char *const *cols, int n_cols,
                          const double *values, const char *const *notes, double lo, double hi, int diverging);


#endif
