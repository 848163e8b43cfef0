/* calm.h - the calm app (docs/calm.md): its modes and its context, shared by main.c and the
 * mode files (simulate.c). */
#ifndef CALM_APP_H
#define CALM_APP_H

#include <stdint.h>

#include "core/config.h" /* tess_opt_enum */
#include "run/run.h"     /* tess_run, tess_run_step_out */
#include "sim.h"         /* calm_sim_config */

typedef enum { CALM_MODE_SIMULATE = 0, CALM_MODE_COUNT } calm_mode;

static const tess_opt_enum calm_mode_names[] = {{"simulate", CALM_MODE_SIMULATE}};
TESS_OPT_ENUM_TABLE_CHECK(calm_mode_names, CALM_MODE_COUNT);

/* simulate mode: sessions dealt to ranks, `size` sessions per step. */
typedef struct {
    calm_sim_config cfg;
    char dir[4096]; /* where the session files go */
    char prefix[64];
    int64_t total; /* animals x sessions */
} calm_simulate;

typedef struct {
    calm_mode mode;
    calm_simulate sim;
} calm_app;

/* The simulator's option table ([sim] section) and its reading into a calm_sim_config
 * (seed from run.seed). */
extern const tess_opt calm_sim_opts[];
extern const int64_t calm_sim_nopts;
tess_status calm_sim_config_read(calm_sim_config *c, const tess_config *cfg, uint64_t seed);

/* simulate mode (simulate.c): setup is collective; a step writes this rank's session of the
 * round (global session index cursor + rank), so the files do not depend on the rank count. */
tess_status calm_simulate_setup(tess_run *run, calm_simulate *s);
tess_status calm_simulate_step(tess_run *run, calm_simulate *s, tess_run_step_out *out);

#endif
