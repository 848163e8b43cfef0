/* mesh.c - groups and the process mesh (see mesh.h).
 *
 * Order of work in every constructor: validate (same inputs on every rank, so the same verdict),
 * allocate everything, agree on the allocation with one all-reduce, and only then create
 * communicators. A local failure therefore never leaves another rank waiting in MPI_Comm_split. */
#include "par/mesh.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "par/coll.h"      /* tess_par_agree */

struct tess_mesh {
    tess_group all;
    int naxes;
    tess_group axes[TESS_MESH_MAX_AXES];
};

static tess_status check_name(const char *name, const char *what) {
    TESS_REQUIRE(name && name[0] != '\0', TESS_ERR_ARG, "%s name is empty", what);
    size_t len = strnlen(name, TESS_GROUP_NAME_MAX);
    TESS_REQUIRE(len < TESS_GROUP_NAME_MAX, TESS_ERR_ARG, "%s name '%.*s...' is longer than %d bytes",
                 what, 16, name, TESS_GROUP_NAME_MAX - 1);
    return TESS_OK;
}

/* Scratch for the v-collectives; the communicator comes later (group_attach). */
static int group_alloc(tess_group *g, int size, const char *name) {
    memset(g, 0, sizeof *g);
    g->comm = MPI_COMM_NULL;
    g->size = size;
    g->max_count = TESS_PAR_MAX_COUNT;
    memcpy(g->name, name, strlen(name) + 1);
    g->iscratch = malloc(4 * (size_t)size * sizeof *g->iscratch);
    g->lscratch = malloc(4 * (size_t)size * sizeof *g->lscratch);
    return g->iscratch && g->lscratch;
}

static void group_release(tess_group *g) {
    if (g->comm != MPI_COMM_NULL) MPI_Comm_free(&g->comm);
    free(g->iscratch);
    free(g->lscratch);
    g->iscratch = NULL;
    g->lscratch = NULL;
}

/* Take ownership of comm: errors return from now on; rank and size must match the allocation. */
static tess_status group_attach(tess_group *g, MPI_Comm comm) {
    g->comm = comm;
    TESS_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    TESS_MPI_CHECK(MPI_Comm_set_name(comm, g->name));
    int size;
    TESS_MPI_CHECK(MPI_Comm_rank(comm, &g->rank));
    TESS_MPI_CHECK(MPI_Comm_size(comm, &size));
    TESS_REQUIRE(size == g->size, TESS_ERR_INTERNAL, "group '%s' has %d ranks, expected %d",
                 g->name, size, g->size);
    return TESS_OK;
}

/* Collective on comm: TESS_ERR_MEM on every rank if the allocation failed on any. */
/* Allocation verdict of a group being made from a raw communicator, before any group exists to
 * agree on (tess_par_agree needs one): the bootstrap of the verdict machinery. */
static tess_status agree_alloc(MPI_Comm comm, int ok, const char *what) {
    int all_ok = ok;
    TESS_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm));
    TESS_REQUIRE(all_ok, TESS_ERR_MEM, "allocating %s failed on %s rank", what,
                 ok ? "another" : "this");
    return TESS_OK;
}

static tess_status group_new(tess_group **out, int size, const char *name, MPI_Comm agree_comm) {
    tess_group *g = malloc(sizeof *g);
    int ok = g && group_alloc(g, size, name);
    tess_status s = agree_alloc(agree_comm, ok, "a group");
    if (s != TESS_OK) {
        if (g) group_release(g);
        free(g);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "group '%s'", name);
    }
    *out = g;
    return TESS_OK;
}

static tess_status group_finish(tess_group **out, tess_group *g, MPI_Comm comm) {
    tess_status s = group_attach(g, comm);
    if (s != TESS_OK) {
        tess_error_push(s, __FILE__, __LINE__, __func__, "group '%s'", g->name);
        group_release(g);
        free(g);
        return s;
    }
    *out = g;
    return TESS_OK;
}

static tess_status dup_comm(MPI_Comm comm, MPI_Comm *dup) {
    TESS_MPI_CHECK(MPI_Comm_dup(comm, dup));
    return TESS_OK;
}

static tess_status split_comm(MPI_Comm comm, int color, int key, MPI_Comm *sub) {
    TESS_MPI_CHECK(MPI_Comm_split(comm, color, key, sub));
    return TESS_OK;
}

static tess_status group_discard(tess_group *g, tess_status s) {
    group_release(g);
    free(g);
    return tess_error_push(s, __FILE__, __LINE__, __func__, "creating a group");
}

tess_status tess_group_create(MPI_Comm comm, const char *name, tess_group **out) {
    TESS_REQUIRE(out, TESS_ERR_ARG, "output pointer is NULL");
    *out = NULL;
    TESS_CHECK(check_name(name, "group"));
    int size;
    TESS_MPI_CHECK(MPI_Comm_size(comm, &size));
    tess_group *g;
    TESS_CHECK(group_new(&g, size, name, comm));
    MPI_Comm dup;
    tess_status s = dup_comm(comm, &dup);
    if (s != TESS_OK) return group_discard(g, s);
    return group_finish(out, g, dup);
}

tess_status tess_group_split(const tess_group *parent, int color, int key, const char *name,
                             tess_group **out) {
    TESS_REQUIRE(out && parent, TESS_ERR_ARG, "parent or output pointer is NULL");
    *out = NULL;
    TESS_CHECK(check_name(name, "group"));
    TESS_REQUIRE(color >= 0, TESS_ERR_ARG, "split of '%s' into '%s': color %d < 0", parent->name,
                 name, color);
    /* The new size is known only after the split: count it first (one all-gather of colors). */
    int *colors = parent->iscratch;
    TESS_MPI_CHECK(MPI_Allgather(&color, 1, MPI_INT, colors, 1, MPI_INT, parent->comm));
    int size = 0;
    for (int r = 0; r < parent->size; r++) size += colors[r] == color;
    tess_group *g;
    TESS_CHECK(group_new(&g, size, name, parent->comm));
    MPI_Comm sub;
    tess_status s = split_comm(parent->comm, color, key, &sub);
    if (s != TESS_OK) return group_discard(g, s);
    return group_finish(out, g, sub);
}

void tess_group_destroy(tess_group **g) {
    if (!g || !*g) return;
    group_release(*g);
    free(*g);
    *g = NULL;
}

tess_status tess_group_set_max_count(tess_group *g, int64_t n) {
    TESS_REQUIRE(n >= 1 && n <= TESS_PAR_MAX_COUNT, TESS_ERR_ARG,
                 "max count %lld is outside [1, %lld]", (long long)n,
                 (long long)TESS_PAR_MAX_COUNT);
    g->max_count = n;
    return TESS_OK;
}

/* "dp=2 x ep=rest" into buf. */
static void format_shape(char *buf, size_t cap, int naxes, const tess_mesh_axis *axes) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < naxes && len < cap; i++) {
        int n = axes[i].size == TESS_MESH_REST
                    ? snprintf(buf + len, cap - len, "%s%s=rest", i ? " x " : "", axes[i].name)
                    : snprintf(buf + len, cap - len, "%s%s=%d", i ? " x " : "", axes[i].name,
                               axes[i].size);
        if (n < 0) return;
        len += (size_t)n;
    }
}

/* Same inputs on every rank give the same verdict, so errors here are collective. */
static tess_status resolve_shape(int naxes, const tess_mesh_axis *axes, int nranks, int *sizes) {
    TESS_REQUIRE(naxes >= 1 && naxes <= TESS_MESH_MAX_AXES, TESS_ERR_ARG,
                 "a mesh has 1..%d axes, got %d", TESS_MESH_MAX_AXES, naxes);
    TESS_REQUIRE(axes, TESS_ERR_ARG, "axes is NULL");
    for (int i = 0; i < naxes; i++) {
        TESS_CHECK(check_name(axes[i].name, "mesh axis"));
        for (int j = 0; j < i; j++)
            TESS_REQUIRE(strcmp(axes[i].name, axes[j].name) != 0, TESS_ERR_CONFIG,
                         "mesh axis name '%s' is used twice", axes[i].name);
    }
    char shape[256];
    format_shape(shape, sizeof shape, naxes, axes);
    double need = 1.0; /* exact below 2^53; only printed when it is not the rank count */
    int rest = -1;
    for (int i = 0; i < naxes; i++) {
        TESS_REQUIRE(axes[i].size >= 1 || axes[i].size == TESS_MESH_REST, TESS_ERR_CONFIG,
                     "mesh %s: axis '%s' has size %d (must be >= 1, or %d for the rest)", shape,
                     axes[i].name, axes[i].size, TESS_MESH_REST);
        if (axes[i].size == TESS_MESH_REST) {
            TESS_REQUIRE(rest < 0, TESS_ERR_CONFIG,
                         "mesh %s: only one axis may take the rest ('%s' and '%s' both do)", shape,
                         axes[rest].name, axes[i].name);
            rest = i;
        } else {
            need *= axes[i].size;
        }
        sizes[i] = axes[i].size;
    }
    if (rest >= 0) {
        TESS_REQUIRE(need <= nranks && nranks % (int)need == 0, TESS_ERR_CONFIG,
                     "mesh %s: the communicator's %d ranks are not a multiple of %.0f", shape,
                     nranks, need);
        sizes[rest] = nranks / (int)need;
    } else {
        TESS_REQUIRE(need == nranks, TESS_ERR_CONFIG,
                     "mesh %s needs %.0f ranks, the communicator has %d", shape, need, nranks);
    }
    return TESS_OK;
}

static tess_status mesh_split(tess_mesh *m, const int *sizes) {
    int stride = 1;
    for (int i = m->naxes - 1; i >= 0; i--) {
        int coord = (m->all.rank / stride) % sizes[i];
        MPI_Comm sub;
        TESS_CHECK(split_comm(m->all.comm, m->all.rank - coord * stride, coord, &sub));
        TESS_CHECK(group_attach(&m->axes[i], sub));
        TESS_REQUIRE(m->axes[i].rank == coord, TESS_ERR_INTERNAL,
                     "axis '%s': rank %d, coordinate %d", m->axes[i].name, m->axes[i].rank, coord);
        stride *= sizes[i];
    }
    return TESS_OK;
}

tess_status tess_mesh_create(const tess_group *parent, int naxes, const tess_mesh_axis *axes,
                             tess_mesh **out) {
    TESS_REQUIRE(out && parent, TESS_ERR_ARG, "NULL argument");
    *out = NULL;
    const MPI_Comm comm = parent->comm;
    const int nranks = parent->size;
    int sizes[TESS_MESH_MAX_AXES];
    TESS_CHECK(resolve_shape(naxes, axes, nranks, sizes));

    tess_mesh *m = calloc(1, sizeof *m);
    int ok = m != NULL;
    if (m) {
        m->naxes = naxes;
        ok = group_alloc(&m->all, nranks, "all");
        for (int i = 0; i < naxes; i++) ok = group_alloc(&m->axes[i], sizes[i], axes[i].name) && ok;
    }
    tess_status s = tess_par_agree(parent, ok ? TESS_OK
                                              : tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__,
                                                                __func__, "allocating the mesh"));
    MPI_Comm dup;
    if (s == TESS_OK) s = dup_comm(comm, &dup);
    if (s == TESS_OK) s = group_attach(&m->all, dup);
    if (s == TESS_OK) s = mesh_split(m, sizes);
    if (s != TESS_OK) {
        tess_mesh_destroy(&m);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "creating a mesh of %d ranks",
                               nranks);
    }
    *out = m;
    return TESS_OK;
}

void tess_mesh_destroy(tess_mesh **mesh) {
    if (!mesh || !*mesh) return;
    tess_mesh *m = *mesh;
    for (int i = 0; i < m->naxes; i++) group_release(&m->axes[i]);
    group_release(&m->all);
    free(m);
    *mesh = NULL;
}

const tess_group *tess_mesh_all(const tess_mesh *mesh) { return &mesh->all; }

int tess_mesh_naxes(const tess_mesh *mesh) { return mesh->naxes; }

const tess_group *tess_mesh_axis_group(const tess_mesh *mesh, int i) {
    TESS_ASSERT(i >= 0 && i < mesh->naxes);
    return &mesh->axes[i];
}

tess_status tess_mesh_group(const tess_mesh *mesh, const char *name, const tess_group **g) {
    *g = NULL;
    char known[TESS_MESH_MAX_AXES * (TESS_GROUP_NAME_MAX + 2)];
    size_t len = 0;
    known[0] = '\0';
    for (int i = 0; i < mesh->naxes; i++) {
        if (name && strcmp(mesh->axes[i].name, name) == 0) {
            *g = &mesh->axes[i];
            return TESS_OK;
        }
        int n = snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "",
                         mesh->axes[i].name);
        if (n > 0) len += (size_t)n;
    }
    return tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                           "the mesh has no axis '%s' (axes: %s)", name ? name : "(null)", known);
}
