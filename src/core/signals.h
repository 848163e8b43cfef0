/* signals.h - the stop flag: SIGTERM, SIGUSR1 and SIGINT ask the run to stop at the next step.
 *
 * Slurm sends SIGUSR1 (--signal) or SIGTERM before a time limit or preemption; mpirun forwards
 * SIGUSR1 to every rank (it kills the ranks on SIGTERM/SIGINT). The handler only sets a volatile sig_atomic_t flag; the
 * training loop polls tess_signals_stop_requested() at step boundaries and agrees on it over the
 * run communicator (so every rank stops after the same step), checkpoints, and exits 75.
 */
#ifndef TESS_CORE_SIGNALS_H
#define TESS_CORE_SIGNALS_H

#include <stdbool.h>

/* Install the handlers. Call first thing in main, before MPI_Init: a signal that arrives before
 * would kill the rank with the default action. Also ignores SIGXFSZ, so that a write beyond the
 * file size limit (ulimit -f) fails with EFBIG and is reported as an I/O error (exit 74) instead
 * of killing the rank silently. Not collective. Safe to call more than once. */
void tess_signals_install(void);
/* True once any of the three signals arrived on this rank. Async-signal-safe to read. */
bool tess_signals_stop_requested(void);
/* The number of the last signal received (SIGTERM, SIGUSR1, SIGINT), or 0. For the log line. */
int tess_signals_last(void);

#endif
