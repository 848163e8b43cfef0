/* test_h5 - the HDF5 helpers of io/h5.h. Rank 0 writes a file with the attribute writers and a
 * fixed-length string written by HDF5 directly; then every rank opens it collectively with
 * tess_h5_open_collective on a group and checks: typed attribute round trips (int64 and uint64
 * beyond 2^53, a double, UTF-8 text), refusals (missing attribute, wrong type class, more than one
 * value), strings cut to the buffer, tess_h5_attr_info, path checks through missing groups, type
 * names, shape text, the tess_dtype mappings, the options of tess_h5_fapl_mpio, and the innermost
 * HDF5 reason of a failed open with error printing silenced. */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "core/runtime.h" /* tess_runtime_* */
#include "io/h5.h"        /* tess_h5_* */
#include "par/mesh.h"     /* tess_group_create, tess_group_destroy */
#include "tess_test.h"

static const char *text = "h\xc3\xa9llo, w\xc3\xb6rld"; /* UTF-8 */
static const int64_t big_i = -((int64_t)1 << 60) - 7;
static const uint64_t big_u = ((uint64_t)1 << 63) + 12345;

/* Rank 0 only: attributes on the root and on /a/b, a 2-value attribute and a dataset /a/b/d. */
static int write_file(const char *path) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) return -1;
    int rc = tess_h5_attr_write_str(f, "text", text) | tess_h5_attr_write_i64(f, "i", big_i) |
             tess_h5_attr_write_u64(f, "u", big_u) | tess_h5_attr_write_double(f, "x", -2.5);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t g = H5Gcreate2(f, "/a/b", lcpl, H5P_DEFAULT, H5P_DEFAULT);
    rc |= g < 0 ? -1 : tess_h5_attr_write_i64(g, "n", 3);
    /* a fixed-length ASCII string of 6 bytes and a 2-value int attribute */
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 6);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(g, "fixed", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    rc |= a < 0 || H5Awrite(a, t, "abcdef") < 0 ? -1 : 0;
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    hsize_t two = 2;
    int64_t pair[2] = {1, 2};
    sp = H5Screate_simple(1, &two, NULL);
    a = H5Acreate2(g, "pair", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    rc |= a < 0 || H5Awrite(a, H5T_NATIVE_INT64, pair) < 0 ? -1 : 0;
    H5Aclose(a);
    hid_t d = H5Dcreate2(g, "d", tess_h5_dtype_file(TESS_F32), sp, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    rc |= d < 0 ? -1 : 0;
    H5Dclose(d);
    H5Sclose(sp);
    H5Gclose(g);
    H5Pclose(lcpl);
    if (H5Fclose(f) < 0) rc = -1;
    return rc;
}

static void check_attributes(hid_t f) {
    char buf[64];
    int64_t i = 0;
    uint64_t u = 0;
    double x = 0;
    TESS_TEST_CHECK(tess_h5_attr_read_str(f, "text", buf, sizeof buf) == 0 &&
                        strcmp(buf, text) == 0,
                    "text: '%s'", buf);
    TESS_TEST_CHECK(tess_h5_attr_read_str(f, "text", buf, 3) == 0 && strcmp(buf, "h\xc3") == 0,
                    "text cut to 2 bytes: '%s'", buf);
    TESS_TEST_CHECK(tess_h5_attr_read_i64(f, "i", &i) == 0 && i == big_i, "i: %lld",
                    (long long)i);
    TESS_TEST_CHECK(tess_h5_attr_read_u64(f, "u", &u) == 0 && u == big_u, "u: %llu",
                    (unsigned long long)u);
    TESS_TEST_CHECK(tess_h5_attr_read_double(f, "x", &x) == 0 && x == -2.5, "x: %g", x);
    /* refusals: missing, wrong class, more than one value */
    TESS_TEST_CHECK(tess_h5_attr_read_i64(f, "nope", &i) == -1, "missing attribute read");
    TESS_TEST_CHECK(tess_h5_attr_read_i64(f, "text", &i) == -1, "string read as int64");
    TESS_TEST_CHECK(tess_h5_attr_read_double(f, "i", &x) == -1, "int64 read as double");
    TESS_TEST_CHECK(tess_h5_attr_read_str(f, "x", buf, sizeof buf) == -1, "double read as text");
    TESS_TEST_CHECK(tess_h5_attr_exists(f, "u") && !tess_h5_attr_exists(f, "nope"), "exists");

    hid_t g = H5Gopen2(f, "/a/b", H5P_DEFAULT);
    TESS_TEST_CHECK(g >= 0, "open /a/b");
    TESS_TEST_CHECK(tess_h5_attr_read_i64(g, "n", &i) == 0 && i == 3, "n: %lld", (long long)i);
    TESS_TEST_CHECK(tess_h5_attr_read_str(g, "fixed", buf, sizeof buf) == 0 &&
                        strcmp(buf, "abcdef") == 0,
                    "fixed-length: '%s'", buf);
    TESS_TEST_CHECK(tess_h5_attr_read_i64(g, "pair", &i) == -1, "2 values read as one");
    H5T_class_t c = H5T_NO_CLASS;
    char tname[32] = "";
    int64_t np = 0;
    TESS_TEST_CHECK(tess_h5_attr_info(g, "pair", &c, tname, sizeof tname, &np) == 0 &&
                        c == H5T_INTEGER && strcmp(tname, "int64") == 0 && np == 2,
                    "info of pair: class %d, %s, %lld values", (int)c, tname, (long long)np);
    TESS_TEST_CHECK(tess_h5_attr_info(g, "nope", &c, tname, sizeof tname, &np) == -1,
                    "info of a missing attribute");
    H5Gclose(g);
}

static void check_paths(hid_t f) {
    TESS_TEST_CHECK(tess_h5_path_exists(f, "/a/b/d"), "/a/b/d");
    TESS_TEST_CHECK(tess_h5_path_exists(f, "/a"), "/a");
    TESS_TEST_CHECK(!tess_h5_path_exists(f, "/a/x/y/z"), "missing intermediate group");
    TESS_TEST_CHECK(!tess_h5_path_exists(f, "/a/b/e"), "missing leaf");
    TESS_TEST_CHECK(!tess_h5_path_exists(f, ""), "empty path");
    char longp[TESS_H5_PATH_MAX + 2];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    TESS_TEST_CHECK(!tess_h5_path_exists(f, longp), "path longer than TESS_H5_PATH_MAX");
}

static void check_names(void) {
    char buf[64];
    const struct {
        hid_t t;
        const char *name;
    } types[] = {{H5T_STD_U8LE, "uint8"},      {H5T_STD_I64LE, "int64"},
                 {H5T_IEEE_F32LE, "float32"},  {H5T_NATIVE_DOUBLE, "float64"},
                 {H5T_C_S1, "string"}};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        tess_h5_type_name(types[k].t, buf, sizeof buf);
        TESS_TEST_CHECK(strcmp(buf, types[k].name) == 0, "type name %s: %s", types[k].name, buf);
    }
    hid_t e = H5Tenum_create(H5T_NATIVE_INT);
    tess_h5_type_name(e, buf, sizeof buf);
    TESS_TEST_CHECK(strcmp(buf, "enum") == 0, "enum: %s", buf);
    H5Tclose(e);
    int64_t dims[3] = {3, -1, 40};
    tess_h5_shape_text(buf, sizeof buf, 3, dims, ", ");
    TESS_TEST_CHECK(strcmp(buf, "[3, *, 40]") == 0, "shape: %s", buf);
    tess_h5_shape_text(buf, sizeof buf, 2, (const int64_t[]){11, 6}, ",");
    TESS_TEST_CHECK(strcmp(buf, "[11,6]") == 0, "shape: %s", buf);
    tess_h5_shape_text(buf, sizeof buf, 0, dims, ",");
    TESS_TEST_CHECK(strcmp(buf, "[]") == 0, "scalar shape: %s", buf);
    tess_h5_shape_text(buf, 5, 3, dims, ", ");
    TESS_TEST_CHECK(strcmp(buf, "[3, ") == 0, "shape cut to 4 bytes: %s", buf);

    const tess_dtype dt[3] = {TESS_F32, TESS_F64, TESS_I64};
    const char *names[3] = {"float32", "float64", "int64"};
    for (int k = 0; k < 3; k++) {
        TESS_TEST_CHECK(strcmp(tess_h5_dtype_name(dt[k]), names[k]) == 0, "dtype name %d", k);
        tess_h5_type_name(tess_h5_dtype_file(dt[k]), buf, sizeof buf);
        TESS_TEST_CHECK(strcmp(buf, names[k]) == 0, "file type of %s: %s", names[k], buf);
        TESS_TEST_CHECK(H5Tget_order(tess_h5_dtype_file(dt[k])) == H5T_ORDER_LE,
                        "file type of %s is little-endian", names[k]);
        hid_t mem = tess_h5_dtype_mem(dt[k]);
        TESS_TEST_CHECK(H5Tget_order(mem) == H5Tget_order(H5T_NATIVE_INT) &&
                            H5Tget_size(mem) == tess_dtype_size(dt[k]) &&
                            H5Tget_class(mem) == H5Tget_class(tess_h5_dtype_file(dt[k])),
                        "memory type of %s", names[k]);
    }
}

static void check_fapl(const tess_group *g) {
    hid_t p = tess_h5_fapl_mpio(g, TESS_H5_COLL_METADATA | TESS_H5_FORMAT_V18 | TESS_H5_NO_LOCKING);
    TESS_TEST_CHECK(p >= 0, "fapl with every option");
    H5F_libver_t lo = H5F_LIBVER_LATEST, hi = H5F_LIBVER_LATEST;
    hbool_t coll = 0, lock = 1, ignore = 0;
    H5Pget_libver_bounds(p, &lo, &hi);
    H5Pget_all_coll_metadata_ops(p, &coll);
    H5Pget_file_locking(p, &lock, &ignore);
    TESS_TEST_CHECK(H5Pget_driver(p) == H5FD_MPIO && lo == H5F_LIBVER_V18 &&
                        hi == H5F_LIBVER_V18 && coll && !lock,
                    "options: bounds %d..%d, collective %d, locking %d", (int)lo, (int)hi,
                    (int)coll, (int)lock);
    H5Pclose(p);
    p = tess_h5_fapl_mpio(g, 0);
    coll = 1;
    H5Pget_all_coll_metadata_ops(p, &coll);
    H5Pget_libver_bounds(p, &lo, &hi);
    TESS_TEST_CHECK(p >= 0 && H5Pget_driver(p) == H5FD_MPIO && !coll && lo == H5F_LIBVER_EARLIEST,
                    "fapl without options: collective %d, low bound %d", (int)coll, (int)lo);
    H5Pclose(p);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    if (tess_runtime_start(&rt, MPI_COMM_WORLD) != TESS_OK) return 1;
    tess_group *g = NULL;
    if (tess_group_create(rt.comm, "test", &g) != TESS_OK) return 1;

    int ok = g->rank != 0 || write_file("h5.h5") == 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, g->comm);
    TESS_TEST_CHECK(ok, "writing h5.h5");

    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    hid_t f = tess_h5_open_collective(g, "h5.h5", TESS_H5_COLL_METADATA | TESS_H5_NO_LOCKING);
    TESS_TEST_CHECK(f >= 0, "collective open");
    if (f >= 0) {
        check_attributes(f);
        check_paths(f);
        TESS_TEST_CHECK(H5Fclose(f) >= 0, "close");
    }
    check_names();
    check_fapl(g);

    /* a file that is not HDF5: the open fails and the reason, read right after H5Fopen (every
     * API call clears the stack), is HDF5's innermost message */
    if (g->rank == 0) {
        FILE *junk = fopen("junk.h5", "w");
        fputs("not an HDF5 file\n", junk);
        fclose(junk);
    }
    MPI_Barrier(g->comm);
    char why[256] = "";
    hid_t fapl = tess_h5_fapl_mpio(g, TESS_H5_NO_LOCKING);
    f = H5Fopen("junk.h5", H5F_ACC_RDONLY, fapl);
    tess_h5_reason(why, sizeof why);
    H5Pclose(fapl);
    TESS_TEST_CHECK(f < 0, "junk opened");
    if (f >= 0) H5Fclose(f);
    TESS_TEST_CHECK(tess_h5_open_collective(g, "junk.h5", 0) < 0, "junk opened collectively");
    H5Eclear2(H5E_DEFAULT);
    char none[64] = "";
    tess_h5_reason(none, sizeof none);
    tess_h5_quiet_end(&q);
    TESS_TEST_CHECK(strstr(why, "signature") != NULL || strstr(why, "unable to open") != NULL,
                    "reason of the failed open: '%s'", why);
    TESS_TEST_CHECK(strcmp(none, "no HDF5 detail") == 0, "empty stack: '%s'", none);
    H5E_auto2_t fn = NULL;
    void *data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &fn, &data);
    TESS_TEST_CHECK(fn != NULL, "error printing restored by tess_h5_quiet_end");

    int rc = tess_test_finish_mpi("test_h5", g->comm);
    tess_group_destroy(&g);
    tess_runtime_finish(&rt, TESS_OK, true);
    return rc;
}
