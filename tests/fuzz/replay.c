/* replay.c - main() for a fuzz target outside libFuzzer: every argument is a file or a directory
 * (its regular files, in name order), and each file is passed once to LLVMFuzzerTestOneInput.
 * A target that finds a property broken aborts (fuzz.h: fuzz_fail), so a regression is a failed
 * test; an input the target handles, accepted or refused, passes. Prints "<n> inputs replayed";
 * exit 0, or 1 when an argument cannot be read or no input was found (an empty corpus would
 * prove nothing). Linked into every fuzz_<target>_replay program of the normal builds. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read path whole and run it. Returns 0, or 1 if the file cannot be read. */
static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open '%s'\n", path);
        return 1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got = 1; buf && got > 0;) {
        if (n == cap) {
            uint8_t *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: cannot read '%s'\n", path);
        free(buf);
        return 1;
    }
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    /* an exact-size copy, so ASan sees a read past the input's end */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return 1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run every regular file of dir in name order; *count += files run. Returns 0 or 1. */
static int replay_dir(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open directory '%s'\n", dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int bad = 0;
    for (struct dirent *e = readdir(d); e && !bad; e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **p = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            if (!p) {
                bad = 1;
                break;
            }
            names = p;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            bad = 1;
            break;
        }
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (!bad && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            bad = replay_file(names[i]);
            ++*count;
        }
        free(names[i]);
    }
    free(names);
    return bad;
}

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int count = 0, bad = 0;
    for (int i = 1; i < argc && !bad; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such file or directory '%s'\n", argv[i]);
            bad = 1;
        } else if (S_ISDIR(st.st_mode)) {
            bad = replay_dir(argv[i], &count);
        } else {
            bad = replay_file(argv[i]);
            count++;
        }
    }
    printf("%d inputs replayed\n", count);
    if (!bad && count == 0) fprintf(stderr, "replay: no input found\n");
    return bad || count == 0;
}
