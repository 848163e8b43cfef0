/* test_blasinfo - the OPENBLAS_CORETYPE hint's decision (tensor/blasinfo.h) over its inputs: an
 * AVX-512 CPU whose DYNAMIC_ARCH OpenBLAS runs Haswell (or Zen) kernels, with the variable unset
 * or empty, gets "SkylakeX"; no hint without AVX-512, for a library built for one target, for
 * AVX-512 kernels already in use (any case) or when the user set the variable. And the facts the
 * start-up check reads: the library's config and kernel name are non-empty and consistent. */
#include <stdbool.h>
#include <string.h>

#include "tensor/blasinfo.h" /* tess_blasinfo_* */
#include "tess_test.h"

static const char *const dyn = "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Haswell "
                               "MAX_THREADS=64";

static bool hint_is(const char *got, const char *want) {
    return got == want || (got && want && strcmp(got, want) == 0);
}

int main(void) {
    const struct {
        bool avx512;
        const char *config, *core, *coretype, *want, *what;
    } cases[] = {
        {true, dyn, "Haswell", NULL, "SkylakeX", "AVX-512 CPU, Haswell kernels, unset"},
        {true, dyn, "Haswell", "", "SkylakeX", "empty variable counts as unset"},
        {true, dyn, "Zen", NULL, "SkylakeX", "Zen (AVX2) kernels"},
        {false, dyn, "Haswell", NULL, NULL, "no AVX-512"},
        {true, "OpenBLAS 0.3.21 NO_AFFINITY HASWELL MAX_THREADS=64", "Haswell", NULL, NULL,
         "one-target build: the variable is not read"},
        {true, dyn, "SkylakeX", NULL, NULL, "AVX-512 kernels already"},
        {true, dyn, "cooperlake", NULL, NULL, "AVX-512 kernels, lower case"},
        {true, dyn, "SapphireRapids", NULL, NULL, "AVX-512 kernels, newer family"},
        {true, dyn, "Haswell", "Haswell", NULL, "the user chose Haswell"},
        {true, dyn, "Haswell", "SkylakeX", NULL, "set but not honoured: no second-guessing"},
        {true, NULL, NULL, NULL, NULL, "no facts"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = tess_blasinfo_coretype_hint(cases[i].avx512, cases[i].config,
                                                      cases[i].core, cases[i].coretype);
        TESS_TEST_CHECK(hint_is(got, cases[i].want), "%s: got %s, want %s", cases[i].what,
                        got ? got : "no hint", cases[i].want ? cases[i].want : "no hint");
    }
    const char *config = tess_blasinfo_config(), *core = tess_blasinfo_core();
    TESS_TEST_CHECK(config && core && core[0] && strstr(config, "OpenBLAS"),
                    "library facts: config '%s', core '%s'", config ? config : "(null)",
                    core ? core : "(null)");
    /* the config string names the kernels too (dynamic builds: the ones chosen at load) */
    TESS_TEST_CHECK(!strstr(config, "DYNAMIC_ARCH") || strstr(config, core),
                    "config '%s' does not name the kernels '%s'", config, core);
    return tess_test_finish("test_blasinfo");
}
