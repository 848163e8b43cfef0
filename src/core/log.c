/* log.c - leveled messages and the progress line (see log.h). */
#include "core/log.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/timer.h" /* tess_timer_now */

enum { LOG_LINE_BYTES = 4096 };

static int log_rank;
static tess_log_level log_level = TESS_LOG_INFO;

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

/* Format prefix + message + newline into one buffer and write it once. */
static void log_emit(int fd, const char *prefix, const char *fmt, va_list ap) {
    char buf[LOG_LINE_BYTES];
    int n = snprintf(buf, sizeof buf, "%s", prefix);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    int m = vsnprintf(buf + len, sizeof buf - len, fmt, ap);
    if (m > 0) len += (size_t)m < sizeof buf - len ? (size_t)m : sizeof buf - len - 1;
    if (len >= sizeof buf - 1) len = sizeof buf - 2;
    buf[len++] = '\n';
    if (fd == STDOUT_FILENO) fflush(stdout); /* keep order with stdio output of the same rank */
    write_all(fd, buf, len);
}

void tess_log_error(const char *fmt, ...) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "[rank %d] error: ", log_rank);
    va_list ap;
    va_start(ap, fmt);
    log_emit(STDERR_FILENO, prefix, fmt, ap);
    va_end(ap);
}

void tess_log_warn(const char *fmt, ...) {
    if (log_rank != 0 || log_level < TESS_LOG_WARN) return;
    va_list ap;
    va_start(ap, fmt);
    log_emit(STDERR_FILENO, "warning: ", fmt, ap);
    va_end(ap);
}

void tess_log_info(const char *fmt, ...) {
    if (log_rank != 0 || log_level < TESS_LOG_INFO) return;
    va_list ap;
    va_start(ap, fmt);
    log_emit(STDOUT_FILENO, "", fmt, ap);
    va_end(ap);
}

void tess_log_debug(const char *fmt, ...) {
    if (log_level < TESS_LOG_DEBUG) return;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "[rank %d] ", log_rank);
    va_list ap;
    va_start(ap, fmt);
    log_emit(STDERR_FILENO, prefix, fmt, ap);
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

void tess_progress_format(char *buf, size_t n, int64_t step, int64_t total, double loss,
                          double rate, const char *unit, double eta_s) {
    char r[32], eta[32];
    tess_log_format_si(r, sizeof r, rate);
    tess_log_format_duration(eta, sizeof eta, eta_s);
    snprintf(buf, n, "step %lld/%lld  loss %.4f  %s %s/s  ETA %s", (long long)step,
             (long long)total, loss, r, unit ? unit : "items", eta);
}

void tess_progress_init(tess_progress *p, int64_t total, const char *unit) {
    *p = (tess_progress){.total = total, .unit = unit, .tty = isatty(STDOUT_FILENO) == 1};
    p->t_start = p->t_last = tess_timer_now();
}

bool tess_progress_update(tess_progress *p, int64_t step, double loss, double items) {
    p->updates++;
    p->items += items;
    if (log_rank != 0 || log_level < TESS_LOG_INFO) return false;
    double now = tess_timer_now();
    bool last = step >= p->total;
    if (!last && now - p->t_last < 1.0) return false;
    double dt = now - p->t_last;
    double rate = dt > 0 ? p->items / dt : 0.0;
    double eta = last ? 0.0 : (now - p->t_start) / (double)p->updates * (double)(p->total - step);
    char line[256];
    size_t len = 0;
    if (p->tty) line[len++] = '\r';
    tess_progress_format(line + len, sizeof line - len - 8, step, p->total, loss, rate, p->unit,
                         eta);
    len = strlen(line);
    if (p->tty) {
        memcpy(line + len, "\033[K", 3); /* clear the rest of a longer previous line */
        len += 3;
    }
    if (!p->tty || last) line[len++] = '\n';
    fflush(stdout);
    write_all(STDOUT_FILENO, line, len);
    p->t_last = now;
    p->items = 0.0;
    return true;
}
