/* signals.c - the stop flag (see signals.h). */
#include "core/signals.h"

#include <signal.h>
#include <stddef.h>

static volatile sig_atomic_t stop_signal = 0;

static void on_stop(int sig) { stop_signal = sig; }

void tess_signals_install(void) {
    struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* A write beyond the file size limit (ulimit -f) then fails with EFBIG, which the writer
     * reports, instead of killing the rank without a message. */
    signal(SIGXFSZ, SIG_IGN);
}

bool tess_signals_stop_requested(void) { return stop_signal != 0; }

int tess_signals_last(void) { return (int)stop_signal; }
