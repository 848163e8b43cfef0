/* version.h - which build of Tessera this is: the release number of CMake's project(VERSION ...)
 * and the git commit of the source tree, captured when CMake configured the build ("unknown"
 * outside a git checkout, e.g. a release tarball; "-dirty" appended when tracked files had
 * uncommitted changes at configure time). Every program prints it for --version; runs record it
 * at the top of config.ini (io/rundir.h). Not collective; no allocation.
 */
#ifndef TESS_CORE_VERSION_H
#define TESS_CORE_VERSION_H

#include <stdbool.h>
#include <stddef.h>

/* "0.1.0". Static storage. */
const char *tess_version(void);
/* "ff38adf1c2d3", "ff38adf1c2d3-dirty" or "unknown". Static storage. */
const char *tess_version_commit(void);

/* Format "<program> (Tessera <version>, git <commit>)" (no newline) into buf (n bytes, always
 * NUL-terminated, cut if too short); program is the last path component of argv0 ("tinylm" for
 * "build/ci/apps/tinylm/tinylm"). Returns buf. */
char *tess_version_line(char *buf, size_t n, const char *argv0);

/* True if one of argv[1..argc) is "--version". */
bool tess_version_asked(int argc, char **argv);

#endif
