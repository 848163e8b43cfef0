/* log.c - leveled messages and the progress line (see log.h). */
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/timer.h" /* tess_timer_now */

enum { LOG_LINE_BYTES = 4096, LOG_EARLY_BYTES = 16384, LOG_PROGRESS_BYTES = 256 };

static int log_rank;
static tess_log_level log_level = TESS_LOG_INFO;
static int log_fd = -1;                  /* the log file, -1 when none is open */
static char log_early[LOG_EARLY_BYTES];  /* file lines logged before the file was opened */
static size_t log_early_len;
static pthread_mutex_t log_file_lock = PTHREAD_MUTEX_INITIALIZER; /* log_fd and log_early */
/* The TTY progress line now on the screen (rank 0), without '\r' and newline; "" when none. */
static char progress_shown[LOG_PROGRESS_BYTES];

void tess_log_init(int rank, tess_log_level level) {
    log_rank = rank;
    log_level = level;
}

tess_log_level tess_log_get_level(void) { return log_level; }

static void write_all(int fd, const char *s, size_t len) {
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, s + off, len - off);
        if (w <= 0) return;
        off += (size_t)w;
    }
}

/* Append one line to the log file, stamped "YYYY-MM-DD HH:MM:SS "; before the file is open,
 * keep it for tess_log_open_file (lines that no longer fit are dropped). */
static void file_line(const char *line, size_t len) {
    char buf[LOG_LINE_BYTES + 32];
    const time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    size_t n = strftime(buf, 32, "%Y-%m-%d %H:%M:%S ", &tm);
    if (len > LOG_LINE_BYTES) len = LOG_LINE_BYTES;
    memcpy(buf + n, line, len);
    n += len;
    pthread_mutex_lock(&log_file_lock);
    if (log_fd >= 0) {
        write_all(log_fd, buf, n);
    } else if (log_early_len + n <= sizeof log_early) {
        memcpy(log_early + log_early_len, buf, n);
        log_early_len += n;
    }
    pthread_mutex_unlock(&log_file_lock);
}

/* Clear a TTY progress line before a message on the terminal (rank 0). */
static void progress_clear(void) {
    if (progress_shown[0]) write_all(STDOUT_FILENO, "\r\033[K", 4);
}

/* Draw the TTY progress line again after a message. */
static void progress_redraw(void) {
    if (!progress_shown[0]) return;
    char line[LOG_PROGRESS_BYTES + 8];
    const int n = snprintf(line, sizeof line, "\r%s\033[K", progress_shown);
    if (n > 0) write_all(STDOUT_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* Format prefix + message + newline into one buffer; write it once to fd when `show` (after
 * clearing a progress line on the terminal), and to the log file when `to_file`. */
static void log_emit(bool show, int fd, bool to_file, const char *prefix, const char *fmt,
                     va_list ap) {
    char buf[LOG_LINE_BYTES];
    int n = snprintf(buf, sizeof buf, "%s", prefix);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    int m = vsnprintf(buf + len, sizeof buf - len, fmt, ap);
    if (m > 0) len += (size_t)m < sizeof buf - len ? (size_t)m : sizeof buf - len - 1;
    if (len >= sizeof buf - 1) len = sizeof buf - 2;
    buf[len++] = '\n';
    if (to_file) file_line(buf, len);
    if (!show) return;
    fflush(stdout); /* keep order with stdio output of the same rank */
    progress_clear();
    write_all(fd, buf, len);
    progress_redraw();
}

/* Whether a message of `level` goes to the log file: at the level or above, at least INFO. */
static bool file_wants(tess_log_level level) {
    return level <= (log_level > TESS_LOG_INFO ? log_level : TESS_LOG_INFO);
}

/* Whether a record message is a traceback line: a C callee (identifiers joined by '.' or "->")
 * followed at once by '('. */
static bool is_trace(const char *msg, size_t len) {
    size_t i = 0;
    while (i < len && (msg[i] == '_' || msg[i] == '.' || (msg[i] >= 'a' && msg[i] <= 'z') ||
                       (msg[i] >= 'A' && msg[i] <= 'Z') || (i > 0 && msg[i] >= '0' && msg[i] <= '9') ||
                       (i > 0 && msg[i] == '-' && msg[i + 1] == '>') ||
                       (i > 0 && msg[i] == '>' && msg[i - 1] == '-')))
        i++;
    return i > 0 && i < len && msg[i] == '(';
}

void tess_log_error_record(bool brief) {
    const char *rec = tess_error_text();
    if (rec[0]) tess_progress_end(); /* never after a progress line on the same line */
    bool shown = true; /* whether the current record entry is shown (its later lines follow it) */
    for (const char *line = rec; *line;) {
        const size_t len = strcspn(line, "\n");
        char buf[LOG_LINE_BYTES];
        snprintf(buf, sizeof buf, "%.*s\n", (int)len, line);
        file_line(buf, strlen(buf));
        const char *msg = strstr(buf, "(): ");
        const bool entry = strncmp(buf, "[rank ", 6) == 0 && msg; /* else a continuation line */
        if (!brief) {
            write_all(STDERR_FILENO, buf, strlen(buf));
        } else if (entry) {
            shown = !is_trace(msg + 4, strlen(msg + 4));
            char out[LOG_LINE_BYTES + 8];
            const int n = snprintf(out, sizeof out, "error: %s", msg + 4);
            if (shown)
                write_all(STDERR_FILENO, out, (size_t)n < sizeof out ? (size_t)n : sizeof out - 1);
        } else if (shown) {
            write_all(STDERR_FILENO, buf, strlen(buf));
        }
        line += len + (line[len] == '\n');
    }
}

tess_status tess_log_open_file(const char *path) {
    tess_log_close_file();
    const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    TESS_REQUIRE(fd >= 0, TESS_ERR_IO, "cannot open log file '%s': %s", path, strerror(errno));
    pthread_mutex_lock(&log_file_lock);
    log_fd = fd;
    write_all(log_fd, log_early, log_early_len);
    log_early_len = 0;
    pthread_mutex_unlock(&log_file_lock);
    return TESS_OK;
}

void tess_log_close_file(void) {
    pthread_mutex_lock(&log_file_lock);
    if (log_fd >= 0) close(log_fd);
    log_fd = -1;
    pthread_mutex_unlock(&log_file_lock);
}

void tess_log_error(const char *fmt, ...) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "[rank %d] error: ", log_rank);
    va_list ap;
    va_start(ap, fmt);
    log_emit(true, STDERR_FILENO, true, prefix, fmt, ap);
    va_end(ap);
}

void tess_log_warn(const char *fmt, ...) {
    const bool show = log_rank == 0 && log_level >= TESS_LOG_WARN;
    if (!show && !file_wants(TESS_LOG_WARN)) return;
    va_list ap;
    va_start(ap, fmt);
    log_emit(show, STDERR_FILENO, file_wants(TESS_LOG_WARN), "warning: ", fmt, ap);
    va_end(ap);
}

void tess_log_info(const char *fmt, ...) {
    const bool show = log_rank == 0 && log_level >= TESS_LOG_INFO;
    va_list ap;
    va_start(ap, fmt);
    log_emit(show, STDOUT_FILENO, file_wants(TESS_LOG_INFO), "", fmt, ap);
    va_end(ap);
}

void tess_log_debug(const char *fmt, ...) {
    if (log_level < TESS_LOG_DEBUG) return;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "[rank %d] ", log_rank);
    va_list ap;
    va_start(ap, fmt);
    log_emit(true, STDERR_FILENO, true, prefix, fmt, ap);
    va_end(ap);
}

void tess_log_format_si(char *buf, size_t n, double x) {
    static const char suffix[] = {'\0', 'k', 'M', 'G', 'T', 'P'};
    if (!isfinite(x)) {
        snprintf(buf, n, "%g", x);
        return;
    }
    double a = fabs(x);
    if (a < 999.5) {
        snprintf(buf, n, "%.0f", x);
        return;
    }
    size_t k = 0;
    while (k + 1 < sizeof suffix && a >= 999.5) {
        a /= 1000.0;
        x /= 1000.0;
        k++;
    }
    snprintf(buf, n, a < 9.995 ? "%.2f%c" : a < 99.95 ? "%.1f%c" : "%.0f%c", x, suffix[k]);
}

void tess_log_format_duration(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) {
        snprintf(buf, n, "?");
        return;
    }
    long long t = llround(s);
    if (t < 60)
        snprintf(buf, n, "%llds", t);
    else if (t < 3600)
        snprintf(buf, n, "%lldm%02llds", t / 60, t % 60);
    else if (t < 86400)
        snprintf(buf, n, "%lldh%02lldm", t / 3600, t % 3600 / 60);
    else
        snprintf(buf, n, "%lldd%02lldh", t / 86400, t % 86400 / 3600);
}

void tess_progress_format(char *buf, size_t n, const char *what, int64_t pos, int64_t total,
                          double loss, double rate, const char *unit, double eta_s) {
    char r[48] = "", eta[32], where[64], lossb[40] = "";
    if (rate > 0) { /* a loop that reports no items shows no rate */
        char si[32];
        tess_log_format_si(si, sizeof si, rate);
        snprintf(r, sizeof r, "  %s %s/s", si, unit ? unit : "items");
    }
    tess_log_format_duration(eta, sizeof eta, eta_s);
    if (!what) what = "step";
    if (total > 0)
        snprintf(where, sizeof where, "%s %lld/%lld", what, (long long)pos, (long long)total);
    else
        snprintf(where, sizeof where, "%s %lld", what, (long long)pos);
    if (!isnan(loss)) snprintf(lossb, sizeof lossb, "  loss %.4g", loss);
    snprintf(buf, n, "%s%s%s%s%s", where, lossb, r, total > 0 ? "  ETA " : "",
             total > 0 ? eta : "");
}

tess_progress_style tess_progress_decide(bool stdout_tty, const char *term, bool launched) {
    const bool term_ok = term && term[0] && strcmp(term, "dumb") != 0;
    return stdout_tty && term_ok && !launched ? TESS_PROGRESS_TTY : TESS_PROGRESS_LINES;
}

tess_progress_style tess_progress_resolve(tess_progress_style style) {
    if (style != TESS_PROGRESS_AUTO) return style;
    static const char *const launcher_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                                "SLURM_STEP_ID"};
    bool launched = false;
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
        launched = launched || getenv(launcher_vars[i]) != NULL;
    return tess_progress_decide(isatty(STDOUT_FILENO) == 1, getenv("TERM"), launched);
}

void tess_progress_init(tess_progress *p, int64_t total, const char *what, const char *unit,
                        tess_progress_style style, double every) {
    *p = (tess_progress){.total = total, .what = what ? what : "step", .unit = unit,
                         .style = tess_progress_resolve(style), .every = every > 0 ? every : 1.0};
    p->t_start = p->t_last = p->t_file = tess_timer_now();
    progress_shown[0] = '\0';
}

/* The line for position pos at time now over the items since t_since. */
static void progress_line(const tess_progress *p, char *buf, size_t n, int64_t pos, double loss,
                          double now, double t_since, double items) {
    const bool last = p->total > 0 && pos >= p->total;
    const double dt = now - t_since;
    const double rate = dt > 0 ? items / dt : 0.0;
    const double eta = last ? 0.0
                       : pos > p->first_pos
                           ? (now - p->t_first) / (double)(pos - p->first_pos) *
                                 (double)(p->total - pos)
                           : -1.0;
    tess_progress_format(buf, n, p->what, pos, p->total, loss, rate, p->unit, eta);
}

bool tess_progress_update(tess_progress *p, int64_t pos, double loss, double items) {
    if (p->updates++ == 0) {
        p->first_pos = pos;
        p->t_first = tess_timer_now();
    }
    p->items += items;
    p->items_file += items;
    if (log_rank != 0) return false;
    const double now = tess_timer_now();
    const bool last = p->total > 0 && pos >= p->total;
    char line[LOG_PROGRESS_BYTES];
    if (log_fd >= 0 && (last || now - p->t_file >= p->every)) {
        progress_line(p, line, sizeof line - 1, pos, loss, now, p->t_file, p->items_file);
        const size_t len = strlen(line);
        line[len] = '\n';
        file_line(line, len + 1);
        p->t_file = now;
        p->items_file = 0.0;
    }
    if (log_level < TESS_LOG_INFO || p->style == TESS_PROGRESS_OFF) return false;
    const double wait = p->style == TESS_PROGRESS_TTY ? 1.0 : p->every;
    if (!last && now - p->t_last < wait) return false;
    progress_line(p, line, sizeof line, pos, loss, now, p->t_last, p->items);
    fflush(stdout);
    if (p->style == TESS_PROGRESS_TTY) {
        snprintf(progress_shown, sizeof progress_shown, "%s", line);
        progress_redraw();
        if (last) {
            write_all(STDOUT_FILENO, "\n", 1);
            progress_shown[0] = '\0';
        }
    } else {
        char out[LOG_PROGRESS_BYTES + 1];
        const int n = snprintf(out, sizeof out, "%s\n", line);
        write_all(STDOUT_FILENO, out, (size_t)n < sizeof out ? (size_t)n : sizeof out - 1);
    }
    p->t_last = now;
    p->items = 0.0;
    return true;
}

void tess_progress_end(void) {
    if (!progress_shown[0]) return;
    write_all(STDOUT_FILENO, "\n", 1);
    progress_shown[0] = '\0';
}
