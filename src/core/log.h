/* log.h - leveled messages and the progress line of long loops.
 *
 * Rank 0 talks; any rank can be asked:
 *   error  any rank, stderr, "[rank r] error: ..."
 *   warn   rank 0 only, stderr, "warning: ..."
 *   info   rank 0 only, stdout
 *   debug  every rank when the level is DEBUG, stderr, "[rank r] ..."
 * Each message (a newline is added) is formatted into one buffer and written with one write(2),
 * so lines of different ranks never interleave. A log file (tess_log_open_file) gets a copy. Messages longer than 4 KiB are cut.
 * Not thread-safe to reconfigure; printing from several threads is safe. The progress line
 * belongs to the thread that updates it.
 */
#ifndef TESS_CORE_LOG_H
#define TESS_CORE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */

/* Message levels; the run driver's option log.level names them (src/run/run.c). */
typedef enum { TESS_LOG_ERROR = 0, TESS_LOG_WARN, TESS_LOG_INFO, TESS_LOG_DEBUG } tess_log_level;

/* Set this process's rank (in the run communicator) and the level. Before init: rank 0, INFO. */
void tess_log_init(int rank, tess_log_level level);
tess_log_level tess_log_get_level(void);

/* Also write this process's messages to the file `path` (appended; a resumed run continues its
 * log), each line stamped with the UTC time: every message of this process at the level or
 * above, but at least INFO (a quiet terminal keeps a full log), including warn and info, which
 * the terminal shows from rank 0 only, and the progress lines. Messages logged before the call
 * (up to 16 KiB since start-up) are written first, so the file starts with the run's first
 * lines. Not collective: each process opens its own file (the run driver: rank 0 run.log, and
 * run.rank<r>.log on the other ranks with log.per_rank). TESS_ERR_IO naming the path. */
tess_status tess_log_open_file(const char *path);
/* Close the log file (no-op when none is open). */
void tess_log_close_file(void);

/* Write this thread's error record (core/status.h) to stderr and the log file. brief: on stderr
 * only what went wrong, "error: <message>" for each record entry that is not a traceback entry
 * (one whose message is the failed call, "name(...)", as TESS_CHECK records it), without the
 * "[rank r] file:line func(): " prefixes, with the further lines of a multi-line message as they
 * are; the log file still gets the whole record. Not brief: the whole record on both, as
 * tess_error_write. */
void tess_log_error_record(bool brief);

void tess_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tess_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tess_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tess_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* How the progress line is shown (the run driver's option log.progress):
 *   AUTO   TTY when tess_progress_decide says the terminal is real, otherwise LINES;
 *   TTY    one line rewritten in place with '\r' and ESC[K about once a second;
 *   LINES  one plain line every `every` seconds (batch jobs, redirected output);
 *   OFF    no progress line (the log file still gets its lines). */
typedef enum {
    TESS_PROGRESS_AUTO = 0,
    TESS_PROGRESS_TTY,
    TESS_PROGRESS_LINES,
    TESS_PROGRESS_OFF
} tess_progress_style;

/* The rule of AUTO, a pure function: TTY only if stdout is a terminal, TERM is set and is not
 * "dumb", and the process was not started by an MPI launcher (`launched`). Open MPI's mpiexec
 * gives rank 0 a pseudo-terminal even when its own output goes to a file, so isatty cannot tell a
 * terminal from `mpiexec ... > out.log`; under a launcher the line is therefore plain (ask for
 * log.progress = tty to get the rewritten line in an interactive mpiexec). */
tess_progress_style tess_progress_decide(bool stdout_tty, const char *term, bool launched);
/* AUTO resolved for this process: tess_progress_decide(isatty(1), $TERM, launched), launched when
 * OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or SLURM_STEP_ID is set; other styles unchanged. */
tess_progress_style tess_progress_resolve(tess_progress_style style);

/* Progress line for a loop that reaches position `total` (0: unknown, then no total and no ETA),
 * printed by rank 0 on stdout, e.g.
 *   step 120/1000  loss 2.346  12.3k tok/s  ETA 1m23s
 *   samples 241617/600000  112k samples/s  ETA 3s
 * The position counts steps, or whatever `what` names (samples): it may advance by any amount per
 * update. In the resolved style, always for the last update (position >= total); the loss is left
 * out when it is NaN. The log file (tess_log_open_file) gets a plain line every `every` seconds
 * whatever the style. While a TTY line is on the screen, any other message of this process first
 * clears it and the line is drawn again after the message, so no message lands mid-line. The
 * struct is caller-owned; no allocation. */
typedef struct {
    int64_t total;
    const char *what;   /* what the position counts, e.g. "step", "samples"; not copied */
    const char *unit;   /* unit of the rate, e.g. "tok", "samples"; not copied */
    tess_progress_style style; /* resolved: TTY, LINES or OFF */
    double every;       /* seconds between LINES lines and log-file lines */
    double t_start;     /* tess_timer_now() at init */
    double t_last;      /* time of the last line on stdout (t_start before the first) */
    double items;       /* items since the last line on stdout */
    double t_file;      /* time of the last line in the log file */
    double items_file;  /* items since the last line in the log file */
    int64_t updates;    /* tess_progress_update calls since init */
    int64_t first_pos;  /* position at the first update, and its time: the ETA's origin */
    double t_first;
} tess_progress;

/* style is resolved here (tess_progress_resolve); every > 0; what NULL means "step". */
void tess_progress_init(tess_progress *p, int64_t total, const char *what, const char *unit,
                        tess_progress_style style, double every);
/* Record that the loop reached position `pos` (<= total, not decreasing) with `loss` (NaN: none)
 * after processing `items` items (tokens, samples) since the previous update. Returns true if a
 * line was printed on stdout (rank 0 only). The ETA extrapolates the rate of progress since the
 * first update ("ETA ?" until the position has moved past it). */
bool tess_progress_update(tess_progress *p, int64_t pos, double loss, double items);
/* End a TTY line left on the screen (a loop left before its last step) with a newline. */
void tess_progress_end(void);

/* The progress line without newline, e.g. "step 120/1000  loss 2.346  12.3k tok/s  ETA 1m23s"
 * (what = "step", NULL also), "samples 2400/6000  ...": the loss with 4 significant digits (%.4g)
 * and left out when NaN; total <= 0 prints the position alone and no ETA; rate in items per
 * second, left out when not > 0; eta_s < 0 prints "ETA ?". */
void tess_progress_format(char *buf, size_t n, const char *what, int64_t pos, int64_t total,
                          double loss, double rate, const char *unit, double eta_s);
/* "950", "12.3k", "4.56M", "1.20G": 3 significant digits above 1000. */
void tess_log_format_si(char *buf, size_t n, double x);
/* "45s", "1m23s", "2h03m", "3d04h". Negative or non-finite: "?". */
void tess_log_format_duration(char *buf, size_t n, double seconds);

#endif
