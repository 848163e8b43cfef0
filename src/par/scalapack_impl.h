/* scalapack_impl.h - internals shared by scalapack.c and scalapack_ops.c: the BLACS and ScaLAPACK
 * prototypes (Debian ships no C header for them) and the checking helpers.
 *
 * ABI (ScaLAPACK 2.2.1, LP64): integers are 32-bit int. BLACS is called through its C interface
 * (Cblacs_*). PBLAS (p?gemm_) is written in C: arguments by pointer, char* without lengths.
 * ScaLAPACK drivers (descinit_, p?posv_, p?syevd_, p?gesvd_) are gfortran: arguments by pointer
 * plus one hidden size_t length per CHARACTER argument, appended in order. */
#ifndef TESS_PAR_SCALAPACK_IMPL_H
#define TESS_PAR_SCALAPACK_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "par/scalapack.h" /* tess_scal_grid, tess_scal_matrix */

/* Descriptor entries (0-based indices into desc[9]). */
enum {
    SCAL_DTYPE_ = 0, SCAL_CTXT_, SCAL_M_, SCAL_N_, SCAL_MB_, SCAL_NB_, SCAL_RSRC_, SCAL_CSRC_,
    SCAL_LLD_
};

/* BLACS, C interface. */
int Csys2blacs_handle(MPI_Comm comm);
void Cfree_blacs_system_handle(int handle);
void Cblacs_gridinit(int *ctxt, const char *order, int nprow, int npcol);
void Cblacs_gridinfo(int ctxt, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_gridexit(int ctxt);

/* ScaLAPACK tools and drivers (gfortran). */
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb,
               const int *irsrc, const int *icsrc, const int *ictxt, const int *lld, int *info);
void pdposv_(const char *uplo, const int *n, const int *nrhs, double *a, const int *ia,
             const int *ja, const int *desca, double *b, const int *ib, const int *jb,
             const int *descb, int *info, size_t uplo_len);
void psposv_(const char *uplo, const int *n, const int *nrhs, float *a, const int *ia,
             const int *ja, const int *desca, float *b, const int *ib, const int *jb,
             const int *descb, int *info, size_t uplo_len);
void pdsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *ia,
              const int *ja, const int *desca, double *w, double *z, const int *iz,
              const int *jz, const int *descz, double *work, const int *lwork, int *iwork,
              const int *liwork, int *info, size_t jobz_len, size_t uplo_len);
void pssyevd_(const char *jobz, const char *uplo, const int *n, float *a, const int *ia,
              const int *ja, const int *desca, float *w, float *z, const int *iz, const int *jz,
              const int *descz, float *work, const int *lwork, int *iwork, const int *liwork,
              int *info, size_t jobz_len, size_t uplo_len);
void pdgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a,
              const int *ia, const int *ja, const int *desca, double *s, double *u,
              const int *iu, const int *ju, const int *descu, double *vt, const int *ivt,
              const int *jvt, const int *descvt, double *work, const int *lwork, int *info,
              size_t jobu_len, size_t jobvt_len);
void psgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, float *a,
              const int *ia, const int *ja, const int *desca, float *s, float *u, const int *iu,
              const int *ju, const int *descu, float *vt, const int *ivt, const int *jvt,
              const int *descvt, float *work, const int *lwork, int *info, size_t jobu_len,
              size_t jobvt_len);

/* PBLAS (C). */
void pdgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
             const double *alpha, const double *a, const int *ia, const int *ja, const int *desca,
             const double *b, const int *ib, const int *jb, const int *descb, const double *beta,
             double *c, const int *ic, const int *jc, const int *descc);
void psgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
             const float *alpha, const float *a, const int *ia, const int *ja, const int *desca,
             const float *b, const int *ib, const int *jb, const int *descb, const float *beta,
             float *c, const int *ic, const int *jc, const int *descc);

/* Bytes of one element of type t. */
size_t tess_scal_elem_size(tess_scal_dtype t);

/* Check that X is a well-formed matrix of type t on grid g (descriptor consistent with its
 * fields, lld and data on grid ranks); messages name the argument `name`. Local, not agreed. */
tess_status tess_scal_check_matrix(const tess_scal_grid *g, const tess_scal_matrix *X,
                                   tess_scal_dtype t, const char *name);

/* v as an int for ScaLAPACK/MPI, or TESS_ERR_ARG naming `what` if it does not fit. */
tess_status tess_scal_to_int(int64_t v, const char *what, int *out);

#endif
