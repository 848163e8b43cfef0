/* test_config_cli.c - a small app main: options from argv, exit through tess_runtime_finish.
 *
 * The fail tests in CMakeLists.txt run it on the files in tests/data/bad_configs/ and check exit
 * code and message. Two test-only options inject failures after a good parse:
 * test.fail_rank (that rank fails alone with a DATA error: MPI_Abort, exit 65) and
 * test.assert_rank (that rank fails an assertion: abort hook, exit 1). The other ranks wait in a
 * barrier meanwhile, as in a real step, to show that nobody hangs. */
#include <stdint.h>

#include "core/config.h"  /* tess_config_* */
#include "core/log.h"     /* tess_log_info */
#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "core/runtime.h" /* tess_runtime_* */
#include "core/signals.h" /* tess_signals_install */

static const tess_opt optim_opts[] = {
    TESS_OPT_REAL("lr", 3e-4, 0.0, 1.0, "AdamW step size"),
    TESS_OPT_INT("warmup_steps", 0, 0, INT32_MAX, "linear warm-up length"),
    TESS_OPT_BOOL("nesterov", false, "Nesterov momentum"),
    TESS_OPT_CHOICE("schedule", "cosine", "cosine|linear|constant", "learning-rate schedule"),
};
static const tess_opt ckpt_opts[] = {
    TESS_OPT_STRING("resume", "none", "checkpoint to resume from: none, auto or a path"),
};
static const tess_opt test_opts[] = {
    TESS_OPT_INT("fail_rank", -1, -1, 1 << 20, "this rank fails alone with a DATA error"),
    TESS_OPT_INT("assert_rank", -1, -1, 1 << 20, "this rank fails an assertion"),
};
static const tess_config_section sections[] = {
    TESS_CONFIG_SECTION("optim", optim_opts),
    TESS_CONFIG_SECTION("client.optim", optim_opts),
    TESS_CONFIG_SECTION("ckpt", ckpt_opts),
    TESS_CONFIG_SECTION("test", test_opts),
};

static tess_status run(tess_config *cfg, const tess_runtime *rt, int argc, char **argv,
                       bool *collective) {
    tess_config_action action;
    TESS_CHECK(tess_config_alias(cfg, "--resume", "ckpt.resume"));
    TESS_CHECK(tess_config_parse_args(cfg, rt->world, argc, argv, &action));
    if (action != TESS_CONFIG_ACTION_RUN) return TESS_OK;
    *collective = false; /* from here on a failure may be one rank's alone */
    if (tess_config_int(cfg, "test.assert_rank") == rt->rank)
        tess_assert_fail("injected assertion failure", __FILE__, __LINE__, __func__);
    TESS_REQUIRE(tess_config_int(cfg, "test.fail_rank") != rt->rank, TESS_ERR_DATA,
                 "injected local failure on rank %d", rt->rank);
    TESS_MPI_CHECK(MPI_Barrier(rt->comm));
    tess_log_info("optim.lr=%g client.optim.lr=%g client.optim.nesterov=%d ckpt.resume=%s",
                  tess_config_real(cfg, "optim.lr"), tess_config_real(cfg, "client.optim.lr"),
                  (int)tess_config_bool(cfg, "client.optim.nesterov"),
                  tess_config_string(cfg, "ckpt.resume"));
    return TESS_OK;
}

int main(int argc, char **argv) {
    tess_signals_install();
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    bool collective = true;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    tess_config *cfg = NULL;
    if (s == TESS_OK) s = tess_config_create(&cfg, sections,
                                                 (int64_t)(sizeof sections / sizeof sections[0]));
    if (s == TESS_OK) s = run(cfg, &rt, argc, argv, &collective);
    tess_config_destroy(&cfg);
    return tess_runtime_finish(&rt, s, collective);
}
