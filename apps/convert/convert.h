/* convert.h - the subcommands of tess-convert and the command line they share (main.c).
 *
 * A subcommand declares its options and positional arguments in one convert_cmd; main.c parses
 * "tess-convert NAME [--opt VALUE | --opt=VALUE]... ARGS..." against it (options may come
 * anywhere, "--" ends them), checks CHOICE values and the argument count, prints the usage and
 * --help text, refuses an output that would overwrite an input (the same file as an input
 * argument, or an existing file that is not HDF5, such as a file of a TU directory), and calls
 * run. Every subcommand is serial (one process). Exit codes: 0, 64 bad command line, 65 malformed
 * input, 66 missing input, 74 cannot write.
 */
#ifndef TESS_APPS_CONVERT_H
#define TESS_APPS_CONVERT_H

#include "core/status.h" /* tess_status */

enum { CONVERT_MAX_OPTS = 4 };

/* One option "--name VALUE". */
typedef struct {
    const char *name;    /* "--features" */
    const char *choices; /* '|'-separated allowed values ("byte|char"), or NULL: any text */
    const char *metavar; /* shown for free-text values ("NAME"); NULL for choices */
    const char *def;     /* default value */
    const char *help;    /* one line */
} convert_opt;

typedef struct {
    const char *name;     /* "tu": the word after tess-convert */
    const char *summary;  /* one line for tess-convert --help */
    const char *args;     /* positional synopsis: "<TU dir or prefix> <out.h5>" */
    int out_arg;          /* which positional argument is the output file (the others are read) */
    int min_args;         /* positional arguments required */
    int max_args;         /* allowed; 0 = no limit */
    convert_opt opts[CONVERT_MAX_OPTS];
    int nopts;
    const char *details;  /* paragraph closing the subcommand's --help */
    /* Convert. vals[i] is the value of opts[i] (given or default, choices checked); args[0..nargs)
     * are the positional arguments (count checked). */
    tess_status (*run)(const char *const *vals, int nargs, char **args);
} convert_cmd;

extern const convert_cmd convert_tu, convert_text, convert_calcium, convert_ids;

/* 0-based position of value in a '|'-separated choice list, -1 if absent. */
int convert_choice_index(const char *choices, const char *value);

#endif
