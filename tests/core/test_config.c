/* test_config.c - options: defaults, INI sections and prefixes, precedence, every error class
 * collected with file:line and key, --help, and a resolved text that reads back to the same
 * values. Runs at 1 and 2 ranks (the file is read by rank 0 and broadcast). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "core/config.h" /* tess_config_* */
#include "tess_test.h"

static const tess_opt optim_opts[] = {
    TESS_OPT_REAL("lr", 3e-4, 0.0, 1.0, "AdamW step size"),
    TESS_OPT_INT("warmup_steps", 0, 0, INT32_MAX, "linear warm-up length"),
    TESS_OPT_BOOL("nesterov", false, "Nesterov momentum"),
    TESS_OPT_CHOICE("schedule", "cosine", "cosine|linear|constant", "learning-rate schedule"),
};
static const tess_opt run_opts[] = {
    TESS_OPT_RESUMABLE(STRING, "name", "run", "run directory name under runs/"),
    TESS_OPT_INT("seed", 1234, 0, UINT32_MAX, "Philox seed"),
    TESS_OPT_REAL("tiny", 1e-7, 0.0, 1.0, "a value that must round-trip"),
};
static const tess_config_section sections[] = {
    TESS_CONFIG_SECTION("optim", optim_opts),
    TESS_CONFIG_SECTION("client.optim", optim_opts),
    TESS_CONFIG_SECTION("run", run_opts),
};
enum { NSEC = sizeof sections / sizeof sections[0] };

static int rank;

static bool has(const char *text, const char *needle) { return strstr(text, needle) != NULL; }

static void check_record(const char *needle) {
    TESS_TEST_CHECK(has(tess_error_text(), needle), "record has \"%s\":\n%s", needle,
                    tess_error_text());
}

static void write_file(const char *path, const char *text) {
    if (rank == 0) {
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(text, f);
            fclose(f);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void test_defaults_and_sections(void) {
    tess_config *cfg = NULL;
    TESS_TEST_CHECK(tess_config_create(&cfg, sections, NSEC) == TESS_OK, "create: %s",
                    tess_error_text());
    TESS_TEST_CHECK(tess_config_real(cfg, "optim.lr") == 3e-4, "default lr");
    TESS_TEST_CHECK(tess_config_int(cfg, "run.seed") == 1234, "default seed");
    TESS_TEST_CHECK(strcmp(tess_config_string(cfg, "run.name"), "run") == 0, "default name");
    TESS_TEST_CHECK(strcmp(tess_config_string(cfg, "optim.schedule"), "cosine") == 0,
                    "default choice");
    const char *ini = "; comment\n"
                      "[client.optim]\n"
                      "lr = 1e-2   ; inline comment\n"
                      "schedule = linear\n"
                      "nesterov = Yes\n"
                      "\n"
                      "[run]\n"
                      "name = exp 1\n"
                      "seed: 42\n";
    TESS_TEST_CHECK(tess_config_parse_text(cfg, ini, "t.ini") == TESS_OK, "parse: %s",
                    tess_error_text());
    TESS_TEST_CHECK(tess_config_real(cfg, "client.optim.lr") == 1e-2, "client lr read");
    TESS_TEST_CHECK(tess_config_real(cfg, "optim.lr") == 3e-4, "bare section untouched");
    TESS_TEST_CHECK(strcmp(tess_config_string(cfg, "client.optim.schedule"), "linear") == 0,
                    "choice value");
    TESS_TEST_CHECK(tess_config_bool(cfg, "client.optim.nesterov"), "bool Yes");
    TESS_TEST_CHECK(!tess_config_bool(cfg, "optim.nesterov"), "bool default");
    TESS_TEST_CHECK(strcmp(tess_config_string(cfg, "run.name"), "exp 1") == 0, "string");
    TESS_TEST_CHECK(tess_config_int(cfg, "run.seed") == 42, "name: value form");
    TESS_TEST_CHECK(tess_config_set(cfg, "optim.nesterov", "off") == TESS_OK, "set off");
    TESS_TEST_CHECK(!tess_config_bool(cfg, "optim.nesterov"), "bool off");
    TESS_TEST_CHECK(tess_config_set(cfg, "optim.warmup_steps", " 7 ") == TESS_OK, "set int");
    TESS_TEST_CHECK(tess_config_int(cfg, "optim.warmup_steps") == 7, "int set");
    TESS_TEST_CHECK(tess_config_set(cfg, "run.name", "a ; b") == TESS_ERR_CONFIG,
                    "a string INI would cut is refused");
    TESS_TEST_CHECK(tess_config_set(cfg, "optim.lr", "nan") == TESS_ERR_CONFIG, "nan refused");
    tess_error_clear();
    tess_config_destroy(&cfg);
    TESS_TEST_CHECK(cfg == NULL, "destroy nulls the handle");
}

/* Every error of the text is reported with file:line and key, then counted. */
static void test_errors_collected(void) {
    tess_config *cfg = NULL;
    TESS_TEST_CHECK(tess_config_create(&cfg, sections, NSEC) == TESS_OK, "create");
    const char *ini = "orphan = 1\n"            /* 1 */
                      "[optim]\n"               /* 2 */
                      "lr = 0.5\n"              /* 3 */
                      "lrr = 0.1\n"             /* 4 */
                      "warmup_steps = 12x\n"    /* 5 */
                      "lr = 0.2\n"              /* 6 */
                      "schedule = cosin\n"      /* 7 */
                      "nesterov = maybe\n"      /* 8 */
                      "just words\n"            /* 9 */
                      "[optm]\n"                /* 10 */
                      "lr = 3\n"                /* 11: under an unknown section, not repeated */
                      "[client.optim\n"         /* 12 */
                      "[client.optim]\n"        /* 13 */
                      "lr = 2\n"                /* 14 */
                      "  warmup_steps = 3\n"    /* 15 */
                      "[run]\n"                 /* 16 */
                      "seed = 99999999999\n"    /* 17 */
                      "tiny = 1e-3.5\n";        /* 18 */
    tess_status s = tess_config_parse_text(cfg, ini, "bad.ini");
    TESS_TEST_CHECK(s == TESS_ERR_CONFIG, "status %s", tess_status_name(s));
    check_record("bad.ini:1: key 'orphan' is outside any [section]");
    check_record("bad.ini:4: unknown key 'optim.lrr' (did you mean 'optim.lr'?)");
    check_record("bad.ini:5: bad value for 'optim.warmup_steps': '12x' is not an integer");
    check_record("bad.ini:6: duplicate key 'optim.lr' (first set on line 3)");
    check_record("bad.ini:7: bad value for 'optim.schedule': 'cosin' is not one of "
                 "cosine|linear|constant");
    check_record("bad.ini:8: bad value for 'optim.nesterov': 'maybe' is not a boolean");
    check_record("bad.ini:9: syntax error: expected 'key = value'");
    check_record("bad.ini:10: unknown section [optm] (did you mean [optim]?)");
    check_record("bad.ini:12: syntax error: section header without ']'");
    check_record("bad.ini:14: bad value for 'client.optim.lr': '2' is out of range [0, 1]");
    check_record("bad.ini:15: indented line continues the value of 'client.optim.lr'");
    check_record("bad.ini:17: bad value for 'run.seed': '99999999999' is out of range "
                 "[0, 4294967295]");
    check_record("bad.ini:18: bad value for 'run.tiny': '1e-3.5' is not a number");
    check_record("13 errors in the command line or configuration");
    TESS_TEST_CHECK(!has(tess_error_text(), "bad.ini:11"), "keys under an unknown section are "
                    "not reported again:\n%s", tess_error_text());
    tess_error_clear();
    char long_line[400] = "[run]\nname = ";
    memset(long_line + strlen(long_line), 'x', 250);
    strcat(long_line, "\nseed = 1\n");
    s = tess_config_parse_text(cfg, long_line, "long.ini");
    check_record("long.ini:2: line too long (257 characters, at most 197)");
    TESS_TEST_CHECK(s == TESS_ERR_CONFIG && tess_config_int(cfg, "run.seed") == 1,
                    "lines after a long one are still read");
    tess_error_clear();
    tess_config_destroy(&cfg);
}

static tess_group *world; /* MPI_COMM_WORLD as a group, for parse_args */

static tess_status parse(tess_config *cfg, int argc, const char **argv,
                         tess_config_action *action) {
    return tess_config_parse_args(cfg, world, argc, (char **)argv, action);
}

static void test_command_line(void) {
    tess_config *cfg = NULL;
    tess_config_action action;
    TESS_TEST_CHECK(tess_config_create(&cfg, sections, NSEC) == TESS_OK, "create");
    TESS_TEST_CHECK(tess_config_alias(cfg, "--name", "run.name") == TESS_OK, "alias");
    TESS_TEST_CHECK(tess_config_alias(cfg, "--nope", "run.nope") == TESS_ERR_ARG,
                    "alias of an undeclared key");
    TESS_TEST_CHECK(tess_config_alias(cfg, "--set", "run.name") == TESS_ERR_ARG,
                    "alias may not shadow a built-in flag");
    tess_error_clear();
    write_file("cli.ini", "[optim]\nlr = 0.1\nwarmup_steps = 5\n[run]\nname = file\n");
    const char *argv[] = {"prog", "--set", "optim.lr=0.25", "--config", "cli.ini",
                          "--set=optim.warmup_steps=9", "--name", "cli", "--set",
                          "run.name = last "};
    tess_status s = parse(cfg, 10, argv, &action);
    TESS_TEST_CHECK(s == TESS_OK && action == TESS_CONFIG_ACTION_RUN, "parse: %s",
                    tess_error_text());
    TESS_TEST_CHECK(tess_config_real(cfg, "optim.lr") == 0.25, "--set beats the file even "
                    "when given before --config");
    TESS_TEST_CHECK(tess_config_int(cfg, "optim.warmup_steps") == 9, "--set=... form");
    TESS_TEST_CHECK(strcmp(tess_config_string(cfg, "run.name"), "last") == 0,
                    "later --set wins over an earlier alias, value trimmed: '%s'",
                    tess_config_string(cfg, "run.name"));
    TESS_TEST_CHECK(tess_config_real(cfg, "client.optim.lr") == 3e-4, "client keeps default");

    const char *bad[] = {"prog", "--print_config", "--config", "missing.ini", "--set",
                         "optim.lr", "--set", "client.optim.lr=abc", "stray", "--name"};
    s = parse(cfg, 10, bad, &action);
    TESS_TEST_CHECK(s == TESS_ERR_NOINPUT, "a missing file decides the status: %s",
                    tess_status_name(s));
    check_record("unknown option '--print_config' (did you mean '--print-config'?)");
    check_record("cannot open config 'missing.ini': No such file or directory");
    check_record("--set optim.lr: expected SECTION.KEY=VALUE (no '=')");
    check_record("--set client.optim.lr=abc: bad value for 'client.optim.lr': 'abc' is not a "
                 "number");
    check_record("unexpected argument 'stray'");
    check_record("option '--name' needs a value");
    check_record("6 errors in the command line or configuration");
    tess_error_clear();

    const char *flag_only[] = {"prog", "--bogus"};
    s = parse(cfg, 2, flag_only, &action);
    TESS_TEST_CHECK(s == TESS_ERR_ARG, "unknown flag is a usage error: %s", tess_status_name(s));
    tess_error_clear();
    const char *set_only[] = {"prog", "--set", "optim.lr"};
    s = parse(cfg, 3, set_only, &action);
    TESS_TEST_CHECK(s == TESS_ERR_CONFIG, "--set without '=' is a config error: %s",
                    tess_status_name(s));
    tess_error_clear();

    const char *help[] = {"prog", "--bogus", "--help"};
    s = parse(cfg, 3, help, &action);
    TESS_TEST_CHECK(s == TESS_OK && action == TESS_CONFIG_ACTION_HELP, "--help wins");
    const char *h = tess_config_help_text(cfg, "prog");
    TESS_TEST_CHECK(has(h, "  optim.lr  (real, default 0.0003, range [0, 1])\n      AdamW step "
                           "size\n"), "help lists lr:\n%s", h);
    TESS_TEST_CHECK(has(h, "client.optim.schedule  (one of cosine|linear|constant, default "
                           "cosine)"), "help lists a choice");
    TESS_TEST_CHECK(has(h, "run.seed  (int, default 1234, range [0, 4294967295])"), "help int");
    TESS_TEST_CHECK(has(h, "--name VALUE") && has(h, "same as --set run.name=VALUE"),
                    "help lists the alias");
    TESS_TEST_CHECK(tess_error_text()[0] == '\0', "--help leaves no error record");

    const char *print[] = {"prog", "--print-config"};
    s = parse(cfg, 2, print, &action);
    TESS_TEST_CHECK(s == TESS_OK && action == TESS_CONFIG_ACTION_PRINTED, "--print-config");
    tess_config_destroy(&cfg);
}

/* --print-options: every option as JSON (parsed back with jansson: ranges as numbers, choices as
 * an array), wins over a bad --set; flags the caller handles are listed in --help, suggested for a
 * typo and refused twice or as a built-in. */
static void test_listing(void) {
    tess_config *cfg = NULL;
    tess_config_action action;
    TESS_TEST_CHECK(tess_config_create(&cfg, sections, NSEC) == TESS_OK, "create");
    TESS_TEST_CHECK(tess_config_flag(cfg, "--check", "check and exit") == TESS_OK, "flag");
    TESS_TEST_CHECK(tess_config_flag(cfg, "--check", "again") == TESS_ERR_ARG, "flag twice");
    TESS_TEST_CHECK(tess_config_flag(cfg, "--print-options", "x") == TESS_ERR_ARG,
                    "flag shadowing a built-in");
    TESS_TEST_CHECK(tess_config_alias(cfg, "--check", "run.name") == TESS_ERR_ARG,
                    "alias shadowing the caller's flag");
    tess_error_clear();
    TESS_TEST_CHECK(has(tess_config_help_text(cfg, "prog"), "  --check               check and "
                        "exit\n"), "--help lists the caller's flag");
    const char *typo[] = {"prog", "--chek"};
    TESS_TEST_CHECK(parse(cfg, 2, typo, &action) == TESS_ERR_ARG, "mistyped flag");
    check_record("unknown option '--chek' (did you mean '--check'?)");
    tess_error_clear();

    const char *list[] = {"prog", "--set", "optim.lr=7", "--print-options"};
    tess_status s = parse(cfg, 4, list, &action);
    TESS_TEST_CHECK(s == TESS_OK && action == TESS_CONFIG_ACTION_OPTIONS,
                    "--print-options wins over a bad --set");
    json_error_t err;
    json_t *root = json_loads(tess_config_options_json(cfg, "prog"), 0, &err);
    TESS_TEST_CHECK(root != NULL, "listing is JSON: %s", root ? "" : err.text);
    const json_t *opts = json_object_get(root, "options");
    int64_t total = 0;
    for (int i = 0; i < NSEC; i++) total += sections[i].nopts;
    TESS_TEST_CHECK(json_is_array(opts) && (int64_t)json_array_size(opts) == total,
                    "one entry per option of every section");
    TESS_TEST_CHECK(strcmp(json_string_value(json_object_get(root, "program")), "prog") == 0,
                    "program name");
    bool lr = false, choice = false, seed = false;
    size_t i;
    const json_t *o;
    json_array_foreach(opts, i, o) {
        const char *key = json_string_value(json_object_get(o, "key"));
        const char *type = json_string_value(json_object_get(o, "type"));
        if (strcmp(key, "optim.lr") == 0)
            lr = strcmp(type, "real") == 0 &&
                 json_real_value(json_object_get(o, "default")) == 3e-4 &&
                 json_number_value(json_object_get(o, "min")) == 0.0 &&
                 json_number_value(json_object_get(o, "max")) == 1.0;
        if (strcmp(key, "client.optim.schedule") == 0) {
            const json_t *c = json_object_get(o, "choices");
            choice = strcmp(type, "choice") == 0 && json_array_size(c) == 3 &&
                     strcmp(json_string_value(json_array_get(c, 1)), "linear") == 0;
        }
        if (strcmp(key, "run.seed") == 0)
            seed = strcmp(type, "int") == 0 &&
                   json_integer_value(json_object_get(o, "max")) == 4294967295LL;
    }
    TESS_TEST_CHECK(lr, "optim.lr: real, default 3e-4, range [0, 1]");
    TESS_TEST_CHECK(choice, "client.optim.schedule: choices [cosine, linear, constant]");
    TESS_TEST_CHECK(seed, "run.seed: int, max 4294967295");
    json_decref(root);
    tess_config_destroy(&cfg);
}

/* The resolved text reads back into a fresh config with bitwise-equal values. */
static void test_resolved_round_trip(void) {
    tess_config *a = NULL, *b = NULL;
    TESS_TEST_CHECK(tess_config_create(&a, sections, NSEC) == TESS_OK, "create a");
    TESS_TEST_CHECK(tess_config_create(&b, sections, NSEC) == TESS_OK, "create b");
    TESS_TEST_CHECK(tess_config_set(a, "optim.lr", "0.1") == TESS_OK, "set lr");
    TESS_TEST_CHECK(tess_config_set(a, "client.optim.lr", "0.30000000000000004") == TESS_OK,
                    "set lr needing 17 digits");
    TESS_TEST_CHECK(tess_config_set(a, "run.tiny", "1.2345678901234567e-300") == TESS_OK,
                    "set tiny");
    TESS_TEST_CHECK(tess_config_set(a, "run.name", "") == TESS_OK, "empty string");
    TESS_TEST_CHECK(tess_config_set(a, "client.optim.schedule", "constant") == TESS_OK, "choice");
    TESS_TEST_CHECK(tess_config_set(a, "client.optim.nesterov", "on") == TESS_OK, "bool");
    const char *text = tess_config_resolved_text(a);
    TESS_TEST_CHECK(text && has(text, "[client.optim]\nlr = 0.30000000000000004\n"),
                    "resolved text:\n%s", text ? text : "(null)");
    TESS_TEST_CHECK(text && has(text, "[optim]\nlr = 0.1\n"), "shortest real");
    TESS_TEST_CHECK(tess_config_parse_text(b, text, "resolved") == TESS_OK, "reads back: %s",
                    tess_error_text());
    static const char *const reals[] = {"optim.lr", "client.optim.lr", "run.tiny"};
    for (int i = 0; i < 3; i++)
        TESS_TEST_CHECK(tess_config_real(a, reals[i]) == tess_config_real(b, reals[i]),
                        "%s round trip", reals[i]);
    TESS_TEST_CHECK(strcmp(tess_config_string(b, "run.name"), "") == 0, "empty string back");
    TESS_TEST_CHECK(strcmp(tess_config_string(b, "client.optim.schedule"), "constant") == 0,
                    "choice back");
    TESS_TEST_CHECK(tess_config_bool(b, "client.optim.nesterov"), "bool back");
    TESS_TEST_CHECK(tess_config_int(b, "run.seed") == 1234, "int back");
    tess_config_destroy(&a);
    tess_config_destroy(&b);
}

/* ENUM options read the value from their table, not the list position: the table below is
 * deliberately in another order than the enum. */
typedef enum { COLOR_RED = 0, COLOR_GREEN, COLOR_BLUE, COLOR_COUNT } color;
static const tess_opt_enum color_names[] = {
    {"blue", COLOR_BLUE}, {"red", COLOR_RED}, {"green", COLOR_GREEN}};
TESS_OPT_ENUM_TABLE_CHECK(color_names, COLOR_COUNT);

static void test_enum(void) {
    static const tess_opt paint_opts[] = {TESS_OPT_ENUM("color", "green", color_names, "paint")};
    const tess_config_section secs[] = {TESS_CONFIG_SECTION("paint", paint_opts)};
    tess_config *cfg = NULL;
    TESS_TEST_CHECK(tess_config_create(&cfg, secs, 1) == TESS_OK, "enum create: %s",
                    tess_error_text());
    TESS_TEST_CHECK(tess_config_enum(cfg, "paint.color") == COLOR_GREEN, "enum default");
    const char *names[] = {"blue", "red", "green"};
    const color values[] = {COLOR_BLUE, COLOR_RED, COLOR_GREEN};
    for (int i = 0; i < 3; i++) {
        TESS_TEST_CHECK(tess_config_set(cfg, "paint.color", names[i]) == TESS_OK, "set %s",
                        names[i]);
        TESS_TEST_CHECK(tess_config_enum(cfg, "paint.color") == (int)values[i],
                        "%s -> %d, got %d", names[i], (int)values[i],
                        tess_config_enum(cfg, "paint.color"));
        TESS_TEST_CHECK(strcmp(tess_config_string(cfg, "paint.color"), names[i]) == 0,
                        "%s as text", names[i]);
    }
    TESS_TEST_CHECK(tess_config_set(cfg, "paint.color", "purple") == TESS_ERR_CONFIG,
                    "unknown name refused");
    check_record("bad value for 'paint.color': 'purple' is not one of blue|red|green");
    tess_error_clear();
    TESS_TEST_CHECK(has(tess_config_help_text(cfg, "prog"),
                        "paint.color  (one of blue|red|green, default green)"),
                    "help lists the names:\n%s", tess_config_help_text(cfg, "prog"));
    TESS_TEST_CHECK(has(tess_config_resolved_text(cfg), "color = green"), "resolved text");
    tess_config_destroy(&cfg);

    static const tess_opt_enum dup_value[] = {{"a", 1}, {"b", 1}};
    static const tess_opt_enum dup_name[] = {{"a", 1}, {"a", 2}};
    static const tess_opt bad_enum[][1] = {
        {TESS_OPT_ENUM("c", "a", dup_value, "h")},
        {TESS_OPT_ENUM("c", "a", dup_name, "h")},
        {TESS_OPT_ENUM("c", "x", color_names, "h")},
    };
    for (int i = 0; i < 3; i++) {
        const tess_config_section bad[] = {{"s", bad_enum[i], 1}};
        tess_status s = tess_config_create(&cfg, bad, 1);
        TESS_TEST_CHECK(s == TESS_ERR_ARG && cfg == NULL, "bad enum table %d refused (%s)", i,
                        tess_status_name(s));
    }
    check_record("option 's.c': 'a' and 'b' have the same value 1");
    check_record("option 's.c': enum name 'a' appears twice");
    check_record("option 's.c': default 'x' is not in its enum table");
    tess_error_clear();
}

/* Bad option tables are the app author's bug: create refuses them with TESS_ERR_ARG. */
static void test_bad_tables(void) {
    static const tess_opt bad_default[] = {TESS_OPT_REAL("lr", 2.0, 0.0, 1.0, "h")};
    static const tess_opt bad_choice[] = {TESS_OPT_CHOICE("s", "x", "a|b", "h")};
    static const tess_opt dup_key[] = {TESS_OPT_INT("n", 0, 0, 9, "h"),
                                       TESS_OPT_INT("n", 0, 0, 9, "h")};
    static const tess_opt dotted[] = {TESS_OPT_INT("a.b", 0, 0, 9, "h")};
    const tess_config_section cases[][2] = {
        {TESS_CONFIG_SECTION("s", bad_default), TESS_CONFIG_SECTION("t", dotted)},
        {TESS_CONFIG_SECTION("s", bad_choice), TESS_CONFIG_SECTION("t", bad_choice)},
        {TESS_CONFIG_SECTION("s", dup_key), TESS_CONFIG_SECTION("t", dup_key)},
        {TESS_CONFIG_SECTION("t", dotted), TESS_CONFIG_SECTION("s", dotted)},
        {TESS_CONFIG_SECTION("optim", optim_opts), TESS_CONFIG_SECTION("optim", optim_opts)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tess_config *cfg = NULL;
        tess_status s = tess_config_create(&cfg, cases[i], 2);
        TESS_TEST_CHECK(s == TESS_ERR_ARG && cfg == NULL, "bad table %zu refused (%s)", i,
                        tess_status_name(s));
    }
    check_record("option 's.lr': default 2 outside [0, 1]");
    check_record("section 'optim' declared twice");
    tess_error_clear();
}

/* tess_config_check_resume: options not declared resumable must match the stored text. */
static void test_check_resume(void) {
    tess_config *old = NULL, *now = NULL;
    TESS_TEST_CHECK(tess_config_create(&old, sections, NSEC) == TESS_OK &&
                        tess_config_create(&now, sections, NSEC) == TESS_OK,
                    "create");
    tess_config_set(old, "optim.lr", "0.5");
    tess_config_set(old, "run.name", "first");
    char stored[4096];
    snprintf(stored, sizeof stored, "%s", tess_config_resolved_text(old));
    tess_config_set(now, "optim.lr", "5e-1");
    tess_config_set(now, "run.name", "second");
    TESS_TEST_CHECK(tess_config_check_resume(now, stored, "ck.h5") == TESS_OK,
                    "same values (0.5 = 5e-1), a resumable option changed: %s", tess_error_text());
    tess_config_set(now, "client.optim.schedule", "linear");
    tess_config_set(now, "run.seed", "7");
    tess_error_clear();
    TESS_TEST_CHECK(tess_config_check_resume(now, stored, "ck.h5") == TESS_ERR_CONFIG,
                    "two options changed: refused");
    check_record("client.optim.schedule: 'cosine' in ck.h5, 'linear' now");
    check_record("run.seed: '1234' in ck.h5, '7' now");
    check_record("2 options differ from ck.h5");
    TESS_TEST_CHECK(!has(tess_error_text(), "run.name"), "a resumable option is not reported");
    tess_error_clear();
    tess_config_set(now, "client.optim.schedule", "cosine");
    tess_config_set(now, "run.seed", "1234");
    /* a key the text does not list counts as its default; keys no longer declared are ignored */
    TESS_TEST_CHECK(tess_config_check_resume(now, "[optim]\nlr = 0.5\n[gone]\nx = 1\n", "ck.h5") ==
                        TESS_OK,
                    "missing and removed keys: %s", tess_error_text());
    TESS_TEST_CHECK(tess_config_check_resume(now, "[optim]\nlr = fast\n", "ck.h5") ==
                        TESS_ERR_CONFIG,
                    "an unreadable stored value differs");
    check_record("optim.lr: 'fast' in ck.h5, '0.5' now");
    check_record("1 option differs from ck.h5");
    tess_error_clear();
    tess_config_destroy(&old);
    tess_config_destroy(&now);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    TESS_TEST_CHECK(tess_group_create(MPI_COMM_WORLD, "world", &world) == TESS_OK, "world: %s",
                    tess_error_text());
    test_defaults_and_sections();
    test_errors_collected();
    test_command_line();
    test_listing();
    test_resolved_round_trip();
    test_bad_tables();
    test_enum();
    test_check_resume();
    tess_group_destroy(&world);
    int rc = tess_test_finish_mpi("config", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
