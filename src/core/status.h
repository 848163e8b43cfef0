/* status.h - status codes, error records with a rank-tagged traceback, and the three checks.
 *
 * Library functions that can fail return a tess_status. Each level that sees a failure appends
 * one line "[rank r] file:line func(): message" to a per-thread record (TESS_CHECK, TESS_REQUIRE),
 * so the record reads as a traceback. Only an app's main ends a run: it writes the record once
 * (tess_error_write) and aborts through its communicator. Nothing here calls exit().
 *
 * TESS_REQUIRE  usage/input errors, always on, returns a status with the offending values.
 * TESS_CHECK    propagate a failed status, adding this call site to the traceback.
 * TESS_ASSERT   invariants in hot kernels; compiled in only with TESS_ASSERTS (Debug default);
 *               a failure prints one line and calls the abort hook (MPI_Abort in apps).
 */
#ifndef TESS_CORE_STATUS_H
#define TESS_CORE_STATUS_H

#include <stddef.h>

typedef enum {
    TESS_OK = 0,
    TESS_ERR_ARG,      /* bad argument or usage (a bug in the caller, or bad command line) */
    TESS_ERR_MEM,      /* allocation failed or arena exhausted */
    TESS_ERR_MPI,      /* an MPI call returned an error */
    TESS_ERR_IO,       /* I/O error while writing */
    TESS_ERR_NOINPUT,  /* missing or unreadable input file */
    TESS_ERR_CONFIG,   /* bad configuration: unknown key, bad value, out of range */
    TESS_ERR_DATA,     /* bad data: corrupt or incompatible dataset or checkpoint */
    TESS_ERR_DIVERGED, /* training produced non-finite values */
    TESS_ERR_INTERNAL, /* a bug: an invariant did not hold */
    TESS_STATUS_COUNT
} tess_status;

/* Process exit code for a status (sysexits.h where one fits; docs/architecture.md): 0, 64, 71, 1, 74, 66, 78, 65, 3, 1. */
int tess_status_exit_code(tess_status s);
/* Short upper-case name, e.g. "CONFIG". */
const char *tess_status_name(tess_status s);

/* Rank shown in every record line; set once by the runtime after MPI_Init. Default 0. */
void tess_error_set_rank(int rank);

/* Append "[rank r] file:line func(): <fmt...>" to this thread's record and return s.
 * The line is formatted into one buffer; an over-long record keeps its first lines. */
tess_status tess_error_push(tess_status s, const char *file, int line, const char *func,
                            const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The record so far ("" if none). Owned by the library; valid until the next push or clear. */
const char *tess_error_text(void);
/* Forget the record (after a failure was handled, e.g. a fallback to an older checkpoint). */
void tess_error_clear(void);
/* Write the record to stderr with one write(2) call, so lines of different ranks never mix. */
void tess_error_write(void);

/* Called by a failed TESS_ASSERT after printing; apps register MPI_Abort on their communicator.
 * Without a hook, abort() is called. */
typedef void (*tess_abort_fn)(int exit_code, void *ctx);
void tess_set_abort_hook(tess_abort_fn fn, void *ctx);
void tess_assert_fail(const char *cond, const char *file, int line, const char *func);

#define TESS_CHECK(call)                                                                   \
    do {                                                                                   \
        tess_status s_ = (call);                                                           \
        if (s_ != TESS_OK) return tess_error_push(s_, __FILE__, __LINE__, __func__, "%s", #call); \
    } while (0)

#define TESS_REQUIRE(cond, code, ...)                                                      \
    do {                                                                                   \
        if (!(cond)) return tess_error_push((code), __FILE__, __LINE__, __func__, __VA_ARGS__); \
    } while (0)

#ifdef TESS_ASSERTS
#define TESS_ASSERT(cond)                                                                  \
    do {                                                                                   \
        if (!(cond)) tess_assert_fail(#cond, __FILE__, __LINE__, __func__);                \
    } while (0)
#else
#define TESS_ASSERT(cond) ((void)0)
#endif

#endif
