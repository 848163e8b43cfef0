/* ckpt_resume.c - the start-up policy: clean stale tmp files, then load nothing, the newest
 * checkpoint that loads cleanly, or a given file (see ckpt.h, tess_ckpt_resume). It sits on top of
 * the load (ckpt_load.c) and the directory listing (ckpt_write.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h" /* tess_log_info, tess_log_warn */
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
    char *names;
    int64_t count;
    TESS_CHECK(ckpt_list_shared(g, dir, &names, &count));
    char first_reason[1024] = "";
    tess_status s = TESS_OK;
    int64_t tried = 0;
    for (char *p = names, *nl; *p && !*resumed; p = nl + 1) {
        nl = strchr(p, '\n');
        *nl = '\0';
        char path[TESS_CKPT_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, p);
        tried++;
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
    TESS_REQUIRE(tried == 0, TESS_ERR_DATA,
                 "none of the %lld checkpoints in '%s' loads (the newest: %s); move them away or "
                 "use another ckpt.dir to start over",
                 (long long)tried, dir, first_reason);
    tess_log_info("no checkpoint in '%s': starting from step 0", dir);
    return TESS_OK;
}

tess_status tess_ckpt_count(const tess_group *g, const char *dir, int64_t *count) {
    char *names;
    TESS_CHECK(ckpt_list_shared(g, dir, &names, count));
    free(names);
    return TESS_OK;
}
