/* scalapack.c - BLACS grids, block-cyclic matrices and their distribution from / collection to
 * rank 0 (see scalapack.h). The operations are in scalapack_ops.c.
 *
 * Distribution is point-to-point on the grid's private group: rank 0 packs the blocks of
 * one grid rank at a time into a scratch buffer (the largest local part, which is grid rank 0's)
 * and sends it; the receiver takes it straight into its local storage through a strided
 * datatype. Collection is the reverse. Every failure that can happen before a message moves
 * (bad arguments, allocation) is agreed over the group first (tess_par_agree), so no rank
 * waits alone. */
#include "par/scalapack.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mpicheck.h"       /* TESS_MPI_CHECK */
#include "core/status.h"         /* TESS_REQUIRE, TESS_CHECK, tess_error_push */
#include "par/layout.h"         /* tess_par_numroc */
#include "par/coll.h"           /* tess_par_agree */
#include "par/scalapack_impl.h" /* BLACS/ScaLAPACK prototypes */

enum { SCAL_TAG_DISTRIBUTE = 7301, SCAL_TAG_COLLECT = 7302 };

size_t tess_scal_elem_size(tess_scal_dtype t) {
    return t == TESS_SCAL_F32 ? sizeof(float) : sizeof(double);
}

static MPI_Datatype scal_mpi_type(tess_scal_dtype t) {
    return t == TESS_SCAL_F32 ? MPI_FLOAT : MPI_DOUBLE;
}

static const char *scal_dtype_name(tess_scal_dtype t) {
    switch (t) {
    case TESS_SCAL_F64: return "f64";
    case TESS_SCAL_F32: return "f32";
    }
    return "unknown";
}

tess_status tess_scal_to_int(int64_t v, const char *what, int *out) {
    TESS_REQUIRE(v >= INT_MIN && v <= INT_MAX, TESS_ERR_ARG,
                 "%s = %lld does not fit in the 32-bit int ScaLAPACK uses", what, (long long)v);
    *out = (int)v;
    return TESS_OK;
}

void tess_scal_grid_shape(int p, int *nprow, int *npcol) {
    int r = p > 0 ? (int)sqrt((double)p) : 1;
    while ((int64_t)(r + 1) * (r + 1) <= p) r++;
    while (r > 1 && (int64_t)r * r > p) r--;
    while (r > 1 && p % r != 0) r--;
    *nprow = r;
    *npcol = p > 0 ? p / r : 1;
}

/* Resolve a requested shape (0 = choose) for `size` ranks; global arguments only. */
static tess_status scal_resolve_shape(int size, int *nprow, int *npcol) {
    TESS_REQUIRE(*nprow >= 0 && *npcol >= 0, TESS_ERR_ARG,
                 "grid shape must be >= 0 (0 = choose), got nprow %d, npcol %d", *nprow, *npcol);
    if (*nprow == 0 && *npcol == 0) {
        tess_scal_grid_shape(size, nprow, npcol);
    } else if (*nprow == 0) {
        TESS_REQUIRE(*npcol <= size, TESS_ERR_ARG, "npcol %d exceeds the %d ranks of the group",
                     *npcol, size);
        *nprow = size / *npcol;
    } else if (*npcol == 0) {
        TESS_REQUIRE(*nprow <= size, TESS_ERR_ARG, "nprow %d exceeds the %d ranks of the group",
                     *nprow, size);
        *npcol = size / *nprow;
    }
    TESS_REQUIRE((int64_t)*nprow * *npcol <= size, TESS_ERR_ARG,
                 "grid %d x %d needs %lld ranks, the group has %d", *nprow, *npcol,
                 (long long)*nprow * *npcol, size);
    return TESS_OK;
}

/* Every rank must ask for the same shape, or BLACS would build inconsistent grids. */
static tess_status scal_same_shape(const tess_group *on, int nprow, int npcol) {
    int v[4] = {nprow, -nprow, npcol, -npcol};
    TESS_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INT, MPI_MAX, on->comm));
    TESS_REQUIRE(v[0] == -v[1] && v[2] == -v[3], TESS_ERR_ARG,
                 "ranks ask for different grid shapes (nprow %d..%d, npcol %d..%d)", -v[1], v[0],
                 -v[3], v[2]);
    return TESS_OK;
}

/* BLACS context on the grid's group; checks that BLACS placed this rank where scalapack.h says. */
static tess_status scal_grid_blacs(tess_scal_grid *g) {
    int handle = Csys2blacs_handle(g->group->comm);
    int ctxt = handle;
    Cblacs_gridinit(&ctxt, "Row", g->nprow, g->npcol);
    Cfree_blacs_system_handle(handle);
    g->ctxt = g->in_grid ? ctxt : -1;
    TESS_REQUIRE(g->in_grid == (ctxt >= 0), TESS_ERR_INTERNAL,
                 "BLACS context %d for rank %d of a %d x %d grid", ctxt, g->rank, g->nprow,
                 g->npcol);
    if (!g->in_grid) return TESS_OK;
    int r, c;
    Cblacs_gridinfo(g->ctxt, &r, &c, &g->myrow, &g->mycol);
    TESS_REQUIRE(r == g->nprow && c == g->npcol && g->myrow == g->rank / g->npcol &&
                     g->mycol == g->rank % g->npcol,
                 TESS_ERR_INTERNAL, "BLACS put rank %d at (%d,%d) of %d x %d, expected (%d,%d)",
                 g->rank, g->myrow, g->mycol, r, c, g->rank / g->npcol, g->rank % g->npcol);
    return TESS_OK;
}

tess_status tess_scal_grid_create(const tess_group *on, int nprow, int npcol,
                                  tess_scal_grid **out) {
    TESS_REQUIRE(out != NULL, TESS_ERR_ARG, "out is NULL");
    *out = NULL;
    TESS_REQUIRE(on != NULL, TESS_ERR_ARG, "group is NULL");
    const int size = on->size, rank = on->rank;
    TESS_CHECK(scal_same_shape(on, nprow, npcol));
    TESS_CHECK(scal_resolve_shape(size, &nprow, &npcol));

    tess_scal_grid *g = calloc(1, sizeof *g);
    tess_status st = g ? TESS_OK : tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                                    "grid struct (%zu bytes)", sizeof *g);
    st = tess_par_agree(on, st);
    if (st != TESS_OK) {
        free(g);
        return tess_error_push(st, __FILE__, __LINE__, __func__, "BLACS grid %d x %d not created",
                               nprow, npcol);
    }
    *g = (tess_scal_grid){.rank = rank, .size = size, .nprow = nprow, .npcol = npcol,
                          .myrow = -1, .mycol = -1, .in_grid = rank < nprow * npcol, .ctxt = -1};
    st = tess_group_create(on->comm, "scal", &g->group);
    if (st != TESS_OK) {
        tess_scal_grid_destroy(&g);
        return tess_error_push(st, __FILE__, __LINE__, __func__, "BLACS grid %d x %d not created",
                               nprow, npcol);
    }
    /* BLACS derives its communicators from the group's and never checks MPI errors, so they are
     * derived under MPI_ERRORS_ARE_FATAL; only the bridge's own calls return errors. */
    int e = MPI_Comm_set_errhandler(g->group->comm, MPI_ERRORS_ARE_FATAL);
    tess_status blacs = e == MPI_SUCCESS ? scal_grid_blacs(g) : TESS_OK;
    int e2 = MPI_Comm_set_errhandler(g->group->comm, MPI_ERRORS_RETURN);
    if ((e != MPI_SUCCESS || e2 != MPI_SUCCESS) && blacs == TESS_OK) {
        blacs = tess_error_push(TESS_ERR_MPI, __FILE__, __LINE__, __func__,
                                "MPI_Comm_set_errhandler failed (MPI error %d)",
                                e != MPI_SUCCESS ? e : e2);
    }
    st = tess_par_agree(g->group, blacs);
    if (st != TESS_OK) {
        tess_scal_grid_destroy(&g);
        return tess_error_push(st, __FILE__, __LINE__, __func__, "BLACS grid %d x %d not created",
                               nprow, npcol);
    }
    *out = g;
    return TESS_OK;
}

void tess_scal_grid_destroy(tess_scal_grid **pg) {
    if (!pg || !*pg) return;
    tess_scal_grid *g = *pg;
    if (g->ctxt >= 0) Cblacs_gridexit(g->ctxt);
    tess_group_destroy(&g->group);
    free(g);
    *pg = NULL;
}

/* Fill A's fields and descriptor and attach storage (allocated when own, else `local`).
 * Local decision; the caller agrees on it. */
static tess_status scal_matrix_setup(tess_scal_matrix *A, const tess_scal_grid *g,
                                     tess_scal_dtype t, int64_t m, int64_t n, int64_t mb,
                                     int64_t nb, void *local, int64_t lld, bool own) {
    TESS_REQUIRE(t == TESS_SCAL_F64 || t == TESS_SCAL_F32, TESS_ERR_ARG,
                 "element type %d is neither TESS_SCAL_F64 nor TESS_SCAL_F32", (int)t);
    TESS_REQUIRE(m >= 0 && n >= 0, TESS_ERR_ARG, "global shape must be >= 0, got m %lld, n %lld",
                 (long long)m, (long long)n);
    TESS_REQUIRE(mb >= 1 && nb >= 1, TESS_ERR_ARG, "block shape must be >= 1, got mb %lld, nb %lld",
                 (long long)mb, (long long)nb);
    int im = 0, in = 0, imb = 0, inb = 0, illd = 0, zero = 0, info = 0;
    TESS_CHECK(tess_scal_to_int(m, "m", &im));
    TESS_CHECK(tess_scal_to_int(n, "n", &in));
    TESS_CHECK(tess_scal_to_int(mb, "mb", &imb));
    TESS_CHECK(tess_scal_to_int(nb, "nb", &inb));
    *A = (tess_scal_matrix){.grid = g, .dtype = t, .m = m, .n = n, .mb = mb, .nb = nb, .lld = 1,
                            .desc = {1, -1, im, in, imb, inb, 0, 0, 1}};
    if (!g->in_grid) return TESS_OK;
    A->mloc = tess_par_numroc(m, mb, g->myrow, g->nprow);
    A->nloc = tess_par_numroc(n, nb, g->mycol, g->npcol);
    int64_t min_lld = A->mloc > 1 ? A->mloc : 1;
    if (own) {
        lld = min_lld;
    } else {
        TESS_REQUIRE(local != NULL, TESS_ERR_ARG, "local storage is NULL on grid rank (%d,%d)",
                     g->myrow, g->mycol);
        TESS_REQUIRE(lld >= min_lld, TESS_ERR_ARG,
                     "lld = %lld < max(1, local rows %lld) on grid rank (%d,%d)", (long long)lld,
                     (long long)A->mloc, g->myrow, g->mycol);
    }
    TESS_CHECK(tess_scal_to_int(lld, "lld", &illd));
    A->lld = lld;
    if (own) {
        size_t es = tess_scal_elem_size(t);
        size_t count = A->nloc > 0 ? (size_t)lld * (size_t)A->nloc : 1;
        TESS_REQUIRE(count <= SIZE_MAX / es, TESS_ERR_MEM,
                     "local part %lld x %lld overflows size_t", (long long)lld, (long long)A->nloc);
        local = calloc(count, es);
        TESS_REQUIRE(local != NULL, TESS_ERR_MEM, "local part %lld x %lld (%zu bytes)",
                     (long long)A->mloc, (long long)A->nloc, count * es);
        A->owns_data = true;
    }
    A->data = local;
    descinit_(A->desc, &im, &in, &imb, &inb, &zero, &zero, &g->ctxt, &illd, &info);
    TESS_REQUIRE(info == 0, TESS_ERR_ARG,
                 "descinit rejected argument %d (m %d n %d mb %d nb %d lld %d)", -info, im, in, imb,
                 inb, illd);
    return TESS_OK;
}

static tess_status scal_matrix_new(const tess_scal_grid *g, tess_scal_dtype t, int64_t m,
                                   int64_t n, int64_t mb, int64_t nb, void *local, int64_t lld,
                                   bool own, tess_scal_matrix **out) {
    TESS_REQUIRE(out != NULL, TESS_ERR_ARG, "out is NULL");
    *out = NULL;
    TESS_REQUIRE(g != NULL, TESS_ERR_ARG, "grid is NULL");
    tess_scal_matrix *A = calloc(1, sizeof *A);
    tess_status st = A ? scal_matrix_setup(A, g, t, m, n, mb, nb, local, lld, own)
                       : tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                         "matrix struct (%zu bytes)", sizeof *A);
    st = tess_par_agree(g->group, st);
    if (st != TESS_OK) {
        tess_scal_matrix_destroy(&A);
        return tess_error_push(st, __FILE__, __LINE__, __func__,
                               "%lld x %lld matrix in %lld x %lld blocks not created",
                               (long long)m, (long long)n, (long long)mb, (long long)nb);
    }
    *out = A;
    return TESS_OK;
}

tess_status tess_scal_matrix_create(const tess_scal_grid *g, tess_scal_dtype t, int64_t m,
                                    int64_t n, int64_t mb, int64_t nb, tess_scal_matrix **out) {
    TESS_CHECK(scal_matrix_new(g, t, m, n, mb, nb, NULL, 0, true, out));
    return TESS_OK;
}

tess_status tess_scal_matrix_wrap(const tess_scal_grid *g, tess_scal_dtype t, int64_t m, int64_t n,
                                  int64_t mb, int64_t nb, void *local, int64_t lld,
                                  tess_scal_matrix **out) {
    TESS_CHECK(scal_matrix_new(g, t, m, n, mb, nb, local, lld, false, out));
    return TESS_OK;
}

void tess_scal_matrix_destroy(tess_scal_matrix **pA) {
    if (!pA || !*pA) return;
    if ((*pA)->owns_data) free((*pA)->data);
    free(*pA);
    *pA = NULL;
}

void tess_scal_local_to_global(const tess_scal_matrix *A, int64_t li, int64_t lj, int64_t *i,
                               int64_t *j) {
    const tess_scal_grid *g = A->grid;
    *i = ((li / A->mb) * g->nprow + g->myrow) * A->mb + li % A->mb;
    *j = ((lj / A->nb) * g->npcol + g->mycol) * A->nb + lj % A->nb;
}

tess_status tess_scal_check_matrix(const tess_scal_grid *g, const tess_scal_matrix *X,
                                   tess_scal_dtype t, const char *name) {
    TESS_REQUIRE(X != NULL, TESS_ERR_ARG, "%s is NULL", name);
    TESS_REQUIRE(X->grid == g, TESS_ERR_ARG, "%s lives on a different grid", name);
    TESS_REQUIRE(X->dtype == t, TESS_ERR_ARG, "%s has element type %s, expected %s", name,
                 scal_dtype_name(X->dtype), scal_dtype_name(t));
    const int *d = X->desc;
    TESS_REQUIRE(d[SCAL_DTYPE_] == 1, TESS_ERR_ARG,
                 "%s: descriptor type %d, expected 1 (dense block-cyclic)", name, d[SCAL_DTYPE_]);
    TESS_REQUIRE(d[SCAL_CTXT_] == g->ctxt, TESS_ERR_ARG,
                 "%s: descriptor context %d is not the grid's %d", name, d[SCAL_CTXT_], g->ctxt);
    TESS_REQUIRE(d[SCAL_M_] >= 0 && d[SCAL_N_] >= 0 && d[SCAL_M_] == X->m && d[SCAL_N_] == X->n,
                 TESS_ERR_ARG, "%s: descriptor shape %d x %d, matrix is %lld x %lld", name,
                 d[SCAL_M_], d[SCAL_N_], (long long)X->m, (long long)X->n);
    TESS_REQUIRE(d[SCAL_MB_] >= 1 && d[SCAL_NB_] >= 1 && d[SCAL_MB_] == X->mb &&
                     d[SCAL_NB_] == X->nb,
                 TESS_ERR_ARG, "%s: descriptor blocks %d x %d, matrix has %lld x %lld", name,
                 d[SCAL_MB_], d[SCAL_NB_], (long long)X->mb, (long long)X->nb);
    TESS_REQUIRE(d[SCAL_RSRC_] == 0 && d[SCAL_CSRC_] == 0, TESS_ERR_ARG,
                 "%s: descriptor source process (%d,%d), the bridge uses (0,0)", name,
                 d[SCAL_RSRC_], d[SCAL_CSRC_]);
    if (!g->in_grid) return TESS_OK;
    int64_t mloc = tess_par_numroc(X->m, X->mb, g->myrow, g->nprow);
    int64_t nloc = tess_par_numroc(X->n, X->nb, g->mycol, g->npcol);
    TESS_REQUIRE(X->mloc == mloc && X->nloc == nloc, TESS_ERR_ARG,
                 "%s: local shape %lld x %lld, grid rank (%d,%d) owns %lld x %lld", name,
                 (long long)X->mloc, (long long)X->nloc, g->myrow, g->mycol, (long long)mloc,
                 (long long)nloc);
    TESS_REQUIRE(d[SCAL_LLD_] >= (mloc > 1 ? mloc : 1) && d[SCAL_LLD_] == X->lld, TESS_ERR_ARG,
                 "%s: descriptor lld = %d, needs max(1, local rows %lld) and the matrix's lld %lld",
                 name, d[SCAL_LLD_], (long long)mloc, (long long)X->lld);
    TESS_REQUIRE(X->data != NULL, TESS_ERR_ARG, "%s: no local storage on grid rank (%d,%d)", name,
                 g->myrow, g->mycol);
    return TESS_OK;
}

static void scal_copy_elem(char *dst, const char *src, size_t es) {
    if (es == sizeof(double)) memcpy(dst, src, sizeof(double));
    else memcpy(dst, src, sizeof(float));
}

/* Copy between a global matrix (order) and the local part of grid process (pr, pc), held
 * column-major in `local` with leading dimension ld: from gin into local when gin is given,
 * else from local into gout. Block by block: a local block-column segment of up to mb rows is
 * one global run in column-major order, a strided one in row-major order. */
static void scal_copy_blocks(const tess_scal_matrix *A, int pr, int pc, char *local, int64_t ld,
                             const char *gin, char *gout, tess_scal_order order) {
    const tess_scal_grid *grid = A->grid;
    size_t es = tess_scal_elem_size(A->dtype);
    int64_t mloc = tess_par_numroc(A->m, A->mb, pr, grid->nprow);
    int64_t nloc = tess_par_numroc(A->n, A->nb, pc, grid->npcol);
    for (int64_t lj = 0; lj < nloc; lj++) {
        int64_t j = ((lj / A->nb) * grid->npcol + pc) * A->nb + lj % A->nb;
        for (int64_t li0 = 0; li0 < mloc; li0 += A->mb) {
            int64_t i0 = ((li0 / A->mb) * grid->nprow + pr) * A->mb;
            int64_t cnt = mloc - li0 < A->mb ? mloc - li0 : A->mb;
            char *l = local + (size_t)(li0 + lj * ld) * es;
            if (order == TESS_SCAL_COL_MAJOR) {
                size_t off = (size_t)(i0 + j * A->m) * es;
                if (gin) memcpy(l, gin + off, (size_t)cnt * es);
                else memcpy(gout + off, l, (size_t)cnt * es);
                continue;
            }
            for (int64_t r = 0; r < cnt; r++) {
                size_t off = (size_t)((i0 + r) * A->n + j) * es;
                if (gin) scal_copy_elem(l + (size_t)r * es, gin + off, es);
                else scal_copy_elem(gout + off, l + (size_t)r * es, es);
            }
        }
    }
}

/* Shared checks of distribute/collect; rank 0 also gets a scratch buffer for the largest
 * remote part. Local decision. */
static tess_status scal_redist_prepare(const tess_scal_matrix *A, const void *global,
                                       tess_scal_order order, void **scratch) {
    const tess_scal_grid *g = A->grid;
    TESS_CHECK(tess_scal_check_matrix(g, A, A->dtype, "A"));
    TESS_REQUIRE(order == TESS_SCAL_ROW_MAJOR || order == TESS_SCAL_COL_MAJOR, TESS_ERR_ARG,
                 "order %d is neither TESS_SCAL_ROW_MAJOR nor TESS_SCAL_COL_MAJOR", (int)order);
    if (g->rank != 0) return TESS_OK;
    TESS_REQUIRE(global != NULL || A->m * A->n == 0, TESS_ERR_ARG,
                 "global matrix is NULL on rank 0 (%lld x %lld)", (long long)A->m,
                 (long long)A->n);
    if (g->nprow * g->npcol == 1) return TESS_OK;
    /* Grid process (0,0) owns the most rows and columns. */
    size_t es = tess_scal_elem_size(A->dtype);
    size_t count = (size_t)A->mloc * (size_t)A->nloc;
    *scratch = malloc(count > 0 ? count * es : 1);
    TESS_REQUIRE(*scratch != NULL, TESS_ERR_MEM, "scratch for %lld x %lld local part (%zu bytes)",
                 (long long)A->mloc, (long long)A->nloc, count * es);
    return TESS_OK;
}

/* Datatype of a (rows, cols) column-major part with leading dimension ld. */
static tess_status scal_part_type(tess_scal_dtype t, int64_t rows, int64_t cols, int64_t ld,
                                  MPI_Datatype *type) {
    int r = 0, c = 0, l = 0;
    TESS_CHECK(tess_scal_to_int(rows, "local rows", &r));
    TESS_CHECK(tess_scal_to_int(cols, "local cols", &c));
    TESS_CHECK(tess_scal_to_int(ld, "lld", &l));
    TESS_MPI_CHECK(MPI_Type_vector(c, r, l, scal_mpi_type(t), type));
    TESS_MPI_CHECK(MPI_Type_commit(type));
    return TESS_OK;
}

static tess_status scal_send_part(const tess_scal_matrix *A, const void *buf, int64_t rows,
                                  int64_t cols, int64_t ld, int dest, int tag) {
    MPI_Datatype type;
    TESS_CHECK(scal_part_type(A->dtype, rows, cols, ld, &type));
    int e = MPI_Send(buf, 1, type, dest, tag, A->grid->group->comm);
    MPI_Type_free(&type);
    TESS_MPI_CHECK(e);
    return TESS_OK;
}

static tess_status scal_recv_part(const tess_scal_matrix *A, void *buf, int64_t rows,
                                  int64_t cols, int64_t ld, int src, int tag) {
    MPI_Datatype type;
    TESS_CHECK(scal_part_type(A->dtype, rows, cols, ld, &type));
    int e = MPI_Recv(buf, 1, type, src, tag, A->grid->group->comm, MPI_STATUS_IGNORE);
    MPI_Type_free(&type);
    TESS_MPI_CHECK(e);
    return TESS_OK;
}

static tess_status scal_distribute_root(tess_scal_matrix *A, const void *global,
                                        tess_scal_order order, void *scratch) {
    const tess_scal_grid *g = A->grid;
    scal_copy_blocks(A, 0, 0, A->data, A->lld, global, NULL, order);
    for (int r = 1; r < g->nprow * g->npcol; r++) {
        int pr = r / g->npcol, pc = r % g->npcol;
        int64_t rows = tess_par_numroc(A->m, A->mb, pr, g->nprow);
        int64_t cols = tess_par_numroc(A->n, A->nb, pc, g->npcol);
        if (rows * cols == 0) continue;
        scal_copy_blocks(A, pr, pc, scratch, rows, global, NULL, order);
        TESS_CHECK(scal_send_part(A, scratch, rows, cols, rows, r, SCAL_TAG_DISTRIBUTE));
    }
    return TESS_OK;
}

tess_status tess_scal_matrix_distribute(tess_scal_matrix *A, const void *global,
                                        tess_scal_order order) {
    TESS_REQUIRE(A != NULL && A->grid != NULL, TESS_ERR_ARG, "A is NULL");
    const tess_scal_grid *g = A->grid;
    void *scratch = NULL;
    tess_status st = tess_par_agree(g->group, scal_redist_prepare(A, global, order, &scratch));
    if (st == TESS_OK && g->rank == 0) {
        st = scal_distribute_root(A, global, order, scratch);
    } else if (st == TESS_OK && g->in_grid && A->mloc * A->nloc > 0) {
        st = scal_recv_part(A, A->data, A->mloc, A->nloc, A->lld, 0, SCAL_TAG_DISTRIBUTE);
    }
    free(scratch);
    TESS_REQUIRE(st == TESS_OK, st, "%lld x %lld matrix not distributed from rank 0",
                 (long long)A->m, (long long)A->n);
    return TESS_OK;
}

static tess_status scal_collect_root(const tess_scal_matrix *A, void *global,
                                     tess_scal_order order, void *scratch) {
    const tess_scal_grid *g = A->grid;
    scal_copy_blocks(A, 0, 0, A->data, A->lld, NULL, global, order);
    for (int r = 1; r < g->nprow * g->npcol; r++) {
        int pr = r / g->npcol, pc = r % g->npcol;
        int64_t rows = tess_par_numroc(A->m, A->mb, pr, g->nprow);
        int64_t cols = tess_par_numroc(A->n, A->nb, pc, g->npcol);
        if (rows * cols == 0) continue;
        TESS_CHECK(scal_recv_part(A, scratch, rows, cols, rows, r, SCAL_TAG_COLLECT));
        scal_copy_blocks(A, pr, pc, scratch, rows, NULL, global, order);
    }
    return TESS_OK;
}

tess_status tess_scal_matrix_collect(const tess_scal_matrix *A, void *global,
                                     tess_scal_order order) {
    TESS_REQUIRE(A != NULL && A->grid != NULL, TESS_ERR_ARG, "A is NULL");
    const tess_scal_grid *g = A->grid;
    void *scratch = NULL;
    tess_status st = tess_par_agree(g->group, scal_redist_prepare(A, global, order, &scratch));
    if (st == TESS_OK && g->rank == 0) {
        st = scal_collect_root(A, global, order, scratch);
    } else if (st == TESS_OK && g->in_grid && A->mloc * A->nloc > 0) {
        st = scal_send_part(A, A->data, A->mloc, A->nloc, A->lld, 0, SCAL_TAG_COLLECT);
    }
    free(scratch);
    TESS_REQUIRE(st == TESS_OK, st, "%lld x %lld matrix not collected on rank 0",
                 (long long)A->m, (long long)A->n);
    return TESS_OK;
}
