/* ckpt_resume.c - the start-up policy: clean stale tmp files, then load nothing, the newest
 * checkpoint that loads cleanly, or a given file (see ckpt.h, tess_ckpt_resume). It sits on top of
 * the load (ckpt_load.c) and the directory listing (ckpt_write.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"      /* tess_log_info, tess_log_warn */
#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "io/ckpt_impl.h"

/* The first lines of the current record, without their "[rank r] file:line func(): " prefixes,
 * joined by "; " (the reason in a fallback warning). */
static void record_reason(char *buf, size_t n, int max_lines) {
    const char *t = tess_error_text();
    size_t len = 0;
    buf[0] = '\0';
    for (int l = 0; l < max_lines && *t && len + 1 < n; l++) {
        const char *nl = strchr(t, '\n'), *end = nl ? nl : t + strlen(t), *body = t;
        for (const char *p = t; p + 4 <= end; p++)
            if (memcmp(p, "(): ", 4) == 0) {
                body = p + 4;
                break;
            }
        while (body < end && *body == ' ') body++;
        len += (size_t)snprintf(buf + len, n - len, "%s%.*s", l ? "; " : "", (int)(end - body),
                                body);
        if (!nl) break;
        t = nl + 1;
    }
}

typedef struct {
    int64_t step; /* stored step */
    const char *name;
} candidate;

static int cmp_candidate_desc(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    return (x->step < y->step) - (x->step > y->step);
}

/* Step in a committed name "ckpt_<digits>.h5" (ckpt_list_shared lists only such names). */
static int64_t name_step(const char *name) { return strtoll(name + 5, NULL, 10); }

/* Rank 0: the checkpoints of names ("name\n" lines, count of them) that pass the pre-check of
 * tess_ckpt_open and whose stored step equals the step in their name, ordered by stored step,
 * newest first, as "name\n" lines (malloc'ed). Each other file is skipped with a warning naming
 * it and the reason. Not collective. */
static tess_status order_by_stored_step(const char *dir, char *names, int64_t count,
                                        char **out) {
    candidate *c = malloc((size_t)(count ? count : 1) * sizeof *c);
    char *text = malloc(strlen(names) + 1);
    if (!c || !text) {
        free(c);
        free(text);
        TESS_REQUIRE(false, TESS_ERR_MEM, "out of memory ordering the checkpoints of '%s'", dir);
    }
    int64_t n = 0;
    for (char *p = names, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        *nl = '\0';
        char path[TESS_CKPT_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, p);
        hid_t f;
        tess_ckpt_info info;
        tess_status s = tess_ckpt_open(path, &f, &info);
        if (s == TESS_OK) {
            H5Fclose(f);
            if (info.step == name_step(p))
                c[n++] = (candidate){info.step, p};
            else
                tess_log_warn("checkpoint '%s' skipped: it holds step %lld, its name says %lld",
                              path, (long long)info.step, (long long)name_step(p));
        } else {
            char reason[1024];
            record_reason(reason, sizeof reason, 3);
            tess_log_warn("checkpoint '%s' skipped: %s", path, reason);
            tess_error_clear();
        }
    }
    qsort(c, (size_t)n, sizeof *c, cmp_candidate_desc);
    size_t len = 0;
    text[0] = '\0';
    for (int64_t i = 0; i < n; i++) len += (size_t)sprintf(text + len, "%s\n", c[i].name);
    free(c);
    *out = text;
    return TESS_OK;
}

/* Rank 0's text (malloc'ed on rank 0) on every rank (malloc'ed there). Collective on g. */
static tess_status share_text(const tess_group *g, char **text) {
    int64_t len = g->rank == 0 ? (int64_t)strlen(*text) : 0;
    TESS_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT64_T, 0, g->comm));
    if (g->rank != 0) *text = malloc((size_t)len + 1);
    TESS_CHECK(tess_par_agree(
        g, CKPT_FAILED(*text ? TESS_OK : TESS_ERR_MEM, "allocating the checkpoint list")));
    TESS_MPI_CHECK(MPI_Bcast(*text, (int)len, MPI_CHAR, 0, g->comm));
    (*text)[len] = '\0';
    return TESS_OK;
}

tess_status tess_ckpt_resume(const tess_group *g, const char *dir, const char *spec,
                             tess_ckpt_state *st, bool *resumed, char *path_out, size_t n) {
    TESS_REQUIRE(g && dir && spec && resumed, TESS_ERR_ARG,
                 "g, dir, spec and resumed must not be NULL");
    *resumed = false;
    if (path_out && n) path_out[0] = '\0';
    TESS_CHECK(tess_ckpt_clean(g, dir));
    if (spec[0] == '\0') return TESS_OK;
    if (strcmp(spec, "auto") != 0) {
        TESS_CHECK(tess_ckpt_load(g, spec, st));
        tess_log_info("resumed from step %lld (%s)", (long long)st->step, spec);
        if (path_out && n) snprintf(path_out, n, "%s", spec);
        *resumed = true;
        return TESS_OK;
    }
    char *listed, *names = NULL;
    int64_t count;
    TESS_CHECK(ckpt_list_shared(g, dir, &listed, &count));
    tess_status s = TESS_OK;
    if (g->rank == 0) s = order_by_stored_step(dir, listed, count, &names);
    free(listed);
    s = tess_par_agree(g, s);
    if (s == TESS_OK) s = share_text(g, &names);
    if (s != TESS_OK) {
        free(names);
        return s;
    }
    char first_reason[1024] = "";
    for (char *p = names, *nl; *p && !*resumed; p = nl + 1) {
        nl = strchr(p, '\n');
        *nl = '\0';
        char path[TESS_CKPT_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, p);
        tess_h5_quiet q;
        tess_h5_quiet_begin(&q);
        s = ckpt_load_state(g, path, st); /* the record then holds just the reasons */
        tess_h5_quiet_end(&q);
        if (s == TESS_OK) {
            *resumed = true;
            tess_log_info("resumed from step %lld (%s)", (long long)st->step, path);
            if (path_out && n) snprintf(path_out, n, "%s", path);
        } else if (s == TESS_ERR_DATA || s == TESS_ERR_NOINPUT) {
            char reason[1024];
            record_reason(reason, sizeof reason, 3);
            if (!first_reason[0]) snprintf(first_reason, sizeof first_reason, "%s", reason);
            tess_log_warn("checkpoint '%s' skipped: %s", path, reason);
            tess_error_clear();
            s = TESS_OK;
        } else {
            break; /* not a property of the file (MPI, memory): give up */
        }
    }
    free(names);
    TESS_CHECK(s);
    if (*resumed) return TESS_OK;
    TESS_REQUIRE(count == 0, TESS_ERR_DATA,
                 "none of the %lld checkpoints in '%s' loads%s%s%s; move them away or use "
                 "another ckpt.dir to start over",
                 (long long)count, dir, first_reason[0] ? " (the newest: " : "", first_reason,
                 first_reason[0] ? ")" : " (each skipped above)");
    tess_log_info("no checkpoint in '%s': starting from step 0", dir);
    return TESS_OK;
}

tess_status tess_ckpt_count(const tess_group *g, const char *dir, int64_t *count) {
    char *names;
    TESS_CHECK(ckpt_list_shared(g, dir, &names, count));
    free(names);
    return TESS_OK;
}
