/* rundir.c - run directory creation (see rundir.h). */
#include "io/rundir.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/version.h"     /* tess_version, tess_version_commit */
#include "tensor/blasinfo.h" /* tess_blasinfo_core */
#include "par/coll.h"         /* tess_par_agree */

tess_status tess_rundir_mkdirs(const char *path) {
    char buf[4096];
    TESS_REQUIRE(strlen(path) > 0 && strlen(path) < sizeof buf, TESS_ERR_ARG,
                 "run directory path must have 1..%zu characters, got %zu", sizeof buf - 1,
                 strlen(path));
    strcpy(buf, path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return tess_error_push(TESS_ERR_IO, __FILE__, __LINE__, __func__,
                                   "cannot create directory '%s': %s", buf, strerror(errno));
        struct stat st;
        TESS_REQUIRE(stat(buf, &st) == 0 && S_ISDIR(st.st_mode), TESS_ERR_IO,
                     "'%s' exists and is not a directory", buf);
        *p = saved;
        if (saved == '\0') break;
    }
    return TESS_OK;
}

/* The provenance comment lines at the top of config.ini (see rundir.h). */
static int write_provenance(FILE *f, int nranks) {
    char host[256] = "unknown", started[32] = "unknown";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    time_t now = time(NULL);
    struct tm utc;
    if (now != (time_t)-1 && gmtime_r(&now, &utc))
        strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return fprintf(f,
                   "; tessera_version = %s\n; git_commit = %s\n; ranks = %d\n; host = %s\n"
                   "; started_utc = %s\n; blas_kernels = %s\n",
                   tess_version(), tess_version_commit(), nranks, host, started,
                   tess_blasinfo_core());
}

static tess_status prepare_on_root(const char *dir, const char *config_text, int nranks) {
    char path[4200];
    TESS_CHECK(tess_rundir_mkdirs(dir));
    snprintf(path, sizeof path, "%s/plots", dir);
    TESS_CHECK(tess_rundir_mkdirs(path));
    if (!config_text) return TESS_OK;
    snprintf(path, sizeof path, "%s/config.ini", dir);
    FILE *f = fopen(path, "w");
    TESS_REQUIRE(f, TESS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    int ok = write_provenance(f, nranks) >= 0 && fputs(config_text, f) >= 0;
    ok = (fclose(f) == 0) && ok;
    TESS_REQUIRE(ok, TESS_ERR_IO, "error writing '%s': %s", path, strerror(errno));
    return TESS_OK;
}

tess_status tess_rundir_prepare(const tess_group *g, const char *dir, const char *config_text) {
    tess_status s = g->rank == 0 ? prepare_on_root(dir, config_text, g->size) : TESS_OK;
    if (s != TESS_OK)
        s = tess_error_push(s, __FILE__, __LINE__, __func__, "preparing run directory '%s'", dir);
    TESS_CHECK(tess_par_agree(g, s));
    return TESS_OK;
}
