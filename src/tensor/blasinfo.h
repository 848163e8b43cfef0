/* blasinfo.h - which OpenBLAS build and kernels the products run on, and the hint for CPUs that
 * OpenBLAS does not know.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's, among others) picks one family of kernels at load
 * time from the CPU it recognises, or the family OPENBLAS_CORETYPE names (read once, when the
 * library loads). A release older than the CPU may fall back to an older family, and an
 * environment may force one: Debian 12's 0.3.21 picks its AVX-512 Cooperlake kernels on an AMD
 * EPYC with AVX-512, but runs its Haswell (AVX2) ones there with OPENBLAS_CORETYPE=Haswell,
 * where OPENBLAS_CORETYPE=SkylakeX makes a MoE layer's step 1.7-1.9x shorter
 * (docs/benchmarks.md). Kernel families sum in different orders, so results differ in the
 * last bits between them: a run and its resumed continuations should use the same one. The run
 * driver logs the build and the kernels at start-up and the hint when it applies
 * (src/run/run.h); io/rundir.h records the kernels in config.ini. Not collective; no
 * allocation.
 */
#ifndef TESS_TENSOR_BLASINFO_H
#define TESS_TENSOR_BLASINFO_H

#include <stdbool.h>

/* openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Haswell
 * MAX_THREADS=64". Static storage. */
const char *tess_blasinfo_config(void);
/* openblas_get_corename(): the kernel family in use, e.g. "Haswell", "SkylakeX". Static. */
const char *tess_blasinfo_core(void);
/* True if this CPU (and the OS) runs the AVX-512 subsets OpenBLAS's SkylakeX kernels use:
 * AVX512F, CD, BW, DQ and VL. False off x86. */
bool tess_blasinfo_cpu_avx512(void);

/* The OPENBLAS_CORETYPE value worth trying, or NULL: "SkylakeX" when the CPU has AVX-512
 * (cpu_avx512), the library chooses its kernels at load time (config names DYNAMIC_ARCH), the
 * kernels in use (core) are not an AVX-512 family (SkylakeX, Cooperlake, SapphireRapids; any
 * case) and the user has not chosen (coretype, the variable's value, is NULL or empty). Pure:
 * the start-up check passes the facts above and getenv("OPENBLAS_CORETYPE"). */
const char *tess_blasinfo_coretype_hint(bool cpu_avx512, const char *config, const char *core,
                                        const char *coretype);

#endif
