/* mesh.h - process groups and the process mesh: who talks to whom.
 *
 * A tess_group is one communicator plus what every call needs from it (rank, size, a name for
 * messages, preallocated count scratch). A tess_mesh arranges the ranks of a communicator as a
 * row-major grid with named axes, e.g. {"dp", 2} x {"ep", 2}: mesh rank r has coordinates
 * (r / 2, r % 2), the last axis varies fastest, and each axis is a group (MPI_Comm_split) of the
 * ranks that differ only in that coordinate, ranked by that coordinate. So at 4 ranks the "ep"
 * groups are {0,1} and {2,3}, the "dp" groups {0,2} and {1,3}.
 *
 * The application passes its run communicator; the library never uses MPI_COMM_WORLD. Every
 * communicator created here is a duplicate or a split and has MPI_ERRORS_RETURN, so MPI failures
 * come back as TESS_ERR_MPI with MPI's text instead of aborting. A serial run is a mesh of size 1
 * (every axis of size 1). A group is used by one thread at a time.
 */
#ifndef TESS_PAR_MESH_H
#define TESS_PAR_MESH_H

#include <mpi.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */

enum {
    TESS_MESH_MAX_AXES = 4,
    TESS_GROUP_NAME_MAX = 32, /* bytes of a group or axis name, including the terminating NUL */
    TESS_MESH_REST = 0,       /* axis size meaning "the ranks left over", as in MPI_Dims_create */
};

/* Largest element count passed to one MPI call (2^30): Open MPI 4.1 has no large-count API, so
 * bigger transfers are split (see coll.h). A group starts with this; tests lower it. */
#define TESS_PAR_MAX_COUNT ((int64_t)1 << 30)

typedef struct tess_group {
    MPI_Comm comm;                  /* has MPI_ERRORS_RETURN; freed by whoever owns the group */
    int rank, size;                 /* MPI_Comm_rank and MPI_Comm_size of comm */
    char name[TESS_GROUP_NAME_MAX]; /* for messages and MPI_Comm_set_name, e.g. "ep" */
    int64_t max_count;              /* largest count per MPI call; TESS_PAR_MAX_COUNT */
    int *iscratch;                  /* private: 4*size ints for MPI counts/displacements */
    int64_t *lscratch;              /* private: 4*size int64 for exchanged counts/offsets */
} tess_group;

typedef struct {
    const char *name; /* unique, 1..TESS_GROUP_NAME_MAX-1 bytes */
    int size;         /* >= 1, or TESS_MESH_REST for at most one axis */
} tess_mesh_axis;

typedef struct tess_mesh tess_mesh;

/* A group over a duplicate of comm (so the library's messages never meet the caller's), named
 * `name`. Collective on comm; name the same everywhere. On failure *g is NULL. */
tess_status tess_group_create(MPI_Comm comm, const char *name, tess_group **g);

/* The sub-group of parent's ranks that pass the same color (>= 0), ranked by key then parent
 * rank (MPI_Comm_split). Collective on parent. On failure *g is NULL. */
tess_status tess_group_split(const tess_group *parent, int color, int key, const char *name,
                             tess_group **g);

/* Free the communicator and scratch of a group made by tess_group_create/split; *g = NULL.
 * Collective on the group (MPI_Comm_free). *g may be NULL. Groups owned by a mesh are freed by
 * tess_mesh_destroy, never here. */
void tess_group_destroy(tess_group **g);

/* Test hook: at most n (>= 1, <= TESS_PAR_MAX_COUNT) elements per MPI call, so that the
 * chunked large-count paths run on small buffers. Not collective, but must be the same on every
 * rank of g before its next collective. */
tess_status tess_group_set_max_count(tess_group *g, int64_t n);

/* A mesh over the ranks of group parent (e.g. the run's group rt.world) with `naxes`
 * (1..TESS_MESH_MAX_AXES) named axes. The product of the axis sizes must equal the size of
 * parent; one axis may be TESS_MESH_REST and gets size / (product of the others). Shape errors
 * return TESS_ERR_CONFIG with the numbers, e.g. "mesh dp=3 x ep=2 needs 6 ranks, the
 * communicator has 4". Collective on parent; naxes and axes the same on every rank, so a shape
 * error is reported by all ranks together. parent is only read: the mesh has communicators of
 * its own. On failure *mesh is NULL and nothing is left allocated. */
tess_status tess_mesh_create(const tess_group *parent, int naxes, const tess_mesh_axis *axes,
                             tess_mesh **mesh);

/* Free the mesh and all its communicators; *mesh = NULL. Collective on the mesh's communicator.
 * *mesh may be NULL. */
void tess_mesh_destroy(tess_mesh **mesh);

/* All ranks of the mesh (a duplicate of the parent's communicator, same ranks), named
 * "all". Not collective. Owned by the mesh. */
const tess_group *tess_mesh_all(const tess_mesh *mesh);

/* Number of axes. Not collective. */
int tess_mesh_naxes(const tess_mesh *mesh);

/* The group of axis i (0 <= i < naxes); its rank is this process's coordinate along axis i, its
 * size the axis size. Not collective. Owned by the mesh. */
const tess_group *tess_mesh_axis_group(const tess_mesh *mesh, int i);

/* The group of the axis called `name`, or TESS_ERR_ARG naming the axes that exist.
 * Not collective. *g is owned by the mesh. */
tess_status tess_mesh_group(const tess_mesh *mesh, const char *name, const tess_group **g);

#endif
