/* Line and bar charts with cairo (see plot.h). */
#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "study/plot.h"

/* the first four: tab10's; then four more for the ablation columns (compare --archs diff:head-norm=off ...) */
static const double COLORS[][3] = {{0.12, 0.47, 0.71}, {1.0, 0.50, 0.05}, {0.17, 0.63, 0.17}, {0.84, 0.15, 0.16},
                                   {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}};
#define N_COLORS ((int)(sizeof COLORS / sizeof COLORS[0]))
#define ML 80.0  /* margins: left, right, top, bottom */
#define MR 30.0
#define MT 50.0
#define MB 60.0

/* A "nice" tick step for a range: 1, 2 or 5 times a power of ten. */
static double nice_step(double range, int ticks) {
    double raw = range / ticks, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void text(cairo_t *cr, double x, double y, const char *s, double size, double align_x, double align_y,
                 int vertical) {
    cairo_text_extents_t e;
    cairo_set_font_size(cr, size);
    cairo_text_extents(cr, s, &e);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    if (vertical) cairo_rotate(cr, -M_PI / 2);
    cairo_move_to(cr, -e.width * align_x - e.x_bearing, e.height * align_y);
    cairo_show_text(cr, s);
    cairo_restore(cr);
}

typedef struct {
    cairo_surface_t *surf;
    cairo_t *cr;
    double x0, x1, y0, y1; /* data ranges */
} canvas;

static void canvas_open(canvas *c, const char *title) {
    c->surf = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, DA_PLOT_WIDTH, DA_PLOT_HEIGHT);
    c->cr = cairo_create(c->surf);
    cairo_set_source_rgb(c->cr, 1, 1, 1);
    cairo_paint(c->cr);
    cairo_select_font_face(c->cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(c->cr, 0, 0, 0);
    text(c->cr, DA_PLOT_WIDTH / 2.0, 30, title, 16, 0.5, 0, 0);
}

static double px(const canvas *c, double x) { return ML + (x - c->x0) / (c->x1 - c->x0) * (DA_PLOT_WIDTH - ML - MR); }
static double py(const canvas *c, double y) { return DA_PLOT_HEIGHT - MB - (y - c->y0) / (c->y1 - c->y0) * (DA_PLOT_HEIGHT - MT - MB); }

/* Axes, y grid and ticks; x ticks only when numeric. */
static void axes(canvas *c, const char *xlabel, const char *ylabel, int x_ticks) {
    cairo_t *cr = c->cr;
    char buf[32];
    double ys = nice_step(c->y1 - c->y0, 5);
    cairo_set_line_width(cr, 1);
    for (double v = ceil(c->y0 / ys) * ys; v <= c->y1 + 1e-12; v += ys) {
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, ML, py(c, v));
        cairo_line_to(cr, DA_PLOT_WIDTH - MR, py(c, v));
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        snprintf(buf, sizeof buf, "%g", fabs(v) < ys * 1e-6 ? 0.0 : v);
        text(cr, ML - 8, py(c, v), buf, 11, 1, 0.5, 0);
    }
    if (x_ticks) {
        double xs = nice_step(c->x1 - c->x0, 6);
        for (double v = ceil(c->x0 / xs) * xs; v <= c->x1 + 1e-12; v += xs) {
            snprintf(buf, sizeof buf, "%g", v);
            text(cr, px(c, v), DA_PLOT_HEIGHT - MB + 8, buf, 11, 0.5, 1, 0);
        }
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_rectangle(cr, ML, MT, DA_PLOT_WIDTH - ML - MR, DA_PLOT_HEIGHT - MT - MB);
    cairo_stroke(cr);
    text(cr, (ML + DA_PLOT_WIDTH - MR) / 2, DA_PLOT_HEIGHT - 18, xlabel, 13, 0.5, 0, 0);
    text(cr, 22, (MT + DA_PLOT_HEIGHT - MB) / 2, ylabel, 13, 0.5, 0, 1);
}

static void legend(canvas *c, const char *const *names, int n) {
    cairo_t *cr = c->cr;
    for (int i = 0; i < n; i++) {
        double y = MT + 18 + 20 * i, x = DA_PLOT_WIDTH - MR - 150;
        cairo_set_source_rgb(cr, COLORS[i % N_COLORS][0], COLORS[i % N_COLORS][1], COLORS[i % N_COLORS][2]);
        cairo_rectangle(cr, x, y - 6, 14, 12);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text(cr, x + 20, y, names[i], 12, 0, 0.5, 0);
    }
}

static da_status canvas_close(canvas *c, const char *path) {
    cairo_destroy(c->cr);
    cairo_status_t s = cairo_surface_write_to_png(c->surf, path);
    cairo_surface_destroy(c->surf);
    return s == CAIRO_STATUS_SUCCESS ? da_ok() : da_errorf("%s: cannot write PNG: %s", path, cairo_status_to_string(s));
}

static void pad_range(double *lo, double *hi, int from_zero) {
    if (from_zero && *lo > 0) *lo = 0;
    if (*hi - *lo < 1e-12) *hi = *lo + (fabs(*lo) > 0 ? fabs(*lo) * 0.1 : 1);
    double pad = (*hi - *lo) * 0.05;
    if (!from_zero || *lo < 0) *lo -= pad;
    *hi += pad;
}

da_status da_plot_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                        const da_series *s, int n_series) {
    return da_plot_lines_band(path, title, xlabel, ylabel, s, NULL, NULL, n_series);
}

da_status da_plot_lines_band(const char *path, const char *title, const char *xlabel, const char *ylabel,
                             const da_series *s, const double *const *lo, const double *const *hi, int n_series) {
    canvas c = {0};
    c.x0 = c.y0 = INFINITY;
    c.x1 = c.y1 = -INFINITY;
    for (int k = 0; k < n_series; k++)
        for (int i = 0; i < s[k].n; i++) {
            if (isnan(s[k].y[i])) continue;
            c.x0 = fmin(c.x0, s[k].x[i]), c.x1 = fmax(c.x1, s[k].x[i]);
            c.y0 = fmin(c.y0, s[k].y[i]), c.y1 = fmax(c.y1, s[k].y[i]);
            if (lo && hi && lo[k] && hi[k]) c.y0 = fmin(c.y0, lo[k][i]), c.y1 = fmax(c.y1, hi[k][i]);
        }
    if (!isfinite(c.x0)) c.x0 = 0, c.x1 = 1, c.y0 = 0, c.y1 = 1;
    if (c.x1 - c.x0 < 1e-12) c.x1 = c.x0 + 1;
    pad_range(&c.y0, &c.y1, 0);
    canvas_open(&c, title);
    axes(&c, xlabel, ylabel, 1);
    const char *names[8];
    for (int k = 0; k < n_series && k < 8; k++) { /* bands first, under every line */
        if (!lo || !hi || !lo[k] || !hi[k]) continue;
        cairo_t *cr = c.cr;
        cairo_set_source_rgba(cr, COLORS[k % N_COLORS][0], COLORS[k % N_COLORS][1], COLORS[k % N_COLORS][2], 0.2);
        int started = 0;
        for (int i = 0; i < s[k].n; i++) {
            if (isnan(s[k].y[i])) continue;
            if (!started) cairo_move_to(cr, px(&c, s[k].x[i]), py(&c, hi[k][i]));
            else cairo_line_to(cr, px(&c, s[k].x[i]), py(&c, hi[k][i]));
            started = 1;
        }
        for (int i = s[k].n - 1; i >= 0 && started; i--)
            if (!isnan(s[k].y[i])) cairo_line_to(cr, px(&c, s[k].x[i]), py(&c, lo[k][i]));
        cairo_close_path(cr);
        cairo_fill(cr);
    }
    for (int k = 0; k < n_series && k < 8; k++) {
        cairo_t *cr = c.cr;
        cairo_set_source_rgb(cr, COLORS[k % N_COLORS][0], COLORS[k % N_COLORS][1], COLORS[k % N_COLORS][2]);
        cairo_set_line_width(cr, 2);
        int started = 0;
        for (int i = 0; i < s[k].n; i++) {
            if (isnan(s[k].y[i])) continue;
            if (!started) cairo_move_to(cr, px(&c, s[k].x[i]), py(&c, s[k].y[i]));
            else cairo_line_to(cr, px(&c, s[k].x[i]), py(&c, s[k].y[i]));
            started = 1;
        }
        cairo_stroke(cr);
        for (int i = 0; i < s[k].n; i++) {
            if (isnan(s[k].y[i])) continue;
            cairo_arc(cr, px(&c, s[k].x[i]), py(&c, s[k].y[i]), 3, 0, 2 * M_PI);
            cairo_fill(cr);
        }
        names[k] = s[k].name;
    }
    legend(&c, names, n_series < 8 ? n_series : 8);
    return canvas_close(&c, path);
}

da_status da_plot_bars(const char *path, const char *title, const char *ylabel, const char *const *categories,
                       int n_cat, const char *const *groups, const double *const *values, int n_groups) {
    canvas c = {0};
    c.x0 = 0, c.x1 = n_cat;
    c.y0 = INFINITY, c.y1 = -INFINITY;
    for (int g = 0; g < n_groups; g++)
        for (int k = 0; k < n_cat; k++) c.y0 = fmin(c.y0, values[g][k]), c.y1 = fmax(c.y1, values[g][k]);
    if (!isfinite(c.y0)) c.y0 = 0, c.y1 = 1;
    pad_range(&c.y0, &c.y1, 1);
    canvas_open(&c, title);
    axes(&c, "", ylabel, 0);
    cairo_t *cr = c.cr;
    const double slot = 1.0 / (n_groups + 1);
    char buf[32];
    for (int k = 0; k < n_cat; k++) {
        for (int g = 0; g < n_groups; g++) {
            double x = k + slot * (g + 0.5), v = values[g][k];
            double xa = px(&c, x), xb = px(&c, x + slot), ya = py(&c, v > 0 ? v : 0), yb = py(&c, v > 0 ? 0 : v);
            if (c.y0 > 0) yb = py(&c, c.y0);
            cairo_set_source_rgb(cr, COLORS[g % N_COLORS][0], COLORS[g % N_COLORS][1], COLORS[g % N_COLORS][2]);
            cairo_rectangle(cr, xa, ya, xb - xa - 2, yb - ya);
            cairo_fill(cr);
            cairo_set_source_rgb(cr, 0, 0, 0);
            snprintf(buf, sizeof buf, "%.3g", v);
            text(cr, (xa + xb) / 2, ya - 4, buf, 10, 0.5, 0, 0);
        }
        cairo_set_source_rgb(cr, 0, 0, 0);
        text(cr, px(&c, k + 0.5), DA_PLOT_HEIGHT - MB + 8, categories[k], 11, 0.5, 1, 0);
    }
    legend(&c, groups, n_groups);
    return canvas_close(&c, path);
}

/* The strongest (signed) value among columns [a, b) of one row. */
static float strongest(const float *row, int a, int b) {
    float v = row[a];
    for (int j = a + 1; j < b; j++) v = fabsf(row[j]) > fabsf(v) ? row[j] : v;
    return v;
}

da_status da_plot_attention_bands(const char *path, const char *title, const da_attention_band *bands, int n_bands) {
    canvas c = {0};
    canvas_open(&c, title);
    cairo_t *cr = c.cr;
    float vmax = 0;
    for (int b = 0; b < n_bands; b++)
        for (size_t i = 0; i < (size_t)bands[b].rows * bands[b].cols; i++)
            vmax = fabsf(bands[b].map[i]) > vmax ? fabsf(bands[b].map[i]) : vmax;
    if (vmax == 0) vmax = 1;
    const double x0 = ML, w = DA_PLOT_WIDTH - ML - MR, band_h = (DA_PLOT_HEIGHT - MT - MB) / (double)n_bands;
    char buf[64];
    for (int b = 0; b < n_bands; b++) {
        const da_attention_band *B = &bands[b];
        const double y0 = MT + b * band_h + 18, h = band_h - 48, rh = h / B->rows;
        cairo_set_source_rgb(cr, 0, 0, 0);
        text(cr, x0, y0 - 6, B->name, 13, 0, 0, 0);
        const int px_cols = (int)w;
        for (int x = 0; x < px_cols; x++) {
            /* each pixel column shows the strongest weight of the columns it covers, so a
             * one-byte peak stays visible however long the context */
            int a = (int)((long)x * B->cols / px_cols), e = (int)((long)(x + 1) * B->cols / px_cols);
            if (e <= a) e = a + 1;
            if (a >= B->cols) break;
            for (int r = 0; r < B->rows; r++) {
                float v = strongest(B->map + (size_t)r * B->cols, a, e < B->cols ? e : B->cols);
                double s = sqrt(fabs(v) / vmax); /* square root: the faint noise stays visible */
                if (v >= 0) cairo_set_source_rgb(cr, 1 - s * 0.88, 1 - s * 0.53, 1 - s * 0.29);
                else cairo_set_source_rgb(cr, 1 - s * 0.16, 1 - s * 0.85, 1 - s * 0.84);
                cairo_rectangle(cr, x0 + x, y0 + r * rh, 1.0, rh);
                cairo_fill(cr);
            }
        }
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_set_line_width(cr, 1);
        cairo_rectangle(cr, x0, y0, w, h);
        cairo_stroke(cr);
        /* where the asked needle (grey) and its answer (black) lie */
        const double ym = y0 + h + 4;
        cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
        cairo_rectangle(cr, x0 + w * B->needle_begin / B->cols, ym, fmax(2, w * (B->needle_end - B->needle_begin) / B->cols), 6);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_rectangle(cr, x0 + w * B->span_begin / B->cols, ym, fmax(2, w * (B->span_end - B->span_begin) / B->cols), 6);
        cairo_fill(cr);
        text(cr, x0, ym + 10, "0", 10, 0.5, 1, 0);
        snprintf(buf, sizeof buf, "%d", B->cols);
        text(cr, x0 + w, ym + 10, buf, 10, 0.5, 1, 0);
        text(cr, x0 - 8, y0 + h / 2, "answer rows", 10, 1, 0.5, 0);
    }
    snprintf(buf, sizeof buf, "color: sqrt(|weight| / %.3g); blue > 0, red < 0", vmax);
    text(cr, x0, DA_PLOT_HEIGHT - 30, buf, 11, 0, 0, 0);
    text(cr, x0 + w, DA_PLOT_HEIGHT - 30, "bar: needle (grey), answer (black)", 11, 1, 0, 0);
    text(cr, (x0 + x0 + w) / 2, DA_PLOT_HEIGHT - 12, "context position (bytes)", 12, 0.5, 0, 0);
    return canvas_close(&c, path);
}

/* A value's color: sequential white -> blue over [lo, hi], or diverging
 * red (below 0) -> white -> blue (above 0) over [-hi, hi]. */
static void heat_color(double v, double lo, double hi, int diverging, double rgb[3]) {
    if (isnan(v)) {
        rgb[0] = rgb[1] = rgb[2] = 0.85;
        return;
    }
    double t = diverging ? v / hi : (v - lo) / (hi - lo);
    t = t < -1 ? -1 : t > 1 ? 1 : t;
    const double *end = t >= 0 ? COLORS[0] : COLORS[3];
    const double a = fabs(t);
    for (int k = 0; k < 3; k++) rgb[k] = 1 - a * (1 - end[k]);
}

da_status da_plot_heatmap(const char *path, const char *title, const char *xlabel, const char *ylabel,
                          const char *const *rows, int n_rows, const char *const *cols, int n_cols,
                          const double *values, const char *const *notes, double lo, double hi, int diverging) {
    canvas c;
    canvas_open(&c, title);
    cairo_t *cr = c.cr;
    const double W = DA_PLOT_WIDTH - ML - MR - 60, H = DA_PLOT_HEIGHT - MT - MB, x0 = ML + 60;
    const double cw = W / n_cols, ch = H / n_rows;
    for (int i = 0; i < n_rows; i++)
        for (int j = 0; j < n_cols; j++) {
            double rgb[3];
            const double v = values[(size_t)i * n_cols + j];
            heat_color(v, lo, hi, diverging, rgb);
            cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
            cairo_rectangle(cr, x0 + j * cw, MT + i * ch, cw, ch);
            cairo_fill(cr);
            const double dark = rgb[0] + rgb[1] + rgb[2] < 1.5;
            cairo_set_source_rgb(cr, dark, dark, dark);
            char buf[64];
            snprintf(buf, sizeof buf, isnan(v) ? "–" : diverging ? "%+.2f" : "%.2f", v);
            const char *note = notes ? notes[(size_t)i * n_cols + j] : NULL;
            text(cr, x0 + (j + 0.5) * cw, MT + (i + 0.5) * ch - (note && *note ? 9 : 0), buf, 14, 0.5, 0.5, 0);
            if (note && *note) text(cr, x0 + (j + 0.5) * cw, MT + (i + 0.5) * ch + 11, note, 10, 0.5, 0.5, 0);
        }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, x0, MT, W, H);
    cairo_stroke(cr);
    for (int j = 0; j < n_cols; j++) text(cr, x0 + (j + 0.5) * cw, DA_PLOT_HEIGHT - MB + 8, cols[j], 11, 0.5, 1, 0);
    for (int i = 0; i < n_rows; i++) text(cr, x0 - 6, MT + (i + 0.5) * ch, rows[i], 11, 1, 0.5, 0);
    text(cr, x0 + W / 2, DA_PLOT_HEIGHT - 18, xlabel, 13, 0.5, 0, 0);
    text(cr, 16, MT + H / 2, ylabel, 13, 0.5, 0, 1);
    return canvas_close(&c, path);
}
