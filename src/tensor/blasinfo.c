/* blasinfo.c - OpenBLAS build facts and the OPENBLAS_CORETYPE hint (see blasinfo.h). */
#include "tensor/blasinfo.h"

#include <cblas.h>
#include <stddef.h>
#include <string.h>
#include <strings.h> /* strcasecmp */

const char *tess_blasinfo_config(void) { return openblas_get_config(); }

const char *tess_blasinfo_core(void) { return openblas_get_corename(); }

bool tess_blasinfo_cpu_avx512(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

const char *tess_blasinfo_coretype_hint(bool cpu_avx512, const char *config, const char *core,
                                        const char *coretype) {
    static const char *const avx512_cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    if (!cpu_avx512 || !config || !strstr(config, "DYNAMIC_ARCH") || !core) return NULL;
    if (coretype && coretype[0] != '\0') return NULL;
    for (size_t i = 0; i < sizeof avx512_cores / sizeof avx512_cores[0]; i++)
        if (strcasecmp(core, avx512_cores[i]) == 0) return NULL;
    return "SkylakeX";
}
