/* config.c - options, INI through libinih, command line (see config.h).
 *
 * Line numbers: Debian's libinih is built without INI_HANDLER_LINENO, so the text is fed to
 * ini_parse_stream by a reader that hands out one line at a time (what ini_parse_string does
 * internally) and counts them; inih calls the handler for a "key = value" line before it asks for
 * the next line, so the handler knows its line. Lines inih does not hand to the handler (comments,
 * [section] headers, syntax errors) are classified by the reader, with inih's own rules.
 */
#include "core/config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/version.h" /* tess_version_* */
#include "par/coll.h"      /* tess_par_agree, tess_par_bcast_bytes */

enum {
    CFG_MAX_ALIASES = 32,
    CFG_MAX_FLAGS = 16,               /* flags the caller handles itself (tess_config_flag) */
    CFG_MAX_REPORTED = 20,            /* error lines kept in the record; the rest are counted */
    CFG_MAX_NAME = 50,                /* inih's MAX_SECTION and MAX_NAME, terminator included */
    CFG_MAX_FILE_BYTES = 16 << 20,    /* a config file larger than this is refused */
    CFG_MSG_BYTES = 768,
};

typedef struct {
    const tess_opt *opt;
    int64_t section; /* index into sec_names */
    char *full_key;  /* "<section>.<key>" */
    int64_t ival;
    double rval;
    bool bval;
    char *sval;        /* STRING, CHOICE */
    int64_t file_line; /* line that set it in the text being parsed, 0 if none */
} cfg_value;

struct tess_config {
    char **sec_names;
    int64_t nsec;
    cfg_value *vals;
    int64_t nvals;
    struct {
        char *flag;
        int64_t val; /* index into vals */
    } aliases[CFG_MAX_ALIASES];
    int nalias;
    struct {
        char *flag, *help; /* "--check", one line */
    } flags[CFG_MAX_FLAGS];
    int nflags;
    char *resolved;
    char *help;
    char *listing; /* tess_config_options_json */
};

/* The flags tess_config_parse_args itself handles. */
static const char *const builtin_flags[] = {"--config",  "--set",           "--help",
                                            "--version", "--print-config", "--print-options"};
enum { CFG_NBUILTIN = (int)(sizeof builtin_flags / sizeof builtin_flags[0]) };

/* ---------- error collection: every error is a record line; the verdict is the worst class ---- */

typedef struct {
    int64_t count;
    tess_status status;
} cfg_errors;

static int status_rank(tess_status s) {
    return s == TESS_ERR_NOINPUT ? 0 : s == TESS_ERR_ARG ? 1 : s == TESS_ERR_CONFIG ? 2 : 3;
}

/* Record one error; the record line names the detecting call site (CFG_ERROR). */
static void cfg_error_at(cfg_errors *e, tess_status s, int line, const char *func,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void cfg_error_at(cfg_errors *e, tess_status s, int line, const char *func,
                         const char *fmt, ...) {
    if (e->count == 0 || status_rank(s) < status_rank(e->status)) e->status = s;
    if (e->count++ >= CFG_MAX_REPORTED) return;
    char msg[CFG_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tess_error_push(s, __FILE__, line, func, "%s", msg);
}
#define CFG_ERROR(e, s, ...) cfg_error_at((e), (s), __LINE__, __func__, __VA_ARGS__)

static tess_status cfg_errors_finish(const cfg_errors *e) {
    if (e->count == 0) return TESS_OK;
    if (e->count == 1) return e->status; /* the one error is in the record already: no count */
    if (e->count > CFG_MAX_REPORTED)
        return tess_error_push(e->status, __FILE__, __LINE__, __func__,
                               "%lld errors in the command line or configuration (first %d shown)",
                               (long long)e->count, CFG_MAX_REPORTED);
    return tess_error_push(e->status, __FILE__, __LINE__, __func__,
                           "%lld errors in the command line or configuration", (long long)e->count);
}

/* ---------- growing text buffer (setup only) ---------- */

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + (size_t)n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static char *sb_take(sbuf *b) {
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p ? b->p : calloc(1, 1);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* ---------- names, lookup, suggestions ---------- */

static bool valid_name(const char *s, bool allow_dot) {
    if (!s || !*s || strlen(s) >= CFG_MAX_NAME) return false;
    for (const char *c = s; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '_' || *c == '-' || (allow_dot && *c == '.')))
            return false;
    return s[0] != '.' && s[strlen(s) - 1] != '.';
}

static cfg_value *find_value(const tess_config *cfg, const char *full_key) {
    for (int64_t i = 0; i < cfg->nvals; i++)
        if (strcmp(cfg->vals[i].full_key, full_key) == 0) return &cfg->vals[i];
    return NULL;
}

static int64_t find_section(const tess_config *cfg, const char *name) {
    for (int64_t i = 0; i < cfg->nsec; i++)
        if (strcmp(cfg->sec_names[i], name) == 0) return i;
    return -1;
}

/* Levenshtein distance of the first 127 characters of a and b. */
static int edit_distance(const char *a, const char *b) {
    enum { N = 128 };
    int prev[N], cur[N];
    size_t la = strnlen(a, N - 1), lb = strnlen(b, N - 1);
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb];
}

/* Closest candidate to a misspelt name: feed candidates to match_try, then match_result. */
typedef struct {
    const char *name, *best;
    int dist;
} name_match;

static void match_try(name_match *m, const char *cand) {
    size_t n = strlen(m->name);
    int d = edit_distance(m->name, cand);
    /* A name cut short ("optim.warmup" for "optim.warmup_steps") is as good as one typo. */
    if (d > 1 && n > 0 && m->name[n - 1] != '.' && strncmp(cand, m->name, n) == 0) d = 1;
    if (!m->best || d < m->dist) {
        m->best = cand;
        m->dist = d;
    }
}

/* The best candidate if it is close enough to be a plausible typo, else NULL. A quarter of the
 * length keeps "optim.foo" from suggesting "optim.lr" just because the sections agree. */
static const char *match_result(const name_match *m) {
    int limit = (int)strlen(m->name) / 4;
    return m->best && m->dist <= (limit > 2 ? limit : 2) ? m->best : NULL;
}

static const char *suggest_key(const tess_config *cfg, const char *full_key) {
    name_match m = {.name = full_key};
    for (int64_t i = 0; i < cfg->nvals; i++) match_try(&m, cfg->vals[i].full_key);
    return match_result(&m);
}

static void report_unknown_key(const tess_config *cfg, cfg_errors *e, const char *loc,
                               const char *full_key) {
    const char *s = suggest_key(cfg, full_key);
    if (s)
        CFG_ERROR(e, TESS_ERR_CONFIG, "%s: unknown key '%s' (did you mean '%s'?)", loc, full_key,
                  s);
    else
        CFG_ERROR(e, TESS_ERR_CONFIG, "%s: unknown key '%s' (--help lists every option)", loc,
                  full_key);
}

/* ---------- values ---------- */

static void fmt_real(char *buf, size_t n, double x) {
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) return;
    }
}

/* Position of `v` in the '|'-separated list, or -1. */
static int choice_index(const char *choices, const char *v) {
    size_t lv = strlen(v);
    int idx = 0;
    for (const char *p = choices;; idx++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == lv && strncmp(p, v, len) == 0) return idx;
        if (!bar) return -1;
        p = bar + 1;
    }
}

/* Row of the ENUM table of o named v, or -1. */
static int enum_index(const tess_opt *o, const char *v) {
    for (int i = 0; i < o->enum_count; i++)
        if (strcmp(o->enums[i].name, v) == 0) return i;
    return -1;
}

/* The names of o's ENUM table as "a|b|c" into buf (n bytes, truncated if needed). */
static void enum_list(const tess_opt *o, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < o->enum_count && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%s", i ? "|" : "", o->enums[i].name);
        if (w < 0) break;
        used += (size_t)w;
    }
}

static const char *const bool_true[] = {"true", "1", "yes", "on"};
static const char *const bool_false[] = {"false", "0", "no", "off"};

/* Parse `text` for option o into v. On failure returns false and says why (after the value). */
static bool parse_into(cfg_value *v, const char *text, char *why, size_t nwhy) {
    const tess_opt *o = v->opt;
    char *end = NULL;
    switch (o->type) {
    case TESS_OPT_TYPE_INT: {
        errno = 0;
        long long x = strtoll(text, &end, 10);
        if (end == text || *end != '\0') {
            snprintf(why, nwhy, "is not an integer");
            return false;
        }
        if (errno == ERANGE || x < o->int_min || x > o->int_max) {
            snprintf(why, nwhy, "is out of range [%lld, %lld]", (long long)o->int_min,
                     (long long)o->int_max);
            return false;
        }
        v->ival = x;
        return true;
    }
    case TESS_OPT_TYPE_REAL: {
        errno = 0;
        double x = strtod(text, &end);
        if (end == text || *end != '\0') {
            snprintf(why, nwhy, "is not a number");
            return false;
        }
        if (!isfinite(x)) {
            snprintf(why, nwhy, "is not a finite number");
            return false;
        }
        if (x < o->real_min || x > o->real_max) {
            char lo[32], hi[32];
            fmt_real(lo, sizeof lo, o->real_min);
            fmt_real(hi, sizeof hi, o->real_max);
            snprintf(why, nwhy, "is out of range [%s, %s]", lo, hi);
            return false;
        }
        v->rval = x;
        return true;
    }
    case TESS_OPT_TYPE_BOOL:
        for (size_t i = 0; i < sizeof bool_true / sizeof bool_true[0]; i++) {
            if (strcasecmp(text, bool_true[i]) == 0) {
                v->bval = true;
                return true;
            }
            if (strcasecmp(text, bool_false[i]) == 0) {
                v->bval = false;
                return true;
            }
        }
        snprintf(why, nwhy, "is not a boolean (true/false, 1/0, yes/no, on/off)");
        return false;
    case TESS_OPT_TYPE_STRING:
    case TESS_OPT_TYPE_CHOICE:
    case TESS_OPT_TYPE_ENUM: {
        if (o->type == TESS_OPT_TYPE_CHOICE && choice_index(o->choices, text) < 0) {
            snprintf(why, nwhy, "is not one of %s", o->choices);
            return false;
        }
        if (o->type == TESS_OPT_TYPE_ENUM && enum_index(o, text) < 0) {
            char names[200];
            enum_list(o, names, sizeof names);
            snprintf(why, nwhy, "is not one of %s", names);
            return false;
        }
        bool writable = !strpbrk(text, "\r\n") && text[0] != ';';
        for (const char *c = text; *c && writable; c++)
            if (*c == ';' && c > text && isspace((unsigned char)c[-1])) writable = false;
        if (!writable) {
            snprintf(why, nwhy,
                     "cannot be written back to INI (a newline, or ';' starting a comment)");
            return false;
        }
        char *s = dup_str(text);
        if (!s) {
            snprintf(why, nwhy, "could not be stored: out of memory");
            return false;
        }
        free(v->sval);
        v->sval = s;
        return true;
    }
    }
    snprintf(why, nwhy, "has an unknown option type");
    return false;
}

/* Set v from text, leading and trailing white space ignored (as in the INI file). */
static void set_from_text(cfg_value *v, cfg_errors *e, const char *loc, const char *text) {
    char buf[1024], why[256];
    while (isspace((unsigned char)*text)) text++;
    size_t n = strlen(text);
    while (n > 0 && isspace((unsigned char)text[n - 1])) n--;
    if (n >= sizeof buf) {
        CFG_ERROR(e, TESS_ERR_CONFIG, "%s: value for '%s' longer than %zu characters", loc,
                  v->full_key, sizeof buf - 1);
        return;
    }
    memcpy(buf, text, n);
    buf[n] = '\0';
    if (!parse_into(v, buf, why, sizeof why))
        CFG_ERROR(e, TESS_ERR_CONFIG, "%s: bad value for '%s': '%s' %s", loc, v->full_key, buf,
                  why);
}

/* ---------- create / destroy ---------- */

static tess_status check_opt(const char *sec, const tess_opt *o) {
    TESS_REQUIRE(valid_name(o->key, false), TESS_ERR_ARG,
                 "section '%s': bad option key '%s' (letters, digits, '_', '-'; < %d chars)", sec,
                 o->key ? o->key : "(null)", CFG_MAX_NAME);
    TESS_REQUIRE(o->help != NULL, TESS_ERR_ARG, "option '%s.%s' has no help text", sec, o->key);
    switch (o->type) {
    case TESS_OPT_TYPE_INT:
        TESS_REQUIRE(o->int_min <= o->int_def && o->int_def <= o->int_max, TESS_ERR_ARG,
                     "option '%s.%s': default %lld outside [%lld, %lld]", sec, o->key,
                     (long long)o->int_def, (long long)o->int_min, (long long)o->int_max);
        break;
    case TESS_OPT_TYPE_REAL:
        TESS_REQUIRE(o->real_min <= o->real_def && o->real_def <= o->real_max &&
                         isfinite(o->real_def),
                     TESS_ERR_ARG, "option '%s.%s': default %g outside [%g, %g]", sec, o->key,
                     o->real_def, o->real_min, o->real_max);
        break;
    case TESS_OPT_TYPE_BOOL:
        break;
    case TESS_OPT_TYPE_STRING:
        TESS_REQUIRE(o->str_def != NULL, TESS_ERR_ARG, "option '%s.%s': NULL default", sec, o->key);
        break;
    case TESS_OPT_TYPE_CHOICE:
        TESS_REQUIRE(o->choices && o->str_def && choice_index(o->choices, o->str_def) >= 0,
                     TESS_ERR_ARG, "option '%s.%s': default '%s' is not one of '%s'", sec, o->key,
                     o->str_def ? o->str_def : "(null)", o->choices ? o->choices : "(null)");
        break;
    case TESS_OPT_TYPE_ENUM:
        TESS_REQUIRE(o->enums && o->enum_count >= 1, TESS_ERR_ARG,
                     "option '%s.%s': empty enum table", sec, o->key);
        for (int i = 0; i < o->enum_count; i++) {
            const tess_opt_enum *r = &o->enums[i];
            TESS_REQUIRE(valid_name(r->name, false), TESS_ERR_ARG,
                         "option '%s.%s': bad enum name '%s'", sec, o->key,
                         r->name ? r->name : "(null)");
            for (int j = 0; j < i; j++) {
                TESS_REQUIRE(strcmp(o->enums[j].name, r->name) != 0, TESS_ERR_ARG,
                             "option '%s.%s': enum name '%s' appears twice", sec, o->key, r->name);
                TESS_REQUIRE(o->enums[j].value != r->value, TESS_ERR_ARG,
                             "option '%s.%s': '%s' and '%s' have the same value %d", sec, o->key,
                             o->enums[j].name, r->name, r->value);
            }
        }
        TESS_REQUIRE(o->str_def && enum_index(o, o->str_def) >= 0, TESS_ERR_ARG,
                     "option '%s.%s': default '%s' is not in its enum table", sec, o->key,
                     o->str_def ? o->str_def : "(null)");
        break;
    default:
        TESS_REQUIRE(false, TESS_ERR_ARG, "option '%s.%s': unknown type %d", sec, o->key,
                     (int)o->type);
    }
    return TESS_OK;
}

static tess_status set_default(cfg_value *v) {
    const tess_opt *o = v->opt;
    v->ival = o->int_def;
    v->rval = o->real_def;
    v->bval = o->bool_def;
    if (o->type == TESS_OPT_TYPE_STRING || o->type == TESS_OPT_TYPE_CHOICE ||
        o->type == TESS_OPT_TYPE_ENUM) {
        v->sval = dup_str(o->str_def);
        TESS_REQUIRE(v->sval != NULL, TESS_ERR_MEM, "out of memory copying a default");
    }
    return TESS_OK;
}

static tess_status fill_config(tess_config *c, const tess_config_section *secs, int64_t nsec) {
    int64_t total = 0;
    for (int64_t s = 0; s < nsec; s++) {
        TESS_REQUIRE(valid_name(secs[s].name, true), TESS_ERR_ARG,
                     "bad section name '%s' (letters, digits, '_', '-', '.'; < %d chars)",
                     secs[s].name ? secs[s].name : "(null)", CFG_MAX_NAME);
        TESS_REQUIRE(secs[s].nopts >= 0 && (secs[s].opts || secs[s].nopts == 0), TESS_ERR_ARG,
                     "section '%s': bad option table", secs[s].name);
        for (int64_t t = 0; t < s; t++)
            TESS_REQUIRE(strcmp(secs[t].name, secs[s].name) != 0, TESS_ERR_ARG,
                         "section '%s' declared twice", secs[s].name);
        for (int64_t i = 0; i < secs[s].nopts; i++) {
            TESS_CHECK(check_opt(secs[s].name, &secs[s].opts[i]));
            for (int64_t j = 0; j < i; j++)
                TESS_REQUIRE(strcmp(secs[s].opts[i].key, secs[s].opts[j].key) != 0, TESS_ERR_ARG,
                             "option '%s.%s' declared twice", secs[s].name, secs[s].opts[i].key);
        }
        total += secs[s].nopts;
    }
    c->sec_names = calloc((size_t)(nsec > 0 ? nsec : 1), sizeof *c->sec_names);
    c->vals = calloc((size_t)(total > 0 ? total : 1), sizeof *c->vals);
    TESS_REQUIRE(c->sec_names && c->vals, TESS_ERR_MEM, "out of memory for %lld options",
                 (long long)total);
    for (int64_t s = 0; s < nsec; s++) {
        c->sec_names[s] = dup_str(secs[s].name);
        TESS_REQUIRE(c->sec_names[s] != NULL, TESS_ERR_MEM, "out of memory");
        c->nsec++;
        for (int64_t i = 0; i < secs[s].nopts; i++) {
            cfg_value *v = &c->vals[c->nvals++];
            v->opt = &secs[s].opts[i];
            v->section = s;
            size_t n = strlen(secs[s].name) + strlen(v->opt->key) + 2;
            v->full_key = malloc(n);
            TESS_REQUIRE(v->full_key != NULL, TESS_ERR_MEM, "out of memory");
            snprintf(v->full_key, n, "%s.%s", secs[s].name, v->opt->key);
            TESS_CHECK(set_default(v));
        }
    }
    return TESS_OK;
}

tess_status tess_config_create(tess_config **cfg, const tess_config_section *sections,
                               int64_t nsections) {
    TESS_REQUIRE(cfg != NULL && (sections != NULL || nsections == 0) && nsections >= 0,
                 TESS_ERR_ARG, "bad arguments (nsections %lld)", (long long)nsections);
    *cfg = NULL;
    tess_config *c = calloc(1, sizeof *c);
    TESS_REQUIRE(c != NULL, TESS_ERR_MEM, "out of memory");
    tess_status s = fill_config(c, sections, nsections);
    if (s != TESS_OK) {
        tess_config_destroy(&c);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "invalid option tables");
    }
    *cfg = c;
    return TESS_OK;
}

void tess_config_destroy(tess_config **cfg) {
    if (!cfg || !*cfg) return;
    tess_config *c = *cfg;
    for (int64_t i = 0; i < c->nsec; i++) free(c->sec_names[i]);
    for (int64_t i = 0; i < c->nvals; i++) {
        free(c->vals[i].full_key);
        free(c->vals[i].sval);
    }
    for (int i = 0; i < c->nalias; i++) free(c->aliases[i].flag);
    for (int i = 0; i < c->nflags; i++) {
        free(c->flags[i].flag);
        free(c->flags[i].help);
    }
    free(c->sec_names);
    free(c->vals);
    free(c->resolved);
    free(c->help);
    free(c->listing);
    free(c);
    *cfg = NULL;
}

/* ---------- INI text ---------- */

typedef enum { LINE_NONE, LINE_SECTION, LINE_OTHER } line_kind;

typedef struct {
    tess_config *cfg;
    cfg_errors *err;
    const char *origin;
    const char *text;
    size_t pos, len;
    int64_t lineno;
    line_kind kind;   /* of the current line, as the reader classified it */
    bool indented;    /* current line starts with white space */
    bool handled;     /* inih passed the current line to the handler */
    char prev_key[CFG_MAX_NAME]; /* last key since the last [section], as inih tracks it */
    char loc[CFG_MAX_NAME + 600];
} ini_state;

static const char *ini_loc(ini_state *st) {
    snprintf(st->loc, sizeof st->loc, "%s:%lld", st->origin, (long long)st->lineno);
    return st->loc;
}

/* inih's find_chars_or_comment: the first char of `chars`, or an inline ';' after white space. */
static const char *ini_find(const char *s, const char *chars) {
    bool was_space = false;
    while (*s && !strchr(chars, *s) && !(was_space && *s == ';')) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

/* Classify the line in buf (as inih will see it); report section and syntax errors. */
static void ini_classify(ini_state *st, char *buf) {
    char *s = buf;
    if (st->lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
        (unsigned char)s[2] == 0xBF)
        s += 3;
    st->indented = isspace((unsigned char)s[0]);
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
    if (n == 0 || *s == ';' || *s == '#') {
        st->kind = LINE_NONE;
        return;
    }
    /* inih reads any indented line after a key as a continuation, even "  [section]". */
    if (*s != '[' || (st->indented && st->prev_key[0])) {
        st->kind = LINE_OTHER;
        return;
    }
    st->kind = LINE_SECTION;
    const char *end = ini_find(s + 1, "]");
    if (*end != ']') {
        CFG_ERROR(st->err, TESS_ERR_CONFIG, "%s: syntax error: section header without ']'",
                  ini_loc(st));
        return;
    }
    char name[256];
    size_t ln = (size_t)(end - (s + 1));
    if (ln >= sizeof name) ln = sizeof name - 1;
    memcpy(name, s + 1, ln);
    name[ln] = '\0';
    st->prev_key[0] = '\0';
    if (find_section(st->cfg, name) < 0) {
        name_match m = {.name = name};
        for (int64_t i = 0; i < st->cfg->nsec; i++) match_try(&m, st->cfg->sec_names[i]);
        const char *sug = match_result(&m);
        if (sug)
            CFG_ERROR(st->err, TESS_ERR_CONFIG,
                      "%s: unknown section [%s] (did you mean [%s]?)", ini_loc(st), name, sug);
        else
            CFG_ERROR(st->err, TESS_ERR_CONFIG, "%s: unknown section [%s]", ini_loc(st), name);
    }
}

/* The line before the one being read is complete: a non-comment, non-section line that inih
 * did not hand to the handler had no '=' or ':'. */
static void ini_finish_line(ini_state *st) {
    if (st->lineno > 0 && st->kind == LINE_OTHER && !st->handled)
        CFG_ERROR(st->err, TESS_ERR_CONFIG,
                  "%s: syntax error: expected 'key = value', '[section]' or a ';' comment",
                  ini_loc(st));
}

static char *ini_read_line(char *buf, int num, void *stream) {
    ini_state *st = stream;
    ini_finish_line(st);
    if (st->pos >= st->len) return NULL;
    const char *start = st->text + st->pos;
    const char *nl = memchr(start, '\n', st->len - st->pos);
    size_t n = nl ? (size_t)(nl - start) + 1 : st->len - st->pos;
    st->pos += n;
    st->lineno++;
    st->handled = false;
    if (n + 2 > (size_t)num) { /* inih needs room for '\r', '\n' and '\0' */
        CFG_ERROR(st->err, TESS_ERR_CONFIG, "%s: line too long (%zu characters, at most %d)",
                  ini_loc(st), nl ? n - 1 : n, num - 3);
        st->kind = LINE_NONE;
        snprintf(buf, (size_t)num, "\n");
        return buf;
    }
    memcpy(buf, start, n);
    buf[n] = '\0';
    ini_classify(st, buf);
    return buf;
}

static int ini_on_value(void *user, const char *section, const char *name, const char *value) {
    ini_state *st = user;
    st->handled = true;
    if (st->indented && st->prev_key[0]) {
        CFG_ERROR(st->err, TESS_ERR_CONFIG,
                  "%s: indented line continues the value of '%s.%s'; multi-line values are not "
                  "supported (remove the indentation)",
                  ini_loc(st), section, st->prev_key);
        return 1;
    }
    snprintf(st->prev_key, sizeof st->prev_key, "%s", name);
    if (section[0] == '\0') {
        CFG_ERROR(st->err, TESS_ERR_CONFIG, "%s: key '%s' is outside any [section]", ini_loc(st),
                  name);
        return 1;
    }
    if (find_section(st->cfg, section) < 0) return 1; /* reported at the [section] line */
    char full[2 * CFG_MAX_NAME + 2];
    snprintf(full, sizeof full, "%s.%s", section, name);
    cfg_value *v = find_value(st->cfg, full);
    if (!v) {
        report_unknown_key(st->cfg, st->err, ini_loc(st), full);
        return 1;
    }
    if (v->file_line > 0) {
        CFG_ERROR(st->err, TESS_ERR_CONFIG, "%s: duplicate key '%s' (first set on line %lld)",
                  ini_loc(st), full, (long long)v->file_line);
        return 1;
    }
    v->file_line = st->lineno;
    set_from_text(v, st->err, ini_loc(st), value);
    return 1;
}

static void parse_ini(tess_config *cfg, const char *text, size_t len, const char *origin,
                      cfg_errors *e) {
    if (memchr(text, '\0', len)) {
        CFG_ERROR(e, TESS_ERR_CONFIG, "%s: contains a NUL byte (not a text file?)", origin);
        return;
    }
    for (int64_t i = 0; i < cfg->nvals; i++) cfg->vals[i].file_line = 0;
    ini_state st = {.cfg = cfg, .err = e, .origin = origin, .text = text, .len = len};
    int64_t before = e->count;
    int rc = ini_parse_stream(ini_read_line, &st, ini_on_value, &st);
    if (rc > 0 && e->count == before) {
        st.lineno = rc;
        CFG_ERROR(e, TESS_ERR_CONFIG, "%s: syntax error", ini_loc(&st));
    } else if (rc < 0) {
        CFG_ERROR(e, TESS_ERR_MEM, "%s: the INI parser ran out of memory", origin);
    }
}

tess_status tess_config_parse_text(tess_config *cfg, const char *text, const char *origin) {
    TESS_REQUIRE(cfg && text && origin, TESS_ERR_ARG, "NULL argument");
    cfg_errors e = {0, TESS_OK};
    parse_ini(cfg, text, strlen(text), origin, &e);
    return cfg_errors_finish(&e);
}

/* ---------- --set, aliases ---------- */

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

/* Apply "key=value" given on the command line as `loc` (e.g. "--set a.b=1"). */
static void apply_set(tess_config *cfg, cfg_errors *e, const char *loc, const char *arg) {
    char buf[1024];
    if (strlen(arg) >= sizeof buf) {
        CFG_ERROR(e, TESS_ERR_CONFIG, "%s: argument longer than %zu characters", loc,
                  sizeof buf - 1);
        return;
    }
    memcpy(buf, arg, strlen(arg) + 1);
    char *eq = strchr(buf, '=');
    if (!eq) {
        CFG_ERROR(e, TESS_ERR_CONFIG, "%s: expected SECTION.KEY=VALUE (no '=')", loc);
        return;
    }
    *eq = '\0';
    char *key = trim(buf);
    cfg_value *v = find_value(cfg, key);
    if (!v) {
        report_unknown_key(cfg, e, loc, key);
        return;
    }
    set_from_text(v, e, loc, eq + 1);
}

tess_status tess_config_set(tess_config *cfg, const char *full_key, const char *value) {
    TESS_REQUIRE(cfg && full_key && value, TESS_ERR_ARG, "NULL argument");
    cfg_errors e = {0, TESS_OK};
    cfg_value *v = find_value(cfg, full_key);
    if (!v)
        report_unknown_key(cfg, &e, "tess_config_set", full_key);
    else
        set_from_text(v, &e, "tess_config_set", value);
    return cfg_errors_finish(&e);
}

tess_status tess_config_alias(tess_config *cfg, const char *flag, const char *key) {
    TESS_REQUIRE(cfg && flag && key, TESS_ERR_ARG, "NULL argument");
    TESS_REQUIRE(strncmp(flag, "--", 2) == 0 && valid_name(flag + 2, false), TESS_ERR_ARG,
                 "alias '%s' must look like --name", flag);
    for (int i = 0; i < CFG_NBUILTIN; i++)
        TESS_REQUIRE(strcmp(flag, builtin_flags[i]) != 0, TESS_ERR_ARG,
                     "alias '%s' is a built-in flag", flag);
    for (int i = 0; i < cfg->nflags; i++)
        TESS_REQUIRE(strcmp(flag, cfg->flags[i].flag) != 0, TESS_ERR_ARG,
                     "alias '%s' is the caller's flag", flag);
    for (int i = 0; i < cfg->nalias; i++)
        TESS_REQUIRE(strcmp(flag, cfg->aliases[i].flag) != 0, TESS_ERR_ARG,
                     "alias '%s' registered twice", flag);
    TESS_REQUIRE(cfg->nalias < CFG_MAX_ALIASES, TESS_ERR_ARG, "more than %d aliases",
                 CFG_MAX_ALIASES);
    cfg_value *v = find_value(cfg, key);
    TESS_REQUIRE(v != NULL, TESS_ERR_ARG, "alias '%s': no option '%s' declared", flag, key);
    char *f = dup_str(flag);
    TESS_REQUIRE(f != NULL, TESS_ERR_MEM, "out of memory");
    cfg->aliases[cfg->nalias].flag = f;
    cfg->aliases[cfg->nalias].val = v - cfg->vals;
    cfg->nalias++;
    return TESS_OK;
}

tess_status tess_config_flag(tess_config *cfg, const char *flag, const char *help) {
    TESS_REQUIRE(cfg && flag && help, TESS_ERR_ARG, "NULL argument");
    TESS_REQUIRE(flag[0] == '-' && !strchr(help, '\n'), TESS_ERR_ARG,
                 "flag '%s' must start with '-' and its help be one line", flag);
    for (int i = 0; i < CFG_NBUILTIN; i++)
        TESS_REQUIRE(strcmp(flag, builtin_flags[i]) != 0, TESS_ERR_ARG,
                     "flag '%s' is a built-in flag", flag);
    for (int i = 0; i < cfg->nflags; i++)
        TESS_REQUIRE(strcmp(flag, cfg->flags[i].flag) != 0, TESS_ERR_ARG,
                     "flag '%s' registered twice", flag);
    TESS_REQUIRE(cfg->nflags < CFG_MAX_FLAGS, TESS_ERR_ARG, "more than %d flags", CFG_MAX_FLAGS);
    char *f = dup_str(flag), *h = dup_str(help);
    if (!f || !h) {
        free(f);
        free(h);
        return tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__, "out of memory");
    }
    cfg->flags[cfg->nflags].flag = f;
    cfg->flags[cfg->nflags].help = h;
    cfg->nflags++;
    return TESS_OK;
}

/* ---------- the command line ---------- */

typedef struct {
    const char *flag; /* as typed, for messages: "--set" or an alias */
    const char *arg;
    int alias; /* index into cfg->aliases, or -1 for --set */
} cli_op;

/* Rank 0 reads `path` and broadcasts it; every rank returns the same bytes or the same error.
 * On success *text (NUL-terminated, length *len) is owned by the caller. */
static tess_status bcast_file(const char *path, const tess_group *g, cfg_errors *e, char **text,
                              size_t *len) {
    const int rank = g->rank;
    long long hdr[3] = {0, 0, 0}; /* length, errno, 1 = open failed / 2 = read failed */
    char *buf = NULL;
    if (rank == 0) {
        FILE *f = fopen(path, "rb");
        if (!f) {
            hdr[1] = errno;
            hdr[2] = 1;
        } else {
            size_t cap = 0, n = 0;
            for (;;) {
                if (n + 4096 + 1 > cap) {
                    cap = cap ? 2 * cap : 8192;
                    char *p = cap <= (size_t)CFG_MAX_FILE_BYTES + 8192 ? realloc(buf, cap) : NULL;
                    if (!p) {
                        hdr[1] = cap > (size_t)CFG_MAX_FILE_BYTES ? EFBIG : ENOMEM;
                        hdr[2] = 2;
                        break;
                    }
                    buf = p;
                }
                size_t got = fread(buf + n, 1, cap - n - 1, f);
                n += got;
                if (got == 0) {
                    if (ferror(f)) {
                        hdr[1] = errno ? errno : EIO;
                        hdr[2] = 2;
                    }
                    break;
                }
            }
            fclose(f);
            if (n > (size_t)CFG_MAX_FILE_BYTES && hdr[2] == 0) {
                hdr[1] = EFBIG;
                hdr[2] = 2;
            }
            hdr[0] = (long long)n;
        }
    }
    tess_status st = tess_par_bcast_bytes(g, hdr, sizeof hdr, 0);
    if (st != TESS_OK || hdr[2] != 0) free(buf);
    TESS_CHECK(st);
    if (hdr[2] != 0) {
        if (hdr[2] == 1)
            CFG_ERROR(e, TESS_ERR_NOINPUT, "cannot open config '%s': %s", path,
                      strerror((int)hdr[1]));
        else
            CFG_ERROR(e, TESS_ERR_NOINPUT, "cannot read config '%s': %s", path,
                      hdr[1] == EFBIG ? "larger than 16 MiB" : strerror((int)hdr[1]));
        *text = NULL;
        return TESS_OK;
    }
    size_t n = (size_t)hdr[0];
    if (rank != 0) buf = malloc(n + 1);
    st = buf != NULL ? TESS_OK
                     : tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                       "cannot allocate %zu bytes for config '%s'", n + 1, path);
    st = tess_par_agree(g, st);
    if (st == TESS_OK) st = tess_par_bcast_bytes(g, buf, n, 0);
    if (st != TESS_OK) free(buf);
    TESS_CHECK(st);
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return TESS_OK;
}

static void write_stdout(const char *s) {
    fflush(stdout);
    size_t len = strlen(s), off = 0;
    while (off < len) {
        ssize_t w = write(STDOUT_FILENO, s + off, len - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
}

static bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

/* Split argv into ops; flag errors go to e. ops has room for argc entries. */
static void scan_args(tess_config *cfg, int argc, char **argv, cfg_errors *e, cli_op *ops,
                      int *nops, const char **config_path, bool *print) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--print-config") == 0) {
            *print = true;
            continue;
        }
        if (a[0] != '-') {
            CFG_ERROR(e, TESS_ERR_ARG, "unexpected argument '%s' (options are --flags)", a);
            continue;
        }
        char flag[128];
        const char *eq = strchr(a, '='), *val = NULL;
        size_t fl = eq ? (size_t)(eq - a) : strlen(a);
        if (fl >= sizeof flag) fl = sizeof flag - 1;
        memcpy(flag, a, fl);
        flag[fl] = '\0';
        int alias = -1;
        for (int k = 0; k < cfg->nalias; k++)
            if (strcmp(flag, cfg->aliases[k].flag) == 0) alias = k;
        bool takes_value =
            alias >= 0 || strcmp(flag, "--config") == 0 || strcmp(flag, "--set") == 0;
        if (!takes_value) {
            name_match m = {.name = flag};
            for (int k = 0; k < CFG_NBUILTIN; k++) match_try(&m, builtin_flags[k]);
            for (int k = 0; k < cfg->nalias; k++) match_try(&m, cfg->aliases[k].flag);
            for (int k = 0; k < cfg->nflags; k++) match_try(&m, cfg->flags[k].flag);
            const char *sug = match_result(&m);
            if (sug)
                CFG_ERROR(e, TESS_ERR_ARG, "unknown option '%s' (did you mean '%s'?)", flag, sug);
            else
                CFG_ERROR(e, TESS_ERR_ARG, "unknown option '%s' (--help lists the options)", flag);
            continue;
        }
        if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            CFG_ERROR(e, TESS_ERR_ARG, "option '%s' needs a value", flag);
            continue;
        }
        if (strcmp(flag, "--config") == 0) {
            if (*config_path)
                CFG_ERROR(e, TESS_ERR_ARG, "--config given twice ('%s' and '%s')", *config_path,
                          val);
            else
                *config_path = val;
            continue;
        }
        ops[*nops].flag = alias >= 0 ? cfg->aliases[alias].flag : "--set";
        ops[*nops].arg = val;
        ops[*nops].alias = alias;
        (*nops)++;
    }
}

/* FNV-1a 64 of the arguments argv[1..argc-1], each with its terminating NUL. */
static uint64_t args_digest(int argc, char **argv) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        do {
            h ^= (unsigned char)*a;
            h *= 0x100000001b3ULL;
        } while (*a++);
    }
    return h;
}

tess_status tess_config_check_argv(const tess_group *g, int argc, char **argv) {
    TESS_REQUIRE(g && argc >= 0 && (argv || argc == 0), TESS_ERR_ARG, "bad arguments (argc %d)",
                 argc);
    /* MAX of the digest and of its complement (an order-reversing map): equal everywhere iff
     * MAX == ~MAX(~x), i.e. the largest and the smallest digest agree. */
    const uint64_t h = args_digest(argc, argv);
    int64_t d[2] = {(int64_t)h, (int64_t)~h};
    TESS_CHECK(tess_par_allreduce_i64(g, d, 2, TESS_PAR_MAX));
    if ((uint64_t)d[0] == ~(uint64_t)d[1]) return TESS_OK;
    /* They differ: rank 0's arguments to every rank, each rank finds its first differing one, the
     * lowest (argument, rank) pair names the difference. */
    int64_t len = 0;
    if (g->rank == 0)
        for (int i = 1; i < argc; i++) len += (int64_t)strlen(argv[i]) + 1;
    TESS_CHECK(tess_par_bcast_bytes(g, &len, sizeof len, 0));
    char *ref = malloc((size_t)len + 1);
    tess_status s = tess_par_agree(g, ref ? TESS_OK
                                          : tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__,
                                                            __func__, "cannot compare the "
                                                            "command lines: out of memory"));
    if (s != TESS_OK) {
        free(ref);
        return s;
    }
    if (g->rank == 0) {
        size_t off = 0;
        for (int i = 1; i < argc; i++) {
            const size_t n = strlen(argv[i]) + 1;
            memcpy(ref + off, argv[i], n);
            off += n;
        }
    }
    s = tess_par_bcast_bytes(g, ref, (size_t)len, 0);
    ref[len] = '\0';
    /* this rank's first argument that differs from rank 0's (-1: none) */
    const char *r = ref;
    int first = -1;
    for (int i = 1; s == TESS_OK; i++) {
        const bool ref_has = r < ref + len, has = i < argc;
        if (!ref_has && !has) break;
        if (!ref_has || !has || strcmp(r, argv[i]) != 0) {
            first = i;
            break;
        }
        r += strlen(r) + 1;
    }
    int64_t key = first > 0 ? (int64_t)first * g->size + g->rank : INT64_MAX;
    if (s == TESS_OK) s = tess_par_allreduce_i64(g, &key, 1, TESS_PAR_MIN);
    if (s != TESS_OK) {
        free(ref);
        return s;
    }
    /* the argument `arg` on rank 0 (from ref) and on rank `who`, the lowest where it differs */
    const int arg = (int)(key / g->size), who = (int)(key % g->size);
    r = ref;
    for (int i = 1; i < arg && r < ref + len; i++) r += strlen(r) + 1;
    char on0[200], theirs[200] = "";
    snprintf(on0, sizeof on0, "%s", r < ref + len ? r : "(none)");
    if (g->rank == who) snprintf(theirs, sizeof theirs, "%s", arg < argc ? argv[arg] : "(none)");
    s = tess_par_bcast_bytes(g, theirs, sizeof theirs, who);
    free(ref);
    TESS_CHECK(s);
    return tess_error_push(TESS_ERR_CONFIG, __FILE__, __LINE__, __func__,
                           "the command line differs between ranks: argument %d is '%s' on rank 0 "
                           "but '%s' on rank %d (every rank must be started with the same "
                           "arguments)",
                           arg, on0, theirs, who);
}

tess_status tess_config_parse_args(tess_config *cfg, const tess_group *g, int argc, char **argv,
                                   tess_config_action *action) {
    TESS_REQUIRE(cfg && g && action && argc >= 0 && (argv || argc == 0), TESS_ERR_ARG,
                 "bad arguments (argc %d)", argc);
    TESS_CHECK(tess_config_check_argv(g, argc, argv)); /* before any rank may leave (--help) */
    *action = TESS_CONFIG_ACTION_RUN;
    const int rank = g->rank;
    for (int i = 1; i < argc; i++) {
        if (!is_help(argv[i])) continue;
        const char *help = tess_config_help_text(cfg, argc > 0 ? argv[0] : "app");
        TESS_REQUIRE(help != NULL, TESS_ERR_MEM, "out of memory formatting --help");
        if (rank == 0) write_stdout(help);
        *action = TESS_CONFIG_ACTION_HELP;
        return TESS_OK;
    }
    if (tess_version_asked(argc, argv)) {
        char line[512], out[sizeof line + 1];
        snprintf(out, sizeof out, "%s\n", tess_version_line(line, sizeof line, argv[0]));
        if (rank == 0) write_stdout(out);
        *action = TESS_CONFIG_ACTION_VERSION;
        return TESS_OK;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--print-options") != 0) continue;
        const char *listing = tess_config_options_json(cfg, argv[0]);
        TESS_REQUIRE(listing != NULL, TESS_ERR_MEM, "out of memory formatting --print-options");
        if (rank == 0) write_stdout(listing);
        *action = TESS_CONFIG_ACTION_OPTIONS;
        return TESS_OK;
    }
    cli_op *ops = calloc((size_t)(argc > 0 ? argc : 1), sizeof *ops);
    TESS_REQUIRE(ops != NULL, TESS_ERR_MEM, "out of memory for %d arguments", argc);
    cfg_errors e = {0, TESS_OK};
    int nops = 0;
    const char *config_path = NULL;
    bool print = false;
    scan_args(cfg, argc, argv, &e, ops, &nops, &config_path, &print);
    if (config_path) {
        char *text = NULL;
        size_t len = 0;
        tess_status s = bcast_file(config_path, g, &e, &text, &len);
        if (s != TESS_OK) {
            free(ops);
            return tess_error_push(s, __FILE__, __LINE__, __func__, "reading config '%s'",
                                   config_path);
        }
        if (text) parse_ini(cfg, text, len, config_path, &e);
        free(text);
    }
    for (int i = 0; i < nops; i++) {
        char loc[1200];
        snprintf(loc, sizeof loc, "%s %s", ops[i].flag, ops[i].arg);
        if (ops[i].alias < 0) {
            apply_set(cfg, &e, loc, ops[i].arg);
        } else {
            set_from_text(&cfg->vals[cfg->aliases[ops[i].alias].val], &e, loc, ops[i].arg);
        }
    }
    free(ops);
    TESS_CHECK(cfg_errors_finish(&e));
    if (print) {
        const char *text = tess_config_resolved_text(cfg);
        TESS_REQUIRE(text != NULL, TESS_ERR_MEM, "out of memory formatting the config");
        if (rank == 0) write_stdout(text);
        *action = TESS_CONFIG_ACTION_PRINTED;
    }
    return TESS_OK;
}

tess_status tess_config_check_value(const tess_config *cfg, const char *full_key, const char *text,
                                    const char *what) {
    const cfg_value *v = cfg && full_key ? find_value(cfg, full_key) : NULL;
    TESS_REQUIRE(v != NULL && text && what, TESS_ERR_ARG, "no option '%s' declared",
                 full_key ? full_key : "(null)");
    cfg_value tmp = {.opt = v->opt};
    char why[256];
    const bool ok = parse_into(&tmp, text, why, sizeof why);
    free(tmp.sval);
    TESS_REQUIRE(ok, TESS_ERR_CONFIG, "%s: '%s' %s (the range of %s)", what, text, why, full_key);
    return TESS_OK;
}

/* ---------- getters ---------- */

/* The value of full_key if its type is t1, t2 or t3; aborts otherwise (a bug in the caller). */
static const cfg_value *get_checked3(const tess_config *cfg, const char *full_key,
                                     tess_opt_type t1, tess_opt_type t2, tess_opt_type t3,
                                     const char *func) {
    const cfg_value *v = cfg && full_key ? find_value(cfg, full_key) : NULL;
    if (!v || (v->opt->type != t1 && v->opt->type != t2 && v->opt->type != t3)) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s('%s'): %s", func, full_key ? full_key : "(null)",
                 v ? "option has another type" : "no such option declared");
        tess_assert_fail(msg, __FILE__, __LINE__, func);
    }
    return v;
}

static const cfg_value *get_checked(const tess_config *cfg, const char *full_key,
                                    tess_opt_type t1, tess_opt_type t2, const char *func) {
    return get_checked3(cfg, full_key, t1, t2, t2, func);
}

int64_t tess_config_int(const tess_config *cfg, const char *full_key) {
    return get_checked(cfg, full_key, TESS_OPT_TYPE_INT, TESS_OPT_TYPE_INT, __func__)->ival;
}

double tess_config_real(const tess_config *cfg, const char *full_key) {
    return get_checked(cfg, full_key, TESS_OPT_TYPE_REAL, TESS_OPT_TYPE_REAL, __func__)->rval;
}

bool tess_config_bool(const tess_config *cfg, const char *full_key) {
    return get_checked(cfg, full_key, TESS_OPT_TYPE_BOOL, TESS_OPT_TYPE_BOOL, __func__)->bval;
}

const char *tess_config_string(const tess_config *cfg, const char *full_key) {
    return get_checked3(cfg, full_key, TESS_OPT_TYPE_STRING, TESS_OPT_TYPE_CHOICE,
                        TESS_OPT_TYPE_ENUM, __func__)->sval;
}

int tess_config_enum(const tess_config *cfg, const char *full_key) {
    const cfg_value *v = get_checked(cfg, full_key, TESS_OPT_TYPE_ENUM, TESS_OPT_TYPE_ENUM, __func__);
    return v->opt->enums[enum_index(v->opt, v->sval)].value; /* sval is always a table name */
}

/* ---------- text output ---------- */

static void fmt_value(const cfg_value *v, char *buf, size_t n) {
    switch (v->opt->type) {
    case TESS_OPT_TYPE_INT: snprintf(buf, n, "%lld", (long long)v->ival); break;
    case TESS_OPT_TYPE_REAL: fmt_real(buf, n, v->rval); break;
    case TESS_OPT_TYPE_BOOL: snprintf(buf, n, "%s", v->bval ? "true" : "false"); break;
    case TESS_OPT_TYPE_STRING:
    case TESS_OPT_TYPE_CHOICE:
    case TESS_OPT_TYPE_ENUM: snprintf(buf, n, "%s", v->sval); break;
    }
}

const char *tess_config_resolved_text(tess_config *cfg) {
    if (!cfg) return NULL;
    sbuf b = {0};
    sb_printf(&b, "; resolved configuration (defaults < --config file < --set)\n");
    for (int64_t s = 0; s < cfg->nsec; s++) {
        sb_printf(&b, "\n[%s]\n", cfg->sec_names[s]);
        for (int64_t i = 0; i < cfg->nvals; i++) {
            const cfg_value *v = &cfg->vals[i];
            if (v->section != s) continue;
            char val[1100];
            fmt_value(v, val, sizeof val);
            sb_printf(&b, "%s = %s\n", v->opt->key, val);
        }
    }
    free(cfg->resolved);
    cfg->resolved = sb_take(&b);
    return cfg->resolved;
}

/* ---------- resume check ---------- */

/* Whether the stored text `stored` of v's option means v's current value. */
static bool same_value(const cfg_value *v, const char *stored) {
    cfg_value tmp = {.opt = v->opt};
    char why[256];
    bool same = false;
    if (parse_into(&tmp, stored, why, sizeof why)) {
        switch (v->opt->type) {
        case TESS_OPT_TYPE_INT: same = tmp.ival == v->ival; break;
        case TESS_OPT_TYPE_REAL: same = tmp.rval == v->rval; break;
        case TESS_OPT_TYPE_BOOL: same = tmp.bval == v->bval; break;
        case TESS_OPT_TYPE_STRING:
        case TESS_OPT_TYPE_CHOICE:
        case TESS_OPT_TYPE_ENUM: same = strcmp(tmp.sval, v->sval) == 0; break;
        }
    }
    free(tmp.sval);
    return same;
}

static void report_changed(cfg_errors *e, const cfg_value *v, const char *stored,
                           const char *origin) {
    char now[1100];
    fmt_value(v, now, sizeof now);
    CFG_ERROR(e, TESS_ERR_CONFIG, "%s: '%s' in %s, '%s' now", v->full_key, stored, origin, now);
}

tess_status tess_config_check_resume(const tess_config *cfg, const char *text, const char *origin) {
    TESS_REQUIRE(cfg && text && origin, TESS_ERR_ARG, "bad arguments");
    bool *seen = calloc((size_t)(cfg->nvals > 0 ? cfg->nvals : 1), sizeof *seen);
    TESS_REQUIRE(seen != NULL, TESS_ERR_MEM, "out of memory comparing %lld options",
                 (long long)cfg->nvals);
    cfg_errors e = {0, TESS_OK};
    char section[CFG_MAX_NAME] = "", line[1200];
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len >= sizeof line) len = sizeof line - 1; /* longer than any value stored */
        memcpy(line, p, len);
        line[len] = '\0';
        p += nl ? (size_t)(nl - p) + 1 : strlen(p);
        char *a = line, *end = line + strlen(line);
        while (isspace((unsigned char)*a)) a++;
        while (end > a && isspace((unsigned char)end[-1])) *--end = '\0';
        if (*a == '\0' || *a == ';' || *a == '#') continue;
        if (*a == '[') {
            char *close = strchr(a, ']');
            size_t n = close ? (size_t)(close - a - 1) : 0;
            if (n >= sizeof section) n = 0;
            memcpy(section, a + 1, n);
            section[n] = '\0';
            continue;
        }
        char *eq = strchr(a, '=');
        if (!eq) continue;
        char *kend = eq, *val = eq + 1;
        while (kend > a && isspace((unsigned char)kend[-1])) kend--;
        *kend = '\0';
        while (isspace((unsigned char)*val)) val++;
        char full[2 * CFG_MAX_NAME + 2];
        snprintf(full, sizeof full, "%s.%s", section, a);
        cfg_value *v = find_value(cfg, full);
        if (!v) continue; /* an option this build no longer declares */
        seen[v - cfg->vals] = true;
        if (!v->opt->resumable && !same_value(v, val)) report_changed(&e, v, val, origin);
    }
    for (int64_t i = 0; i < cfg->nvals; i++) {
        const cfg_value *v = &cfg->vals[i];
        if (seen[i] || v->opt->resumable) continue;
        cfg_value def = {.opt = v->opt};
        char stored[1100];
        if (set_default(&def) != TESS_OK) {
            free(def.sval);
            free(seen);
            return tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__, "out of memory");
        }
        fmt_value(&def, stored, sizeof stored);
        free(def.sval);
        if (!same_value(v, stored)) report_changed(&e, v, stored, origin);
    }
    free(seen);
    if (e.count == 0) return TESS_OK;
    return tess_error_push(TESS_ERR_CONFIG, __FILE__, __LINE__, __func__,
                           "%lld option%s differ%s from %s (only options declared resumable may "
                           "change on resume)",
                           (long long)e.count, e.count == 1 ? "" : "s", e.count == 1 ? "s" : "",
                           origin);
}

static void help_option(sbuf *b, const cfg_value *v) {
    const tess_opt *o = v->opt;
    char lo[32], hi[32];
    switch (o->type) {
    case TESS_OPT_TYPE_INT:
        sb_printf(b, "  %s  (int, default %lld, range [%lld, %lld])\n", v->full_key,
                  (long long)o->int_def, (long long)o->int_min, (long long)o->int_max);
        break;
    case TESS_OPT_TYPE_REAL: {
        char def[32];
        fmt_real(def, sizeof def, o->real_def);
        fmt_real(lo, sizeof lo, o->real_min);
        fmt_real(hi, sizeof hi, o->real_max);
        sb_printf(b, "  %s  (real, default %s, range [%s, %s])\n", v->full_key, def, lo, hi);
        break;
    }
    case TESS_OPT_TYPE_BOOL:
        sb_printf(b, "  %s  (bool, default %s)\n", v->full_key, o->bool_def ? "true" : "false");
        break;
    case TESS_OPT_TYPE_STRING:
        sb_printf(b, "  %s  (string, default \"%s\")\n", v->full_key, o->str_def);
        break;
    case TESS_OPT_TYPE_CHOICE:
        sb_printf(b, "  %s  (one of %s, default %s)\n", v->full_key, o->choices, o->str_def);
        break;
    case TESS_OPT_TYPE_ENUM: {
        char names[512];
        enum_list(o, names, sizeof names);
        sb_printf(b, "  %s  (one of %s, default %s)\n", v->full_key, names, o->str_def);
        break;
    }
    }
    sb_printf(b, "      %s\n", o->help);
}

const char *tess_config_help_text(tess_config *cfg, const char *prog) {
    if (!cfg) return NULL;
    sbuf b = {0};
    sb_printf(&b,
              "usage: %s [--config FILE] [--set SECTION.KEY=VALUE]... [--print-config] [--help]\n"
              "       [--version]\n"
              "  --config FILE         read options from an INI file ([section] then key = value)\n"
              "  --set S.KEY=VALUE     set one option (repeatable; after the file, in order)\n"
              "  --print-config        print the resolved configuration and exit\n"
              "  --print-options       print every option (key, type, default, range or choices,\n"
              "                        help) as JSON and exit\n"
              "  --help                print this help and exit\n"
              "  --version             print the program, Tessera version and git commit\n",
              prog ? prog : "app");
    for (int i = 0; i < cfg->nflags; i++)
        sb_printf(&b, "  %-21s %s\n", cfg->flags[i].flag, cfg->flags[i].help);
    for (int i = 0; i < cfg->nalias; i++) {
        char flag[CFG_MAX_NAME + 16];
        snprintf(flag, sizeof flag, "%s VALUE", cfg->aliases[i].flag);
        sb_printf(&b, "  %-21s same as --set %s=VALUE\n", flag,
                  cfg->vals[cfg->aliases[i].val].full_key);
    }
    sb_printf(&b, "Precedence: defaults < --config file < --set and the flags above.\n");
    for (int64_t s = 0; s < cfg->nsec; s++) {
        sb_printf(&b, "\n[%s]\n", cfg->sec_names[s]);
        for (int64_t i = 0; i < cfg->nvals; i++)
            if (cfg->vals[i].section == s) help_option(&b, &cfg->vals[i]);
    }
    free(cfg->help);
    cfg->help = sb_take(&b);
    return cfg->help;
}

/* ---------- the machine-readable listing ---------- */

/* One option as a JSON object, or NULL when out of memory. */
static json_t *option_json(const cfg_value *v) {
    const tess_opt *o = v->opt;
    static const char *const type_names[] = {"int", "real", "bool", "string", "choice", "enum"};
    json_t *j = json_object(), *choices = NULL;
    bool ok = j && json_object_set_new(j, "key", json_string(v->full_key)) == 0 &&
              json_object_set_new(j, "type", json_string(type_names[o->type])) == 0;
    switch (o->type) {
    case TESS_OPT_TYPE_INT:
        ok = ok && json_object_set_new(j, "default", json_integer(o->int_def)) == 0 &&
             json_object_set_new(j, "min", json_integer(o->int_min)) == 0 &&
             json_object_set_new(j, "max", json_integer(o->int_max)) == 0;
        break;
    case TESS_OPT_TYPE_REAL: /* the bounds are finite doubles (json_real refuses others) */
        ok = ok && json_object_set_new(j, "default", json_real(o->real_def)) == 0 &&
             json_object_set_new(j, "min", json_real(o->real_min)) == 0 &&
             json_object_set_new(j, "max", json_real(o->real_max)) == 0;
        break;
    case TESS_OPT_TYPE_BOOL:
        ok = ok && json_object_set_new(j, "default", json_boolean(o->bool_def)) == 0;
        break;
    case TESS_OPT_TYPE_STRING:
        ok = ok && json_object_set_new(j, "default", json_string(o->str_def)) == 0;
        break;
    case TESS_OPT_TYPE_CHOICE:
    case TESS_OPT_TYPE_ENUM:
        choices = json_array();
        ok = ok && choices && json_object_set_new(j, "default", json_string(o->str_def)) == 0;
        if (o->type == TESS_OPT_TYPE_ENUM) {
            for (int i = 0; ok && i < o->enum_count; i++)
                ok = json_array_append_new(choices, json_string(o->enums[i].name)) == 0;
        } else {
            for (const char *p = o->choices; ok;) {
                const char *bar = strchr(p, '|');
                const size_t len = bar ? (size_t)(bar - p) : strlen(p);
                ok = json_array_append_new(choices, json_stringn(p, len)) == 0;
                if (!bar) break;
                p = bar + 1;
            }
        }
        ok = ok && json_object_set(j, "choices", choices) == 0;
        json_decref(choices);
        break;
    }
    ok = ok && json_object_set_new(j, "help", json_string(o->help)) == 0;
    if (!ok) json_decref(j);
    return ok ? j : NULL;
}

const char *tess_config_options_json(tess_config *cfg, const char *prog) {
    if (!cfg) return NULL;
    json_t *root = json_object(), *opts = json_array();
    bool ok = root && opts &&
              json_object_set_new(root, "program", json_string(prog ? prog : "app")) == 0 &&
              json_object_set(root, "options", opts) == 0;
    for (int64_t i = 0; ok && i < cfg->nvals; i++)
        ok = json_array_append_new(opts, option_json(&cfg->vals[i])) == 0;
    json_decref(opts);
    char *text = ok ? json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(root);
    /* json_dumps allocates with malloc (jansson's default allocator); add the final newline. */
    char *out = text ? realloc(text, strlen(text) + 2) : NULL;
    if (!out) {
        free(text);
        return NULL;
    }
    strcat(out, "\n");
    free(cfg->listing);
    cfg->listing = out;
    return out;
}
