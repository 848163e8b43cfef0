/* version.c - build identification (see version.h). TESS_VERSION and TESS_GIT_COMMIT are set by
 * CMake (the top-level CMakeLists.txt); only this file is recompiled when the commit changes. */
#include "core/version.h"

#include <stdio.h>
#include <string.h>

const char *tess_version(void) { return TESS_VERSION; }

const char *tess_version_commit(void) { return TESS_GIT_COMMIT; }

char *tess_version_line(char *buf, size_t n, const char *argv0) {
    const char *prog = argv0 && argv0[0] ? argv0 : "tessera";
    const char *slash = strrchr(prog, '/');
    if (slash && slash[1]) prog = slash + 1;
    if (n > 0) snprintf(buf, n, "%s (Tessera %s, git %s)", prog, TESS_VERSION, TESS_GIT_COMMIT);
    return buf;
}

bool tess_version_asked(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--version") == 0) return true;
    return false;
}
