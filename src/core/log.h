/* log.h - leveled messages and the progress line of long loops.
 *
 * Rank 0 talks; any rank can be asked (STYLE.md 2.11):
 *   error  any rank, stderr, "[rank r] error: ..."
 *   warn   rank 0 only, stderr, "warning: ..."
 *   info   rank 0 only, stdout
 *   debug  every rank when the level is DEBUG, stderr, "[rank r] ..."
 * Each message (a newline is added) is formatted into one buffer and written with one write(2),
 * so lines of different ranks never interleave. Messages longer than 4 KiB are cut.
 * Not thread-safe to reconfigure; printing from several threads is safe.
 */
#ifndef TESS_CORE_LOG_H
#define TESS_CORE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Message levels; the run driver's option log.level names them (src/run/run.c). */
typedef enum { TESS_LOG_ERROR = 0, TESS_LOG_WARN, TESS_LOG_INFO, TESS_LOG_DEBUG } tess_log_level;

/* Set this process's rank (in the run communicator) and the level. Before init: rank 0, INFO. */
void tess_log_init(int rank, tess_log_level level);
tess_log_level tess_log_get_level(void);

void tess_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tess_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tess_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tess_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Progress line for a loop of `total` steps, printed by rank 0 on stdout, e.g.
 *   step 120/1000  loss 2.3456  12.3k tok/s  ETA 1m23s
 * at most about once a second, and always for step == total. On a terminal the line is
 * rewritten in place with '\r' (and ended with '\n' at the last step); otherwise each update is
 * a full line. The struct is caller-owned; no allocation. */
typedef struct {
    int64_t total;
    const char *unit;   /* e.g. "tok", "samples"; not copied */
    double t_start;     /* tess_timer_now() at init */
    double t_last;      /* time of the last printed line (t_start before the first) */
    double items;       /* items since the last printed line */
    int64_t updates;    /* tess_progress_update calls since init */
    bool tty;           /* stdout is a terminal */
} tess_progress;

void tess_progress_init(tess_progress *p, int64_t total, const char *unit);
/* Record that step `step` (1-based, <= total) finished with `loss` after processing `items`
 * items (tokens, samples) in that step. Returns true if a line was printed (rank 0 only).
 * The ETA assumes the remaining steps take the mean time of the steps seen since init. */
bool tess_progress_update(tess_progress *p, int64_t step, double loss, double items);

/* The progress line without newline, e.g. "step 120/1000  loss 2.3456  12.3k tok/s  ETA 1m23s".
 * rate in items per second; eta_s < 0 prints "ETA ?". */
void tess_progress_format(char *buf, size_t n, int64_t step, int64_t total, double loss,
                          double rate, const char *unit, double eta_s);
/* "950", "12.3k", "4.56M", "1.20G": 3 significant digits above 1000. */
void tess_log_format_si(char *buf, size_t n, double x);
/* "45s", "1m23s", "2h03m", "3d04h". Negative or non-finite: "?". */
void tess_log_format_duration(char *buf, size_t n, double seconds);

#endif
