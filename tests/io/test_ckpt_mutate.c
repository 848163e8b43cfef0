/* test_ckpt_mutate - the checkpoint mutation test: no single flipped bit or truncation of a
 * format 4 checkpoint crashes or hangs a reader, and each one is detected by tess_ckpt_verify and
 * by tess_ckpt_load (the load that resume runs), with the same verdict on every rank.
 *
 * A small checkpoint (ckpt_model.h, written collectively) is read into memory on rank 0, which
 * mutates one file on disk per case; every rank then verifies and loads it and must get
 * TESS_ERR_DATA naming the file. The regions come from the file's integrity record: the metadata
 * region is every byte that is not tensor data (record, superblock, object headers, heaps,
 * B-trees, attributes, /config, /manifest, trailing metadata), the data region the entry
 * datasets' raw data.
 *   default: every metadata byte with one bit flipped (bit = offset mod 8), every 13th data byte,
 *            every 7th truncation length (and 0, 1, size-1);
 *   full:    all 8 bits of every byte of the file, every truncation length (LABELS slow);
 *   sample:  every 23rd metadata byte, every 97th data byte, every 127th length (for 2 ranks).
 * A case that takes more than CASE_SECONDS ends the test through SIGALRM (a hang is a failure).
 * The timing of the cases is printed (slowest case, mean). Run in-process for speed; the binary
 * (tess-ckpt) and resume-auto cases are in check_tool.sh and check_resume_fallback.sh. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_model.h"
#include "ckpt_tamper.h"
#include "core/runtime.h" /* tess_runtime_* */
#include "core/timer.h"   /* tess_timer_now */
#include "tess_test.h"

enum { CASE_SECONDS = 60 };

static const char *good = "mutate_good.h5", *bad = "mutate_bad.h5";
static char current[128] = "none"; /* the case under way, for the watchdog */

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_ckpt_mutate: FAIL: a case took too long (hang): ";
    ssize_t w = write(2, msg, sizeof msg - 1);
    w += write(2, current, strlen(current));
    w += write(2, "\n", 1);
    (void)w;
    _exit(3);
}

typedef struct {
    unsigned char *bytes; /* the good file (rank 0) */
    int64_t size;
    unsigned char *is_data; /* per byte: 1 inside a data extent (every rank) */
    int fd;                 /* bad.h5, open for writing (rank 0) */
    int64_t cases, missed;
    double slowest, total;
} mutate_run;

/* Rank 0 makes bad.h5 (a copy of the good file) the good bytes with byte `at` xor mask, in
 * place, or (mask 0) truncates it to `at` bytes; every rank then verifies and loads it; a flip is
 * undone afterwards. Truncations run from the longest down. Collective. */
static void run_case(const tess_group *g, mutate_run *m, ckpt_model *cm, int64_t at,
                     unsigned char mask) {
    snprintf(current, sizeof current, "%s at byte %lld (mask 0x%02x)",
             mask ? "flip" : "truncation", (long long)at, mask);
    int ok = 1;
    if (g->rank == 0) {
        const unsigned char b = (unsigned char)(m->bytes[at] ^ mask);
        ok = mask ? pwrite(m->fd, &b, 1, (off_t)at) == 1 : ftruncate(m->fd, (off_t)at) == 0;
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, g->comm);
    TESS_TEST_CHECK(ok, "writing %s", current);
    alarm(CASE_SECONDS);
    const double t0 = tess_timer_now();
    for (int op = 0; op < 2; op++) {
        tess_error_clear();
        const tess_status s =
            op == 0 ? tess_ckpt_verify(g, bad, NULL) : tess_ckpt_load(g, bad, &cm->st);
        const bool named = strstr(tess_error_text(), "'mutate_bad.h5'") != NULL;
        if (s != TESS_ERR_DATA || !named) {
            m->missed++;
            TESS_TEST_CHECK(false, "%s: %s returned %s%s; record:\n%s", current,
                            op ? "load" : "verify", tess_status_name(s),
                            named ? "" : " without naming the file", tess_error_text());
        }
        int v[2] = {(int)s, -(int)s}, r[2];
        MPI_Allreduce(v, r, 2, MPI_INT, MPI_MAX, g->comm);
        TESS_TEST_CHECK(r[0] == -r[1], "%s: ranks disagree", current);
    }
    tess_error_clear();
    const double dt = tess_timer_now() - t0;
    alarm(0);
    if (g->rank == 0 && mask)
        TESS_TEST_CHECK(pwrite(m->fd, &m->bytes[at], 1, (off_t)at) == 1, "restoring %s", current);
    m->cases++;
    m->total += dt;
    if (dt > m->slowest) m->slowest = dt;
}

int main(int argc, char **argv) {
    int level;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &level);
    tess_runtime rt;
    if (tess_runtime_start(&rt, MPI_COMM_WORLD) != TESS_OK) return 1;
    tess_group *g = NULL;
    if (tess_group_create(rt.comm, "test", &g) != TESS_OK) return 1;
    const bool full = argc > 1 && strcmp(argv[1], "full") == 0;
    const bool sample = argc > 1 && strcmp(argv[1], "sample") == 0;
    const int64_t meta_every = sample ? 23 : 1, data_every = sample ? 97 : 13,
                  len_every = sample ? 127 : 7;
    signal(SIGALRM, on_alarm);
    ckpt_model cm;
    TESS_TEST_CHECK(ckpt_model_build(&cm, rt.rank, rt.size, false) == TESS_OK, "build");
    ckpt_model_fill(&cm, 100);
    TESS_TEST_CHECK(tess_ckpt_write(g, good, &cm.st) == TESS_OK, "write: %s", tess_error_text());
    TESS_TEST_CHECK(tess_ckpt_verify(g, good, NULL) == TESS_OK, "good file: %s",
                    tess_error_text());

    /* rank 0: the file's bytes and its regions, from the integrity record */
    mutate_run m = {.bytes = NULL};
    int64_t nmeta = 0, ndata = 0;
    if (rt.rank == 0) {
        ckpt_seal_info in;
        ckpt_msgs msgs = {.lines = 0};
        TESS_TEST_CHECK(ckpt_seal_check(good, &in, &msgs) == TESS_OK, "record: %s", msgs.text);
        m.size = in.file_bytes;
        m.bytes = malloc((size_t)m.size);
        m.is_data = calloc((size_t)m.size, sizeof *m.is_data);
        FILE *f = fopen(good, "rb");
        TESS_TEST_CHECK(m.bytes && m.is_data && f &&
                            fread(m.bytes, 1, (size_t)m.size, f) == (size_t)m.size,
                        "reading %s", good);
        if (f) fclose(f);
        TESS_TEST_CHECK(tamper_copy(good, bad) == 0, "copying %s", good);
        m.fd = open(bad, O_WRONLY);
        TESS_TEST_CHECK(m.fd >= 0, "opening %s", bad);
        for (int64_t i = 0; i < in.nextents; i++) {
            int64_t off = 0, len = 0;
            for (int b = 0; b < 8; b++) {
                off |= (int64_t)m.bytes[128 + 16 * i + b] << (8 * b);
                len |= (int64_t)m.bytes[128 + 16 * i + 8 + b] << (8 * b);
            }
            for (int64_t k = off; k < off + len; k++) m.is_data[k] = 1;
            ndata += len;
        }
        nmeta = m.size - ndata;
        printf("file %lld bytes: metadata %lld, tensor data %lld in %lld extents\n",
               (long long)m.size, (long long)nmeta, (long long)ndata, (long long)in.nextents);
    }
    MPI_Bcast(&m.size, 1, MPI_INT64_T, 0, rt.comm);
    if (rt.rank != 0) m.is_data = calloc((size_t)m.size, 1);
    TESS_TEST_CHECK(m.is_data, "allocating the regions");
    MPI_Bcast(m.is_data, (int)m.size, MPI_UNSIGNED_CHAR, 0, rt.comm);

    /* flips: every metadata byte, a sample (default) or all of the data */
    for (int64_t at = 0; at < m.size; at++) {
        if (!full && at % (m.is_data[at] ? data_every : meta_every) != 0) continue;
        for (int bit = 0; bit < 8; bit++)
            if (full || bit == at % 8) run_case(g, &m, &cm, at, (unsigned char)(1u << bit));
    }
    const int64_t flips = m.cases;
    /* truncations, longest first */
    for (int64_t len = m.size - 1; len >= 0; len--)
        if (full || len % len_every == 0 || len == 1 || len == m.size - 1)
            run_case(g, &m, &cm, len, 0);

    if (rt.rank == 0) {
        printf("%lld flips and %lld truncations (%s): %lld undetected; slowest case %.4f s, "
               "mean %.5f s\n",
               (long long)flips, (long long)(m.cases - flips),
               full ? "full" : sample ? "sample" : "default",
               (long long)m.missed, m.slowest, m.total / (double)(m.cases ? m.cases : 1));
        close(m.fd);
        remove(bad);
    }
    free(m.bytes);
    free(m.is_data);
    ckpt_model_free(&cm);
    int rc = tess_test_finish_mpi("test_ckpt_mutate", rt.comm);
    tess_group_destroy(&g);
    tess_runtime_finish(&rt, TESS_OK, true);
    return rc;
}
