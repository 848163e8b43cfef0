/* plot.c - gnuplot driver (see plot.h). The script goes to gnuplot's stdin through popen. */
#include "io/plot.h"

#include <stdio.h>
#include <stdlib.h>

tess_status tess_plot_csv(const char *csv, const char *png, const char *title, const char *xcol,
                          const char *const *ycols, int ny, bool logy) {
    TESS_REQUIRE(ny >= 1, TESS_ERR_ARG, "plot '%s': no columns to plot", png);
    TESS_REQUIRE(system("command -v gnuplot >/dev/null 2>&1") == 0, TESS_ERR_NOINPUT,
                 "gnuplot not found: cannot draw '%s' (install gnuplot-nox)", png);
    FILE *gp = popen("gnuplot", "w");
    TESS_REQUIRE(gp, TESS_ERR_IO, "cannot start gnuplot for '%s'", png);
    fprintf(gp, "set terminal pngcairo size 800,500 noenhanced\n");
    fprintf(gp, "set output '%s'\nset datafile separator ','\nset key top right\n", png);
    fprintf(gp, "set title '%s'\nset xlabel '%s'\nset grid\n%s", title, xcol,
            logy ? "set logscale y\n" : "");
    fprintf(gp, "plot ");
    for (int i = 0; i < ny; i++)
        fprintf(gp, "'%s' using '%s':'%s' with lines lw 2 title '%s'%s", csv, xcol, ycols[i],
                ycols[i], i + 1 < ny ? ", " : "\n");
    int rc = pclose(gp);
    TESS_REQUIRE(rc == 0, TESS_ERR_IO, "gnuplot failed (status %d) drawing '%s' from '%s'", rc, png,
                 csv);
    return TESS_OK;
}
