/* config.h - typed options declared once per module, read from an INI file and the command line.
 *
 * A module declares its options in one static table (type, default, range or choices, help); an
 * app composes the tables into sections. The same table may appear under several section names
 * ("optim", "client.optim"): each reads only its own [section], never the bare one.
 *
 *   static const tess_opt optim_opts[] = {
 *       TESS_OPT_REAL("lr", 3e-4, 0.0, 1.0, "AdamW step size"),
 *       TESS_OPT_INT("warmup_steps", 0, 0, INT32_MAX, "linear warm-up length"),
 *   };
 *   const tess_config_section secs[] = {TESS_CONFIG_SECTION("optim", optim_opts),
 *                                       TESS_CONFIG_SECTION("client.optim", optim_opts)};
 *   TESS_CHECK(tess_config_create(&cfg, secs, 2));
 *   TESS_CHECK(tess_config_parse_args(cfg, rt.world, argc, argv, &action));
 *   double lr = tess_config_real(cfg, "client.optim.lr");
 *
 * Precedence: defaults < --config FILE < --set and aliases (applied in command-line order).
 * Full keys are "<section>.<key>"; keys contain no '.', section names may.
 *
 * Errors. Every rank parses the same bytes (rank 0 reads the file and broadcasts it), so every
 * config error is found on every rank alike: tess_config_parse_args returns the same status on all
 * ranks, and the app ends with tess_runtime_finish(rt, s, true), which prints the record once, on
 * rank 0. All errors are collected (each a record line naming file:line or the --set argument, and
 * the key), followed by a count. Status: TESS_ERR_NOINPUT (exit 66) for a missing or unreadable
 * config file; TESS_ERR_ARG (exit 64) for a malformed command line (unknown flag, flag without its
 * value, --config twice); TESS_ERR_CONFIG (exit 78) for everything else, including --set without
 * '='. With several classes at once the status is the first of NOINPUT, ARG, CONFIG.
 *
 * Getters take a full key. Asking for an undeclared key, or with the wrong type, is a bug in the
 * caller: the getter prints one line and aborts through the abort hook (always on, not compiled
 * out; see tess_assert_fail in core/status.h).
 */
#ifndef TESS_CORE_CONFIG_H
#define TESS_CORE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

typedef enum {
    TESS_OPT_TYPE_INT = 0, /* int64_t, inclusive range [min, max] */
    TESS_OPT_TYPE_REAL,    /* finite double, inclusive range [min, max] */
    TESS_OPT_TYPE_BOOL,    /* true/false, 1/0, yes/no, on/off (any case) */
    TESS_OPT_TYPE_STRING,  /* one line of text, no " ;" (INI would read it as a comment) */
    TESS_OPT_TYPE_CHOICE,  /* one of a '|'-separated list, read as text (an enum: TESS_OPT_ENUM) */
    TESS_OPT_TYPE_ENUM,    /* one name of a {name, value} table (read as the value) */
} tess_opt_type;

/* One row of an ENUM option's table: the name written in the config and the enum value it
 * means. A table names every value of its enum exactly once; declare it beside the enum with
 * TESS_OPT_ENUM_TABLE_CHECK so that adding an enum value without a name fails to compile:
 *
 *   typedef enum { TESS_NN_NORM_RMS = 0, TESS_NN_NORM_LAYER, TESS_NN_NORM_COUNT } tess_nn_norm_kind;
 *   static const tess_opt_enum tess_nn_norm_kind_names[] = {
 *       {"rmsnorm", TESS_NN_NORM_RMS}, {"layernorm", TESS_NN_NORM_LAYER}};
 *   TESS_OPT_ENUM_TABLE_CHECK(tess_nn_norm_kind_names, TESS_NN_NORM_COUNT);
 *   ... TESS_OPT_ENUM("norm", "rmsnorm", tess_nn_norm_kind_names, "normalisation layer") ...
 *   cfg.norm = (tess_nn_norm_kind)tess_config_enum(c, "model.norm");
 *
 * The value comes from the table, never from a list position, so the table order is free (it is
 * the order --help lists the names in). */
typedef struct {
    const char *name; /* letters, digits, '_', '-' */
    int value;
} tess_opt_enum;

#define TESS_OPT_ENUM_LEN(table_) ((int)(sizeof(table_) / sizeof((table_)[0])))
#define TESS_OPT_ENUM_TABLE_CHECK(table_, count_)                                               \
    _Static_assert(sizeof(table_) / sizeof((table_)[0]) == (size_t)(count_),                    \
                   #table_ " must name every value of its enum exactly once")

/* One option. Build it with the TESS_OPT_* macros; the strings must outlive the config. */
typedef struct {
    const char *key; /* letters, digits, '_', '-'; no '.' */
    tess_opt_type type;
    int64_t int_def, int_min, int_max;
    double real_def, real_min, real_max;
    bool bool_def;
    const char *str_def; /* STRING and CHOICE default */
    const char *choices; /* CHOICE: "cosine|linear|constant" */
    const tess_opt_enum *enums; /* ENUM: the table (enum_count rows); str_def is one of its names */
    int enum_count;
    const char *help;
    bool resumable; /* may differ from the checkpoint's value on resume (TESS_OPT_RESUMABLE) */
} tess_opt;

/* The fields of each kind (without braces, so TESS_OPT_RESUMABLE can add one). */
#define TESS_OPT_INT_(key_, def_, min_, max_, help_)                                            \
    .key = (key_), .type = TESS_OPT_TYPE_INT, .int_def = (def_), .int_min = (min_),           \
    .int_max = (max_), .help = (help_)
#define TESS_OPT_REAL_(key_, def_, min_, max_, help_)                                           \
    .key = (key_), .type = TESS_OPT_TYPE_REAL, .real_def = (def_), .real_min = (min_),        \
    .real_max = (max_), .help = (help_)
#define TESS_OPT_BOOL_(key_, def_, help_)                                                       \
    .key = (key_), .type = TESS_OPT_TYPE_BOOL, .bool_def = (def_), .help = (help_)
#define TESS_OPT_STRING_(key_, def_, help_)                                                     \
    .key = (key_), .type = TESS_OPT_TYPE_STRING, .str_def = (def_), .help = (help_)
#define TESS_OPT_CHOICE_(key_, def_, choices_, help_)                                           \
    .key = (key_), .type = TESS_OPT_TYPE_CHOICE, .str_def = (def_), .choices = (choices_),    \
    .help = (help_)
#define TESS_OPT_ENUM_(key_, def_, table_, help_)                                               \
    .key = (key_), .type = TESS_OPT_TYPE_ENUM, .str_def = (def_), .enums = (table_),          \
    .enum_count = TESS_OPT_ENUM_LEN(table_), .help = (help_)

#define TESS_OPT_INT(key_, def_, min_, max_, help_) {TESS_OPT_INT_(key_, def_, min_, max_, help_)}
#define TESS_OPT_REAL(key_, def_, min_, max_, help_)                                            \
    {TESS_OPT_REAL_(key_, def_, min_, max_, help_)}
#define TESS_OPT_BOOL(key_, def_, help_) {TESS_OPT_BOOL_(key_, def_, help_)}
#define TESS_OPT_STRING(key_, def_, help_) {TESS_OPT_STRING_(key_, def_, help_)}
#define TESS_OPT_CHOICE(key_, def_, choices_, help_)                                            \
    {TESS_OPT_CHOICE_(key_, def_, choices_, help_)}
#define TESS_OPT_ENUM(key_, def_, table_, help_) {TESS_OPT_ENUM_(key_, def_, table_, help_)}

/* An option that may change when a run resumes from a checkpoint: a budget (steps, samples),
 * logging, output paths, the parallel layout. Every other option defines the problem or the model,
 * and a resume refuses a checkpoint written with another value (tess_config_check_resume):
 *
 *   TESS_OPT_RESUMABLE(INT, "steps", 400, 1, INT64_MAX / 2, "optimizer steps"),
 *
 * kind_ is INT, REAL, BOOL, STRING, CHOICE or ENUM; the other arguments are those of
 * TESS_OPT_<kind_>. */
#define TESS_OPT_RESUMABLE(kind_, ...) {TESS_OPT_##kind_##_(__VA_ARGS__), .resumable = true}

/* A table of options read from [name]. The table must outlive the config. */
typedef struct {
    const char *name; /* e.g. "optim", "client.optim" */
    const tess_opt *opts;
    int64_t nopts;
} tess_config_section;

#define TESS_CONFIG_SECTION(name_, table_)                                                      \
    {(name_), (table_), (int64_t)(sizeof(table_) / sizeof((table_)[0]))}

/* What the app does after tess_config_parse_args. */
typedef enum {
    TESS_CONFIG_ACTION_RUN = 0, /* options parsed: run */
    TESS_CONFIG_ACTION_HELP,    /* --help was printed (rank 0): finish with TESS_OK, exit 0 */
    TESS_CONFIG_ACTION_PRINTED, /* --print-config was printed (rank 0): finish with TESS_OK */
    TESS_CONFIG_ACTION_VERSION, /* --version was printed (rank 0, core/version.h): TESS_OK */
    TESS_CONFIG_ACTION_OPTIONS, /* --print-options was printed (rank 0): finish with TESS_OK */
} tess_config_action;

typedef struct tess_config tess_config;

/* Create a config holding every option of every section at its default. Not collective.
 * Checks the tables (TESS_ERR_ARG): valid and unique section names and keys, defaults inside
 * their ranges, CHOICE defaults among their choices, ENUM tables with valid and unique names and
 * unique values and the default among the names. Section names are copied. */
tess_status tess_config_create(tess_config **cfg, const tess_config_section *sections,
                               int64_t nsections);
/* Free everything and set *cfg = NULL. NULL or *cfg == NULL is a no-op. */
void tess_config_destroy(tess_config **cfg);

/* Register a command-line flag that sets one option: after tess_config_alias(cfg, "--resume",
 * "ckpt.resume"), "--resume auto" and "--resume=auto" mean "--set ckpt.resume=auto".
 * Call before tess_config_parse_args. TESS_ERR_ARG for an undeclared key or a taken flag. */
tess_status tess_config_alias(tess_config *cfg, const char *flag, const char *key);

/* A flag the caller takes out of argv and handles itself (e.g. the run driver's "--check"):
 * listed in --help with its one-line help, offered by "did you mean" for a mistyped flag, and
 * refused as an alias. Call before tess_config_parse_args. TESS_ERR_ARG for a built-in or taken
 * flag. */
tess_status tess_config_flag(tess_config *cfg, const char *flag, const char *help);

/* Read the command line: --config FILE, --set SECTION.KEY=VALUE (repeatable), aliases,
 * --print-config, --print-options, --help (also -h), --version; "--flag=value" works for every flag
 * that takes a value. Collective on g (the run's group): rank 0 reads FILE and broadcasts it; every
 * rank parses it. argv must be the same on every rank (as mpiexec passes it): checked first, before
 * any rank may leave (tess_config_check_argv). --help wins over everything else, then --version
 * ("<program> (Tessera <version>, git <commit>)", core/version.h), then --print-options
 * (tess_config_options_json); none of them reads a file;
 * --print-config prints the resolved INI on rank 0 after a successful parse. Help and resolved
 * text go to stdout on rank 0; errors go to the error record on every rank (see above). */
tess_status tess_config_parse_args(tess_config *cfg, const tess_group *g, int argc, char **argv,
                                   tess_config_action *action);

/* Check that every rank of g got the same arguments argv[1..argc-1] (a digest compared over the
 * ranks; tess_config_parse_args does this first, before --help or --version may end a rank).
 * Collective on g. TESS_ERR_CONFIG (exit 78) on every rank when they differ, naming the first
 * differing argument with its value on rank 0 and on the lowest rank where it differs. */
tess_status tess_config_check_argv(const tess_group *g, int argc, char **argv);

/* Parse INI text as if it were the --config file named `origin` (used in messages).
 * Not collective. Collects every error as tess_config_parse_args does; TESS_ERR_CONFIG. */
tess_status tess_config_parse_text(tess_config *cfg, const char *text, const char *origin);

/* Set one option from its text form, with the same checks as the file: TESS_ERR_CONFIG naming
 * the key and value. Not collective. */
tess_status tess_config_set(tess_config *cfg, const char *full_key, const char *value);

/* Check `text` as a value of option full_key, with the type and range checks of the file and
 * --set, without setting it (e.g. each element of a list option that stands for that option).
 * TESS_ERR_CONFIG naming `what` (the list and its key, for the message), the value and the
 * option; TESS_ERR_ARG for an undeclared key. Not collective. */
tess_status tess_config_check_value(const tess_config *cfg, const char *full_key, const char *text,
                                    const char *what);

/* Typed getters by full key ("client.optim.lr"). See the file header for misuse. */
int64_t tess_config_int(const tess_config *cfg, const char *full_key);
double tess_config_real(const tess_config *cfg, const char *full_key);
bool tess_config_bool(const tess_config *cfg, const char *full_key);
/* STRING, CHOICE or ENUM value as text. Owned by cfg; valid until that option is set again or cfg destroyed. */
const char *tess_config_string(const tess_config *cfg, const char *full_key);
/* ENUM: the value its table gives the option's name. */
int tess_config_enum(const tess_config *cfg, const char *full_key);

/* Resume check: compare cfg with `text`, the resolved configuration of an earlier run (as
 * tess_config_resolved_text wrote it, e.g. a checkpoint's /config), named `origin` in messages.
 * Every option not declared TESS_OPT_RESUMABLE must have the same value in both (an option that
 * text does not list counts as its default; keys cfg does not declare are ignored). Not
 * collective. TESS_ERR_CONFIG with one record line per differing key ("task.kind: 'reverse' in
 * <origin>, 'sort' now") and a headline naming the count; TESS_ERR_MEM. */
tess_status tess_config_check_resume(const tess_config *cfg, const char *text, const char *origin);

/* Every option with its current value as INI text that tess_config_parse_text reads back to the
 * same values (reals printed to round-trip). Owned by cfg; valid until the next call or destroy. */
const char *tess_config_resolved_text(tess_config *cfg);

/* The --help text for program `prog`: flags, aliases, then each option's full key, type, default,
 * range or choices, and help. Owned by cfg; valid until the next call or destroy. */
const char *tess_config_help_text(tess_config *cfg, const char *prog);

/* Every declared option as JSON, for tools and tests (--print-options):
 *   {"program": prog, "options": [{"key": "optim.lr", "type": "real", "default": 0.0003,
 *     "min": 0, "max": 10, "help": "..."}, ...]}
 * in declaration order. "type" is int|real|bool|string|choice|enum; int and real carry "min" and
 * "max" (inclusive: the range the parser accepts), choice and enum a "choices" array of names.
 * Written with jansson. Owned by cfg; valid until the next call or destroy; NULL when out of
 * memory. */
const char *tess_config_options_json(tess_config *cfg, const char *prog);

#endif
