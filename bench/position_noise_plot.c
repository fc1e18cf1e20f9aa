/* Lines with bands from a text file, through diffattn's cairo figures
 * (da_plot_lines_band): the figures of bench/position_noise_study.sh.
 *   position_noise_plot OUT.png TITLE XLABEL YLABEL < SERIES
 * SERIES: "series NAME" lines, each followed by "x y lo hi" lines (lo, hi: nan for no band). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "study/plot.h"

enum { MAX_SERIES = 16, MAX_POINTS = 64 };

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: position_noise_plot OUT.png TITLE XLABEL YLABEL < SERIES\n");
        return 1;
    }
    static char names[MAX_SERIES][128];
    static double x[MAX_SERIES][MAX_POINTS], y[MAX_SERIES][MAX_POINTS], lo[MAX_SERIES][MAX_POINTS],
        hi[MAX_SERIES][MAX_POINTS];
    da_series s[MAX_SERIES];
    const double *los[MAX_SERIES], *his[MAX_SERIES];
    int n = -1;
    char line[512];
    while (fgets(line, sizeof line, stdin)) {
        if (!strncmp(line, "series ", 7)) {
            if (++n == MAX_SERIES) return fprintf(stderr, "at most %d series\n", MAX_SERIES), 1;
            snprintf(names[n], sizeof names[n], "%s", line + 7);
            names[n][strcspn(names[n], "\n")] = 0;
            s[n] = (da_series){names[n], x[n], y[n], 0};
            los[n] = lo[n], his[n] = hi[n];
            continue;
        }
        double a, b, c, d;
        if (n < 0 || sscanf(line, "%lf %lf %lf %lf", &a, &b, &c, &d) != 4) continue;
        if (s[n].n == MAX_POINTS) return fprintf(stderr, "at most %d points a series\n", MAX_POINTS), 1;
        const int i = s[n].n++;
        x[n][i] = a, y[n][i] = b, lo[n][i] = c, hi[n][i] = d;
    }
    if (n < 0) return fprintf(stderr, "no series on stdin\n"), 1;
    for (int k = 0; k <= n; k++) { /* a series without a band at every point gets none */
        int band = s[k].n > 0;
        for (int i = 0; i < s[k].n; i++) band &= isfinite(lo[k][i]) && isfinite(hi[k][i]);
        if (!band) los[k] = his[k] = NULL;
    }
    da_status st = da_plot_lines_band(argv[1], argv[2], argv[3], argv[4], s, los, his, n + 1);
    if (st.code) return fprintf(stderr, "%s\n", st.msg), 1;
    return 0;
}
