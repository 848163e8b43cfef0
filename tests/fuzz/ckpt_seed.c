/* ckpt_seed.c - write the seed checkpoint of the ckpt fuzz target: the model of
 * tests/io/ckpt_model.h at step 40 on 1 rank, in the current format (4), as OUT
 * (tests/fuzz/corpus/ckpt/).
 * usage: ckpt_seed OUT.h5   (1 rank; regenerate the seed after a format change). */
#include <stdio.h>

#include "core/runtime.h"  /* tess_runtime_* */
#include "io/ckpt.h"       /* tess_ckpt_write */
#include "ckpt_model.h" /* ckpt_model_* (tests/io) */

static tess_status run(const tess_runtime *rt, int argc, char **argv) {
    TESS_REQUIRE(argc == 2 && rt->size == 1, TESS_ERR_ARG, "usage: ckpt_seed OUT.h5 (1 rank)");
    ckpt_model cm;
    tess_status s = ckpt_model_build(&cm, 0, 1, false);
    if (s == TESS_OK) {
        ckpt_model_fill(&cm, 40);
        s = tess_ckpt_write(rt->world, argv[1], &cm.st);
    }
    ckpt_model_free(&cm);
    TESS_CHECK(s);
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    if (s == TESS_OK) s = run(&rt, argc, argv);
    return tess_runtime_finish(&rt, s, true);
}
