/* PNG figures for reports, drawn with cairo: line charts and grouped bar
 * charts, 800 x 500, one color per series (DIFF blue, baseline orange). */
#ifndef DA_PLOT_H
#define DA_PLOT_H

#include "diffattn/experiments.h"

/* The API is in diffattn/experiments.h. */

#endif
