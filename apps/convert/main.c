/* tess-convert - convert data sets to Tessera's HDF5 training-data formats (docs/datasets.md).
 *
 *   tess-convert tu [--features auto|labels|attributes|both|degree] <TU dir or prefix> <out.h5>
 *   tess-convert text [--tokenizer byte|char] <input.txt> <out.h5>
 *   tess-convert calcium [--traces NAME] [--behavior a,b,...] <out.h5> <session.h5>...
 *   tess-convert --help | --version | COMMAND --help
 *
 * This file is the shared command line (convert.h); tu.c, text.c and calcium.c are the
 * subcommands. A serial tool: it refuses to convert on more than one process (help and version
 * print once, on rank 0).
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "convert.h"       /* convert_cmd */
#include "core/runtime.h"   /* tess_runtime_* */
#include "core/version.h"   /* tess_version_* */

static const convert_cmd *const COMMANDS[] = {&convert_tu, &convert_text, &convert_calcium,
                                              &convert_ids};
enum { NCOMMANDS = sizeof COMMANDS / sizeof COMMANDS[0] };

int convert_choice_index(const char *choices, const char *value) {
    size_t n = strlen(value);
    int index = 0;
    for (const char *c = choices; c; index++) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && strncmp(c, value, n) == 0) return index;
        c = bar ? bar + 1 : NULL;
    }
    return -1;
}

static void print_main_help(void) {
    printf("usage: tess-convert COMMAND [OPTIONS] ARGS...   (or --help, --version)\n"
           "Convert data sets to Tessera's HDF5 training-data formats. A serial tool: run it as\n"
           "one process.\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++)
        printf("  %-9s %s\n", COMMANDS[i]->name, COMMANDS[i]->summary);
    printf("\n'tess-convert COMMAND --help' describes a command's options and arguments.\n"
           "Exit codes: 0, 64 bad command line, 65 malformed input, 66 missing input, 74 cannot "
           "write.\n");
}

/* "usage: tess-convert tu [--features auto|...] <TU dir or prefix> <out.h5>" */
static void usage_line(const convert_cmd *cmd, char *buf, size_t n) {
    size_t off = (size_t)snprintf(buf, n, "usage: tess-convert %s", cmd->name);
    for (int i = 0; i < cmd->nopts && off < n; i++) {
        const convert_opt *o = &cmd->opts[i];
        off += (size_t)snprintf(buf + off, n - off, " [%s %s]", o->name,
                                o->choices ? o->choices : o->metavar);
    }
    if (off < n) snprintf(buf + off, n - off, " %s", cmd->args);
}

static void print_cmd_help(const convert_cmd *cmd) {
    char usage[512];
    usage_line(cmd, usage, sizeof usage);
    printf("%s\n%s\n\noptions:\n", usage, cmd->summary);
    for (int i = 0; i < cmd->nopts; i++) {
        const convert_opt *o = &cmd->opts[i];
        char flag[128];
        snprintf(flag, sizeof flag, "%s %s", o->name, o->choices ? o->choices : o->metavar);
        printf("  %s  (default %s)\n      %s\n", flag, o->def, o->help);
    }
    printf("  --help\n      print this help and exit\n  --version\n      print the program, "
           "Tessera version and git commit, and exit\n\n%s\n",
           cmd->details);
}

static bool is_help(const char *a) {
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0;
}

/* Parse argv[2..argc) for cmd into vals (one per option) and the positional arguments (pos,
 * room for argc entries). *help is set when --help was asked (nothing else is checked then). */
static tess_status parse(const convert_cmd *cmd, int argc, char **argv, const char **vals,
                         char **pos, int *npos, bool *help) {
    char usage[512];
    usage_line(cmd, usage, sizeof usage);
    for (int k = 0; k < cmd->nopts; k++) vals[k] = cmd->opts[k].def;
    bool options = true;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (options && is_help(a)) {
            *help = true;
            return TESS_OK;
        }
        if (options && strcmp(a, "--") == 0) {
            options = false;
            continue;
        }
        if (!options || a[0] != '-' || a[1] == '\0') {
            pos[(*npos)++] = argv[i];
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t fl = eq ? (size_t)(eq - a) : strlen(a);
        int k = 0;
        while (k < cmd->nopts && !(strlen(cmd->opts[k].name) == fl &&
                                   strncmp(cmd->opts[k].name, a, fl) == 0))
            k++;
        TESS_REQUIRE(k < cmd->nopts, TESS_ERR_ARG, "unknown option '%.*s' for tess-convert %s\n%s",
                     (int)fl, a, cmd->name, usage);
        const convert_opt *o = &cmd->opts[k];
        TESS_REQUIRE(eq || i + 1 < argc, TESS_ERR_ARG, "%s needs a value\n%s", o->name, usage);
        vals[k] = eq ? eq + 1 : argv[++i];
        TESS_REQUIRE(!o->choices || convert_choice_index(o->choices, vals[k]) >= 0, TESS_ERR_ARG,
                     "unknown %s '%s' (one of %s)\n%s", o->name, vals[k], o->choices, usage);
    }
    TESS_REQUIRE(*npos >= cmd->min_args && (cmd->max_args == 0 || *npos <= cmd->max_args),
                 TESS_ERR_ARG, "expected %s, got %d argument%s\n%s", cmd->args, *npos,
                 *npos == 1 ? "" : "s", usage);
    return TESS_OK;
}

/* The output args[out] must not overwrite an input: not the same file as another argument, and,
 * if it exists, an HDF5 file (a converter never replaces text or anything else it may read). */
static tess_status check_output(char **args, int nargs, int out) {
    const char *path = args[out];
    struct stat so;
    if (stat(path, &so) != 0) return TESS_OK; /* a new file */
    for (int i = 0; i < nargs; i++) {
        struct stat si;
        TESS_REQUIRE(i == out || stat(args[i], &si) != 0 || si.st_dev != so.st_dev ||
                         si.st_ino != so.st_ino,
                     TESS_ERR_ARG, "the output '%s' is the input '%s': refusing to overwrite it",
                     path, args[i]);
    }
    TESS_REQUIRE(S_ISREG(so.st_mode), TESS_ERR_ARG, "the output '%s' exists and is not a file",
                 path);
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char head[8] = {0};
    FILE *f = fopen(path, "rb");
    const size_t got = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
    TESS_REQUIRE(so.st_size == 0 || (got == sizeof head && memcmp(head, sig, sizeof sig) == 0),
                 TESS_ERR_ARG,
                 "the output '%s' exists and is not an HDF5 file (an input?): refusing to "
                 "overwrite it; remove it or name another output",
                 path);
    return TESS_OK;
}

static tess_status run(const tess_runtime *rt, int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "";
    if (is_help(name)) {
        if (rt->rank == 0) print_main_help();
        return TESS_OK;
    }
    if (tess_version_asked(argc, argv)) {
        char line[512];
        if (rt->rank == 0) printf("%s\n", tess_version_line(line, sizeof line, argv[0]));
        return TESS_OK;
    }
    const convert_cmd *cmd = NULL;
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, COMMANDS[i]->name) == 0) cmd = COMMANDS[i];
    TESS_REQUIRE(cmd != NULL, TESS_ERR_ARG,
                 "%s%s%s: expected a command: tu, text or calcium (tess-convert --help)",
                 name[0] ? "unknown command '" : "no command", name, name[0] ? "'" : "");
    const char *vals[CONVERT_MAX_OPTS];
    char **pos = calloc((size_t)argc, sizeof *pos);
    TESS_REQUIRE(pos != NULL, TESS_ERR_MEM, "out of memory for %d arguments", argc);
    int npos = 0;
    bool help = false;
    tess_status s = parse(cmd, argc, argv, vals, pos, &npos, &help);
    if (s == TESS_OK && help && rt->rank == 0) print_cmd_help(cmd);
    if (s == TESS_OK && !help && rt->size != 1)
        s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                            "tess-convert is a serial tool: run it as one process, not %d",
                            rt->size);
    if (s == TESS_OK && !help) s = check_output(pos, npos, cmd->out_arg);
    if (s == TESS_OK && !help) s = cmd->run(vals, npos, pos);
    free(pos);
    TESS_REQUIRE(s == TESS_OK, s, "tess-convert %s", cmd->name);
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    if (s == TESS_OK) s = run(&rt, argc, argv);
    return tess_runtime_finish(&rt, s, true);
}
