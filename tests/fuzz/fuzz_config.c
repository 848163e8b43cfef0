/* fuzz_config.c - the config parser (core/config.h): INI text and command lines.
 *
 * Input: INI text, optionally followed by a NUL byte and NUL-separated command-line arguments.
 *   no NUL:   tess_config_parse_text(text, "fuzz.ini");
 *   with NUL: the text is written to a scratch file, every argument "@" is replaced by that
 *             file's path (so "--config\0@" reads it), and the arguments go through
 *             tess_config_parse_args on the 1-rank world (at most 64 of them).
 * Options: one section of each option type, and the same table under a dotted section name.
 * Properties checked (fuzz_fail otherwise):
 *   - the parse returns a status and never crashes (ASan/UBSan under the fuzz preset);
 *   - a failed parse leaves an error record;
 *   - after any parse, the resolved text (tess_config_resolved_text) reads back into a fresh
 *     config without error and resolves to the same text (the round trip config.h promises:
 *     whatever a parse accepted can be written to a run's config.ini and read back);
 *   - the help text is produced.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h" /* tess_config_* */
#include "fuzz.h"

typedef enum { FZ_RED = 0, FZ_GREEN, FZ_BLUE, FZ_COUNT } fz_colour;
static const tess_opt_enum fz_colour_names[] = {{"red", FZ_RED}, {"green", FZ_GREEN},
                                                {"blue", FZ_BLUE}};
TESS_OPT_ENUM_TABLE_CHECK(fz_colour_names, FZ_COUNT);

static const tess_opt fz_opts[] = {
    TESS_OPT_INT("steps", 10, 0, INT64_MAX, "an int64 with a wide range"),
    TESS_OPT_INT("ranks", 1, -4, 4, "a small signed int"),
    TESS_OPT_REAL("lr", 3e-4, 0.0, 1.0, "a real in [0, 1]"),
    TESS_OPT_REAL("tau", 1.0, -1e12, 1e12, "a wide real"),
    TESS_OPT_BOOL("flag", false, "a bool"),
    TESS_OPT_STRING("dir", "runs/x", "a string"),
    TESS_OPT_CHOICE("schedule", "cosine", "cosine|linear|constant", "a choice"),
    TESS_OPT_ENUM("colour", "red", fz_colour_names, "an enum"),
};
static const tess_config_section fz_sections[] = {
    TESS_CONFIG_SECTION("train", fz_opts),
    TESS_CONFIG_SECTION("client.optim", fz_opts),
};
enum { FZ_NSEC = (int)(sizeof fz_sections / sizeof fz_sections[0]), FZ_MAX_ARGS = 64 };

int LLVMFuzzerInitialize(int *argc, char ***argv) { return fuzz_start(argc, argv); }

static tess_config *fz_create(void) {
    tess_config *cfg = NULL;
    if (tess_config_create(&cfg, fz_sections, FZ_NSEC) != TESS_OK ||
        tess_config_alias(cfg, "--resume", "train.dir") != TESS_OK)
        fuzz_fail("cannot create the config");
    return cfg;
}

/* Parse per the input format; returns the status. */
static tess_status fz_parse(tess_config *cfg, char *in, size_t size) {
    size_t text_len = strnlen(in, size);
    if (text_len == size) return tess_config_parse_text(cfg, in, "fuzz.ini");
    char ini[300];
    fuzz_path(ini, sizeof ini, "fuzz.ini");
    fuzz_write_file(ini, in, text_len);
    char *argv[FZ_MAX_ARGS + 2];
    int argc = 0;
    static char prog[] = "fuzz_config";
    argv[argc++] = prog;
    /* in[size] is the NUL the caller appended: the last argument is always terminated */
    for (size_t at = text_len + 1; at <= size && argc <= FZ_MAX_ARGS; at += strlen(in + at) + 1)
        argv[argc++] = strcmp(in + at, "@") == 0 ? ini : in + at;
    argv[argc] = NULL;
    tess_config_action action;
    return tess_config_parse_args(cfg, fuzz_env.rt.world, argc, argv, &action);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *in = malloc(size + 1); /* a NUL-terminated copy: the text and the last argument */
    if (!in) return 0;
    memcpy(in, data, size);
    in[size] = '\0';
    tess_config *cfg = fz_create();
    tess_status s = fz_parse(cfg, in, size);
    fuzz_verdict("parse", s);
    if (s != TESS_OK && tess_error_text()[0] == '\0')
        fuzz_fail("parse failed (%s) without an error record", tess_status_name(s));
    tess_error_clear();

    const char *resolved = tess_config_resolved_text(cfg);
    char *r1 = resolved ? strdup(resolved) : NULL;
    if (!r1) fuzz_fail("no resolved text");
    tess_config *back = fz_create();
    if (tess_config_parse_text(back, r1, "resolved.ini") != TESS_OK)
        fuzz_fail("the resolved text does not read back:\n%s", r1);
    const char *r2 = tess_config_resolved_text(back);
    if (!r2 || strcmp(r1, r2) != 0)
        fuzz_fail("the resolved text reads back as other values:\n%s\n---\n%s", r1, r2 ? r2 : "");
    if (!tess_config_help_text(cfg, "fuzz_config")) fuzz_fail("no help text");

    free(r1);
    tess_config_destroy(&back);
    tess_config_destroy(&cfg);
    free(in);
    return 0;
}
