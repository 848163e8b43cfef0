/* gradcheck.c - THE gradient-check harness of Tessera (as ggml's test-backend-ops): one table, one row
 * per layer. Every layer with a hand-written backward must have a row here.
 *
 * ---------------------------------------------------------------------------------------------
 * WHAT A ROW IS (gc_row, below)
 *   name         unique; also keys the random stream, so rows can be appended in any order
 *   dims[8]      small shapes; their meaning is the row's own (say it in a comment on the row)
 *   setup        declares every buffer the layer touches (see "buffers"), drawing values
 *   forward      runs the fast forward: reads gc_x() of inputs, writes gc_x() of outputs/caches
 *   backward     runs the backward: gradients gc_g(c, "in") etc., dout = gc_g(c, "out")
 *   forward_ref  optional (NULL): the _ref forward, writing the same output buffers
 *   backward_ref optional (NULL): the _ref backward, into the same gradient buffers
 *   tol          max normalised finite-difference error per gradient (0: GC_TOL_DEFAULT)
 *   kinks        true if the op is not differentiable everywhere (ReLU, top-k, max): draw points
 *                away from kinks in setup; FD components whose one-sided slopes disagree
 *                (straddling a kink) are then skipped, at most GC_KINK_SKIP_MAX of each gradient
 *   teardown     optional (NULL): frees objects setup made (a registry, blocks) after the row
 *   torch        optional (NULL): name of a PyTorch reference file tests/data/nn_refs/<torch>.txt
 *                (gen_*.py there). Its "dims" must equal the row's first dims; see CHECK 0.
 *
 * BUFFERS (declare in setup; look up by name in the other callbacks; the harness owns them)
 *   gc_input(c, name, n, lo, hi)   differentiable input or parameter, uniform in [lo, hi);
 *                                  has a gradient gc_g(c, name), zeroed before each backward
 *   gc_const(c, name, n, lo, hi)   float input that is not differentiated (e.g. a target)
 *   gc_ids(c, name, n, lo, hi)     int32 input, uniform in [lo, hi]; read with gc_i(c, name)
 *   gc_output(c, name, n)          forward output; gc_g(c, name) is its dout = r, uniform [-1,1)
 *                                  (a scalar loss is an output of n = 1: store it in gc_x(...)[0]
 *                                  and pass gc_g(...)[0] as dloss)
 *   gc_cache(c, name, n)           written by forward, read by backward (rstd, probs, ...)
 *   gc_work(c, name, n)            scratch of backward, zeroed before every backward call
 * Every declaration returns the value pointer, so setup may post-process draws (e.g. set a
 * target to -1, push points away from a kink). gc_has(c, name) tells whether a name exists.
 *
 * WHAT IS CHECKED, per row
 *   0. with a torch file: every input, constant and id buffer takes the file's section of the
 *      same name, and the dout of each output X its section "dX"; then forward (and forward_ref)
 *      must give every output and cache that has a section, and backward (and backward_ref)
 *      every gradient of an input X that has a section "dX", element by element within
 *      TESS_REF_ATOL + TESS_REF_RTOL |want| (tests/tess_ref.h). Every section must be used
 *      ("eps" must equal GC_NORM_EPS). The checks below then run on the file's values.
 *   1. forward vs forward_ref (if given): normalised error of every output <= GC_TOL_REF;
 *   2. backward accumulates: a second call adds the same again (g2 = 2 g1, error <= GC_TOL_ACC);
 *   3. backward vs backward_ref (if given): every gradient within GC_TOL_REF;
 *   4. with L(x) = sum over outputs of <r, forward(x)> accumulated in double, every element of
 *      every gc_input is perturbed by +-GC_STEP and the central difference is compared with the
 *      backward gradient by ||g - g_fd|| / max(||g||, ||g_fd||, GC_TINY) <= tol.
 *
 * ADDING A ROW: write <layer>_setup/_forward/_backward (and _ref ones if the layer has them)
 * next to the existing ones, include the layer's header, and append one line to gc_rows[]; for
 * PyTorch values, generate a file with the buffers' names and add a row with .torch set.
 * The reference files' directory is argv[1].
 * Run one row with: gradcheck <refs dir> <name>. Draw inputs of order 1 (the step and tolerances assume it).
 * ---------------------------------------------------------------------------------------------
 *
 * Randomness: Philox4x32-10 (Random123) keyed by (GC_SEED, hash of the row name) with the counter
 * (buffer index, element / 4): every value names what it is, independent of row order. */
#include <Random123/philox.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"      /* tess_rng_* (the MoE router jitter) */
#include "nn/activation.h" /* tess_nn_gelu_*, tess_nn_silu_* */
#include "nn/attention.h"  /* tess_nn_attention_* */
#include "nn/block.h"      /* tess_nn_block_* */
#include "nn/codebook.h"   /* tess_nn_l2norm_*, tess_nn_codebook_* */
#include "nn/conv1d.h"     /* tess_nn_conv1d_*, tess_nn_convt1d_* */
#include "nn/embedding.h"  /* tess_nn_embedding_* */
#include "nn/graph.h"      /* tess_graph_batch_*, tess_nn_gin_*, tess_nn_gcn_tanh_*, tess_nn_relu_dropout_* */
#include "nn/kalter.h"     /* tess_nn_kalter_* */
#include "nn/linear.h"     /* tess_nn_linear_* */
#include "nn/loss.h"       /* tess_nn_crossentropy_*, tess_nn_mse_* */
#include "nn/mlp.h"        /* tess_nn_mlp_* */
#include "nn/moe.h"        /* tess_nn_moe_* */
#include "nn/norm.h"       /* tess_nn_rmsnorm_*, tess_nn_layernorm_* */
#include "nn/pool.h"       /* tess_nn_attnpool_*, tess_nn_meanpool_* */
#include "tensor/sparse.h" /* tess_csr_spmm*, tess_segment_sum* */
#include "tensor/tensor.h" /* tess_tensor_residual_add* */
#include "tess_ref.h" /* tess_ref_* */
#include "tess_test.h"

/* Central-difference step. L is formed from fp32 outputs, so it carries rounding noise
 * delta ~ u |L| with u = 6e-8 (more for long sums); the FD slope errs by about delta / h
 * (noise) + h^2 |L'''| / 6 (truncation). h = 1e-2 keeps both near 1e-5 for O(1) inputs and
 * gradients (cbrt(u) ~ 4e-3 would balance them for a single value; L sums many terms, so its
 * noise is larger and a slightly larger step is safer). */
#define GC_STEP 1e-2
/* Default FD tolerance. The correct layers below show 1e-6..6e-5 (printed per gradient), so
 * 1e-3 leaves a 15x margin for larger or stiffer layers (attention), while a wrong term
 * (dropped, mis-scaled, wrong sign) gives errors of 1e-2 to 1. */
#define GC_TOL_DEFAULT 1e-3
/* Fast vs _ref, and the accumulation check: both are fp32 round-off only. */
#define GC_TOL_REF 1e-5
#define GC_TOL_ACC 1e-6
#define GC_TINY 1e-12
/* Kink rows: an FD component is skipped when its one-sided slopes differ by more than this
 * fraction of their size (a smooth point differs by ~h |L''|, a straddled kink by O(1)). */
#define GC_KINK_REL 0.25
#define GC_KINK_SKIP_MAX 0.1
#define GC_SEED 20240611u
#define GC_MAX_BUFS 32
#define GC_MAX_DIMS 8
/* The eps of the norm rows (and of the PyTorch references). */
#define GC_NORM_EPS 1e-5f

typedef enum { GC_INPUT, GC_CONST, GC_IDS, GC_OUTPUT, GC_CACHE, GC_WORK } gc_kind;

typedef struct {
    const char *name;
    gc_kind kind;
    int64_t n;
    float *x;      /* value (n); NULL for GC_IDS */
    float *g;      /* gradient (GC_INPUT) or dout (GC_OUTPUT), (n); else NULL */
    int32_t *ids;  /* (n) for GC_IDS */
} gc_buf;

typedef struct gc_ctx {
    const int64_t *dims; /* the row's dims */
    uint32_t key;        /* hash of the row name */
    int nbuf;
    gc_buf buf[GC_MAX_BUFS];
} gc_ctx;

typedef struct {
    const char *name;
    int64_t dims[GC_MAX_DIMS];
    void (*setup)(gc_ctx *c);
    void (*forward)(gc_ctx *c);
    void (*backward)(gc_ctx *c);
    void (*forward_ref)(gc_ctx *c);
    void (*backward_ref)(gc_ctx *c);
    double tol;
    bool kinks;
    void (*teardown)(gc_ctx *c); /* optional: frees what setup made beyond the harness's buffers */
    const char *torch;           /* optional: PyTorch reference file (CHECK 0) */
} gc_row;

/* ---- the harness's buffer API (used by rows; inline so that unused ones do not warn) ---- */

static void gc_die(const char *what, const char *name) {
    fprintf(stderr, "gradcheck: %s '%s'\n", what, name);
    abort();
}

/* Uniform in [0,1) from Philox: (key, row hash) x (buffer index, element / 4). */
static double gc_uniform(const gc_ctx *c, int buf_index, int64_t i) {
    philox4x32_key_t k = {{GC_SEED, c->key}};
    philox4x32_ctr_t ctr = {{(uint32_t)buf_index, (uint32_t)(i / 4), (uint32_t)(i >> 34), 0}};
    philox4x32_ctr_t r = philox4x32(ctr, k);
    return (double)(r.v[i % 4] >> 8) * (1.0 / 16777216.0);
}

static gc_buf *gc_declare(gc_ctx *c, const char *name, gc_kind kind, int64_t n) {
    if (c->nbuf == GC_MAX_BUFS) gc_die("too many buffers at", name);
    for (int b = 0; b < c->nbuf; b++) {
        if (strcmp(c->buf[b].name, name) == 0) gc_die("duplicate buffer", name);
    }
    gc_buf *b = &c->buf[c->nbuf++];
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    b->name = name;
    b->kind = kind;
    b->n = n;
    b->x = kind == GC_IDS ? NULL : calloc(1, bytes);
    b->g = kind == GC_INPUT || kind == GC_OUTPUT ? calloc(1, bytes) : NULL;
    b->ids = kind == GC_IDS ? calloc(1, bytes) : NULL;
    if ((kind != GC_IDS && !b->x) || ((kind == GC_INPUT || kind == GC_OUTPUT) && !b->g) ||
        (kind == GC_IDS && !b->ids)) {
        gc_die("out of memory for", name);
    }
    return b;
}

static gc_buf *gc_find(gc_ctx *c, const char *name) {
    for (int b = 0; b < c->nbuf; b++) {
        if (strcmp(c->buf[b].name, name) == 0) return &c->buf[b];
    }
    return NULL;
}

static float *gc_fill(gc_ctx *c, gc_buf *b, double lo, double hi) {
    int index = (int)(b - c->buf);
    for (int64_t i = 0; i < b->n; i++) b->x[i] = (float)(lo + (hi - lo) * gc_uniform(c, index, i));
    return b->x;
}

static inline float *gc_input(gc_ctx *c, const char *name, int64_t n, double lo, double hi) {
    return gc_fill(c, gc_declare(c, name, GC_INPUT, n), lo, hi);
}

static inline float *gc_const(gc_ctx *c, const char *name, int64_t n, double lo, double hi) {
    return gc_fill(c, gc_declare(c, name, GC_CONST, n), lo, hi);
}

static inline int32_t *gc_ids(gc_ctx *c, const char *name, int64_t n, int32_t lo, int32_t hi) {
    gc_buf *b = gc_declare(c, name, GC_IDS, n);
    int index = (int)(b - c->buf);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = lo + (int64_t)(gc_uniform(c, index, i) * (double)(hi - lo + 1));
        b->ids[i] = (int32_t)(v > hi ? hi : v);
    }
    return b->ids;
}

static inline float *gc_output(gc_ctx *c, const char *name, int64_t n) {
    gc_buf *b = gc_declare(c, name, GC_OUTPUT, n);
    int index = (int)(b - c->buf);
    for (int64_t i = 0; i < n; i++) b->g[i] = (float)(2.0 * gc_uniform(c, index, i) - 1.0);
    return b->x;
}

static inline float *gc_cache(gc_ctx *c, const char *name, int64_t n) {
    return gc_declare(c, name, GC_CACHE, n)->x;
}

static inline float *gc_work(gc_ctx *c, const char *name, int64_t n) {
    return gc_declare(c, name, GC_WORK, n)->x;
}

static inline bool gc_has(gc_ctx *c, const char *name) { return gc_find(c, name) != NULL; }

/* Value of any float buffer. */
static inline float *gc_x(gc_ctx *c, const char *name) {
    gc_buf *b = gc_find(c, name);
    if (!b || !b->x) gc_die("no float buffer", name);
    return b->x;
}

/* Gradient of a gc_input, or dout of a gc_output. */
static inline float *gc_g(gc_ctx *c, const char *name) {
    gc_buf *b = gc_find(c, name);
    if (!b || !b->g) gc_die("no gradient/dout for", name);
    return b->g;
}

static inline int32_t *gc_i(gc_ctx *c, const char *name) {
    gc_buf *b = gc_find(c, name);
    if (!b || !b->ids) gc_die("no id buffer", name);
    return b->ids;
}

/* ---------------------------------- rows ---------------------------------- */

/* linear: dims {N, C, OC, has_bias} */
static void linear_setup(gc_ctx *c) {
    int64_t N = c->dims[0], C = c->dims[1], OC = c->dims[2];
    gc_input(c, "in", N * C, -1, 1);
    gc_input(c, "w", OC * C, -1, 1);
    if (c->dims[3]) gc_input(c, "b", OC, -1, 1);
    gc_output(c, "out", N * OC);
}
static void linear_forward(gc_ctx *c) {
    tess_nn_linear_forward(gc_x(c, "out"), gc_x(c, "in"), gc_x(c, "w"),
                           gc_has(c, "b") ? gc_x(c, "b") : NULL, c->dims[0], c->dims[1],
                           c->dims[2]);
}
static void linear_forward_ref(gc_ctx *c) {
    tess_nn_linear_forward_ref(gc_x(c, "out"), gc_x(c, "in"), gc_x(c, "w"),
                               gc_has(c, "b") ? gc_x(c, "b") : NULL, c->dims[0], c->dims[1],
                               c->dims[2]);
}
static void linear_backward(gc_ctx *c) {
    tess_nn_linear_backward(gc_g(c, "in"), gc_g(c, "w"), gc_has(c, "b") ? gc_g(c, "b") : NULL,
                            gc_g(c, "out"), gc_x(c, "in"), gc_x(c, "w"), c->dims[0], c->dims[1],
                            c->dims[2]);
}
static void linear_backward_ref(gc_ctx *c) {
    tess_nn_linear_backward_ref(gc_g(c, "in"), gc_g(c, "w"),
                                gc_has(c, "b") ? gc_g(c, "b") : NULL, gc_g(c, "out"),
                                gc_x(c, "in"), gc_x(c, "w"), c->dims[0], c->dims[1], c->dims[2]);
}

/* linear_tiles: the same layer through tess_matmul_tiles, against the same references */
static void linear_tiles_forward(gc_ctx *c) {
    tess_nn_linear_tiles_forward(gc_x(c, "out"), gc_x(c, "in"), gc_x(c, "w"),
                                 gc_has(c, "b") ? gc_x(c, "b") : NULL, c->dims[0], c->dims[1],
                                 c->dims[2]);
}
static void linear_tiles_backward(gc_ctx *c) {
    tess_nn_linear_tiles_backward(gc_g(c, "in"), gc_g(c, "w"),
                                  gc_has(c, "b") ? gc_g(c, "b") : NULL, gc_g(c, "out"),
                                  gc_x(c, "in"), gc_x(c, "w"), c->dims[0], c->dims[1],
                                  c->dims[2]);
}

/* embedding: dims {N, V, C}; N > V so that ids repeat and their gradients must add up */
static void embedding_setup(gc_ctx *c) {
    int64_t N = c->dims[0], V = c->dims[1], C = c->dims[2];
    gc_ids(c, "ids", N, 0, (int32_t)V - 1);
    gc_input(c, "table", V * C, -1, 1);
    gc_output(c, "out", N * C);
}
static void embedding_forward(gc_ctx *c) {
    tess_nn_embedding_forward(gc_x(c, "out"), gc_i(c, "ids"), gc_x(c, "table"), c->dims[0],
                              c->dims[1], c->dims[2]);
}
static void embedding_backward(gc_ctx *c) {
    tess_nn_embedding_backward(gc_g(c, "table"), gc_g(c, "out"), gc_i(c, "ids"), c->dims[0],
                               c->dims[1], c->dims[2]);
}

/* rmsnorm: dims {N, C}; eps GC_NORM_EPS */
static void rmsnorm_setup(gc_ctx *c) {
    int64_t N = c->dims[0], C = c->dims[1];
    gc_input(c, "in", N * C, -1, 1);
    gc_input(c, "w", C, 0.5, 1.5);
    gc_cache(c, "rstd", N);
    gc_output(c, "out", N * C);
}
static void rmsnorm_forward(gc_ctx *c) {
    tess_nn_rmsnorm_forward(gc_x(c, "out"), gc_x(c, "rstd"), gc_x(c, "in"), gc_x(c, "w"),
                            c->dims[0], c->dims[1], GC_NORM_EPS);
}
static void rmsnorm_forward_ref(gc_ctx *c) {
    tess_nn_rmsnorm_forward_ref(gc_x(c, "out"), gc_x(c, "rstd"), gc_x(c, "in"), gc_x(c, "w"),
                                c->dims[0], c->dims[1], GC_NORM_EPS);
}
static void rmsnorm_backward(gc_ctx *c) {
    tess_nn_rmsnorm_backward(gc_g(c, "in"), gc_g(c, "w"), gc_g(c, "out"), gc_x(c, "in"),
                             gc_x(c, "w"), gc_x(c, "rstd"), c->dims[0], c->dims[1]);
}
static void rmsnorm_backward_ref(gc_ctx *c) {
    tess_nn_rmsnorm_backward_ref(gc_g(c, "in"), gc_g(c, "w"), gc_g(c, "out"), gc_x(c, "in"),
                                 gc_x(c, "w"), gc_x(c, "rstd"), c->dims[0], c->dims[1]);
}

/* layernorm: dims {N, C, has_bias}; eps GC_NORM_EPS */
static void layernorm_setup(gc_ctx *c) {
    int64_t N = c->dims[0], C = c->dims[1];
    gc_input(c, "in", N * C, -1, 1);
    gc_input(c, "w", C, 0.5, 1.5);
    if (c->dims[2]) gc_input(c, "b", C, -1, 1);
    gc_cache(c, "mean", N);
    gc_cache(c, "rstd", N);
    gc_output(c, "out", N * C);
}
static void layernorm_forward(gc_ctx *c) {
    tess_nn_layernorm_forward(gc_x(c, "out"), gc_x(c, "mean"), gc_x(c, "rstd"), gc_x(c, "in"),
                              gc_x(c, "w"), gc_has(c, "b") ? gc_x(c, "b") : NULL, c->dims[0],
                              c->dims[1], GC_NORM_EPS);
}
static void layernorm_forward_ref(gc_ctx *c) {
    tess_nn_layernorm_forward_ref(gc_x(c, "out"), gc_x(c, "mean"), gc_x(c, "rstd"),
                                  gc_x(c, "in"), gc_x(c, "w"),
                                  gc_has(c, "b") ? gc_x(c, "b") : NULL, c->dims[0], c->dims[1],
                                  GC_NORM_EPS);
}
static void layernorm_backward(gc_ctx *c) {
    tess_nn_layernorm_backward(gc_g(c, "in"), gc_g(c, "w"), gc_has(c, "b") ? gc_g(c, "b") : NULL,
                               gc_g(c, "out"), gc_x(c, "in"), gc_x(c, "w"), gc_x(c, "mean"),
                               gc_x(c, "rstd"), c->dims[0], c->dims[1]);
}
static void layernorm_backward_ref(gc_ctx *c) {
    tess_nn_layernorm_backward_ref(gc_g(c, "in"), gc_g(c, "w"),
                                   gc_has(c, "b") ? gc_g(c, "b") : NULL, gc_g(c, "out"),
                                   gc_x(c, "in"), gc_x(c, "w"), gc_x(c, "mean"), gc_x(c, "rstd"),
                                   c->dims[0], c->dims[1]);
}

/* crossentropy: dims {N, V}; row 1 has target -1 (ignored) */
static void crossentropy_setup(gc_ctx *c) {
    int64_t N = c->dims[0], V = c->dims[1];
    gc_input(c, "logits", N * V, -2, 2);
    gc_ids(c, "targets", N, 0, (int32_t)V - 1)[1] = -1;
    gc_cache(c, "probs", N * V);
    gc_output(c, "loss", 1);
}
static void crossentropy_forward(gc_ctx *c) {
    gc_x(c, "loss")[0] = tess_nn_crossentropy_forward(gc_x(c, "probs"), gc_x(c, "logits"),
                                                      gc_i(c, "targets"), c->dims[0], c->dims[1]);
}
static void crossentropy_backward(gc_ctx *c) {
    tess_nn_crossentropy_backward(gc_g(c, "logits"), gc_x(c, "probs"), gc_i(c, "targets"),
                                  c->dims[0], c->dims[1], gc_g(c, "loss")[0]);
}

/* mse: dims {n} */
static void mse_setup(gc_ctx *c) {
    gc_input(c, "pred", c->dims[0], -1, 1);
    gc_const(c, "target", c->dims[0], -1, 1);
    gc_output(c, "loss", 1);
}
static void mse_forward(gc_ctx *c) {
    gc_x(c, "loss")[0] = tess_nn_mse_forward(gc_x(c, "pred"), gc_x(c, "target"), c->dims[0]);
}
static void mse_backward(gc_ctx *c) {
    tess_nn_mse_backward(gc_g(c, "pred"), gc_x(c, "pred"), gc_x(c, "target"), c->dims[0],
                         gc_g(c, "loss")[0]);
}

/* gelu, silu: dims {n}; inputs over [-3, 3) to cover both tails and the bend */
static void act_setup(gc_ctx *c) {
    gc_input(c, "in", c->dims[0], -3, 3);
    gc_output(c, "out", c->dims[0]);
}
static void gelu_forward(gc_ctx *c) {
    tess_nn_gelu_forward(gc_x(c, "out"), gc_x(c, "in"), c->dims[0]);
}
static void gelu_backward(gc_ctx *c) {
    tess_nn_gelu_backward(gc_g(c, "in"), gc_g(c, "out"), gc_x(c, "in"), c->dims[0]);
}
static void silu_forward(gc_ctx *c) {
    tess_nn_silu_forward(gc_x(c, "out"), gc_x(c, "in"), c->dims[0]);
}
static void silu_backward(gc_ctx *c) {
    tess_nn_silu_backward(gc_g(c, "in"), gc_g(c, "out"), gc_x(c, "in"), c->dims[0]);
}

/* residual_add: dims {n} */
static void residual_setup(gc_ctx *c) {
    gc_input(c, "res", c->dims[0], -1, 1);
    gc_input(c, "f", c->dims[0], -1, 1);
    gc_output(c, "out", c->dims[0]);
}
static void residual_forward(gc_ctx *c) {
    tess_tensor_residual_add(gc_x(c, "out"), gc_x(c, "res"), gc_x(c, "f"), c->dims[0]);
}
static void residual_backward(gc_ctx *c) {
    tess_tensor_residual_add_backward(gc_g(c, "res"), gc_g(c, "f"), gc_g(c, "out"), c->dims[0]);
}

/* attention: dims {B, T, C, NH, causal, rope, mask}; qkv (B,T,3C) -> out (B,T,C). mask 0: no
 * key-padding mask; 1: keys with (b*T + s) % 3 == 0 masked (with causal attention query 0 of
 * sequence 0 then has no key: the fully masked row); 2: that and every key of sequence B-1 (a
 * fully masked sequence). The reference keeps its own weights (B,NH,T,T) in "att_ref"; its
 * backward recomputes them with forward_ref. */
static tess_nn_attention_dims attention_dims(const gc_ctx *c) {
    tess_nn_attention_dims d;
    if (tess_nn_attention_dims_init(&d, c->dims[0], c->dims[1], c->dims[2], c->dims[3],
                                    c->dims[4] != 0, c->dims[5] != 0) != TESS_OK) {
        gc_die("bad attention dims in row", "attention");
    }
    return d;
}
static void attention_setup(gc_ctx *c) {
    tess_nn_attention_dims d = attention_dims(c);
    gc_input(c, "qkv", d.B * d.T * 3 * d.C, -1, 1);
    gc_cache(c, "cache", tess_nn_attention_cache_size(&d));
    gc_cache(c, "att_ref", d.B * d.NH * d.T * d.T);
    gc_cache(c, "out_ref", d.B * d.T * d.C);
    gc_work(c, "scratch", tess_nn_attention_scratch_size(&d));
    gc_work(c, "dpreatt_ref", d.B * d.NH * d.T * d.T);
    gc_output(c, "out", d.B * d.T * d.C);
    if (c->dims[6]) {
        int32_t *km = gc_ids(c, "kmask", d.B * d.T, 1, 1);
        for (int64_t i = 0; i < d.B * d.T; i++)
            km[i] = !(i % 3 == 0 || (c->dims[6] == 2 && i / d.T == d.B - 1));
    }
}
/* The row's key mask as bytes into km (B*T), or NULL without one. */
static const uint8_t *attention_mask(gc_ctx *c, uint8_t *km, int64_t n) {
    if (!gc_has(c, "kmask")) return NULL;
    const int32_t *m = gc_i(c, "kmask");
    for (int64_t i = 0; i < n; i++) km[i] = (uint8_t)m[i];
    return km;
}
static void attention_forward(gc_ctx *c) {
    tess_nn_attention_dims d = attention_dims(c);
    uint8_t km[d.B * d.T];
    tess_nn_attention_forward(gc_x(c, "out"), gc_x(c, "cache"), gc_x(c, "scratch"),
                              gc_x(c, "qkv"), attention_mask(c, km, d.B * d.T), &d);
}
static void attention_forward_ref(gc_ctx *c) {
    tess_nn_attention_dims d = attention_dims(c);
    uint8_t km[d.B * d.T];
    tess_nn_attention_forward_ref(gc_x(c, "out"), gc_x(c, "att_ref"), gc_x(c, "qkv"),
                                  attention_mask(c, km, d.B * d.T), &d);
}
static void attention_backward(gc_ctx *c) {
    tess_nn_attention_dims d = attention_dims(c);
    tess_nn_attention_backward(gc_g(c, "qkv"), gc_x(c, "scratch"), gc_g(c, "out"), gc_x(c, "qkv"),
                               gc_x(c, "cache"), &d);
}
static void attention_backward_ref(gc_ctx *c) {
    tess_nn_attention_dims d = attention_dims(c);
    uint8_t km[d.B * d.T];
    tess_nn_attention_forward_ref(gc_x(c, "out_ref"), gc_x(c, "att_ref"), gc_x(c, "qkv"),
                                  attention_mask(c, km, d.B * d.T), &d);
    tess_nn_attention_backward_ref(gc_g(c, "qkv"), gc_x(c, "dpreatt_ref"), gc_g(c, "out"),
                                   gc_x(c, "qkv"), gc_x(c, "att_ref"), &d);
}

/* mlp_gelu: dims {N, C, F, has_bias}: out = gelu(in @ w_fc^T + b_fc) @ w_proj^T + b_proj */
static void mlp_gelu_setup(gc_ctx *c) {
    int64_t N = c->dims[0], C = c->dims[1], F = c->dims[2];
    gc_input(c, "in", N * C, -1, 1);
    gc_input(c, "w_fc", F * C, -1, 1);
    gc_input(c, "w_proj", C * F, -1, 1);
    if (c->dims[3]) {
        gc_input(c, "b_fc", F, -1, 1);
        gc_input(c, "b_proj", C, -1, 1);
    }
    gc_cache(c, "pre", N * F);
    gc_cache(c, "act", N * F);
    gc_work(c, "scratch", tess_nn_mlp_scratch_size(N, F));
    gc_output(c, "out", N * C);
}
static void mlp_gelu_run_forward(gc_ctx *c, bool ref) {
    bool b = gc_has(c, "b_fc");
    (ref ? tess_nn_mlp_gelu_forward_ref : tess_nn_mlp_gelu_forward)(
        gc_x(c, "out"), gc_x(c, "pre"), gc_x(c, "act"), gc_x(c, "in"), gc_x(c, "w_fc"),
        b ? gc_x(c, "b_fc") : NULL, gc_x(c, "w_proj"), b ? gc_x(c, "b_proj") : NULL, c->dims[0],
        c->dims[1], c->dims[2]);
}
static void mlp_gelu_run_backward(gc_ctx *c, bool ref) {
    bool b = gc_has(c, "b_fc");
    (ref ? tess_nn_mlp_gelu_backward_ref : tess_nn_mlp_gelu_backward)(
        gc_g(c, "in"), gc_g(c, "w_fc"), b ? gc_g(c, "b_fc") : NULL, gc_g(c, "w_proj"),
        b ? gc_g(c, "b_proj") : NULL, gc_x(c, "scratch"), gc_g(c, "out"), gc_x(c, "in"),
        gc_x(c, "w_fc"), gc_x(c, "w_proj"), gc_x(c, "pre"), gc_x(c, "act"), c->dims[0],
        c->dims[1], c->dims[2]);
}
static void mlp_gelu_forward(gc_ctx *c) { mlp_gelu_run_forward(c, false); }
static void mlp_gelu_forward_ref(gc_ctx *c) { mlp_gelu_run_forward(c, true); }
static void mlp_gelu_backward(gc_ctx *c) { mlp_gelu_run_backward(c, false); }
static void mlp_gelu_backward_ref(gc_ctx *c) { mlp_gelu_run_backward(c, true); }

/* mlp_swiglu: dims {N, C, F}: out = (silu(in @ w_gate^T) * (in @ w_up^T)) @ w_down^T */
static void mlp_swiglu_setup(gc_ctx *c) {
    int64_t N = c->dims[0], C = c->dims[1], F = c->dims[2];
    gc_input(c, "in", N * C, -1, 1);
    gc_input(c, "w_gate", F * C, -1, 1);
    gc_input(c, "w_up", F * C, -1, 1);
    gc_input(c, "w_down", C * F, -1, 1);
    gc_cache(c, "gate", N * F);
    gc_cache(c, "up", N * F);
    gc_cache(c, "h", N * F);
    gc_work(c, "scratch", tess_nn_mlp_scratch_size(N, F));
    gc_output(c, "out", N * C);
}
static void mlp_swiglu_run_forward(gc_ctx *c, bool ref) {
    (ref ? tess_nn_mlp_swiglu_forward_ref : tess_nn_mlp_swiglu_forward)(
        gc_x(c, "out"), gc_x(c, "gate"), gc_x(c, "up"), gc_x(c, "h"), gc_x(c, "in"),
        gc_x(c, "w_gate"), gc_x(c, "w_up"), gc_x(c, "w_down"), c->dims[0], c->dims[1],
        c->dims[2]);
}
static void mlp_swiglu_run_backward(gc_ctx *c, bool ref) {
    (ref ? tess_nn_mlp_swiglu_backward_ref : tess_nn_mlp_swiglu_backward)(
        gc_g(c, "in"), gc_g(c, "w_gate"), gc_g(c, "w_up"), gc_g(c, "w_down"), gc_x(c, "scratch"),
        gc_g(c, "out"), gc_x(c, "in"), gc_x(c, "w_gate"), gc_x(c, "w_up"), gc_x(c, "w_down"),
        gc_x(c, "gate"), gc_x(c, "up"), gc_x(c, "h"), c->dims[0], c->dims[1], c->dims[2]);
}
static void mlp_swiglu_forward(gc_ctx *c) { mlp_swiglu_run_forward(c, false); }
static void mlp_swiglu_forward_ref(gc_ctx *c) { mlp_swiglu_run_forward(c, true); }
static void mlp_swiglu_backward(gc_ctx *c) { mlp_swiglu_run_backward(c, false); }
static void mlp_swiglu_backward_ref(gc_ctx *c) { mlp_swiglu_run_backward(c, true); }

/* permute_0213: dims {d0, d1, d2, d3}: out (d0,d2,d1,d3) = in (d0,d1,d2,d3) axes 1, 2 swapped */
static void permute_setup(gc_ctx *c) {
    const int64_t n = c->dims[0] * c->dims[1] * c->dims[2] * c->dims[3];
    gc_input(c, "in", n, -1, 1);
    gc_output(c, "out", n);
}
static void permute_forward(gc_ctx *c) {
    tess_tensor_permute_0213(gc_x(c, "out"), gc_x(c, "in"), c->dims[0], c->dims[1], c->dims[2],
                             c->dims[3]);
}
static void permute_forward_ref(gc_ctx *c) {
    tess_tensor_permute_0213_ref(gc_x(c, "out"), gc_x(c, "in"), c->dims[0], c->dims[1],
                                 c->dims[2], c->dims[3]);
}
static void permute_backward(gc_ctx *c) {
    tess_tensor_permute_0213_backward(gc_g(c, "in"), gc_g(c, "out"), c->dims[0], c->dims[1],
                                      c->dims[2], c->dims[3]);
}
static void permute_backward_ref(gc_ctx *c) {
    tess_tensor_permute_0213_backward_ref(gc_g(c, "in"), gc_g(c, "out"), c->dims[0], c->dims[1],
                                          c->dims[2], c->dims[3]);
}

/* blocks_two_axes: dims {B, NN, T, C, NH, layernorm+gelu}: the calcium-model composition on
 * continuous input x [B][NN][T][C]: a causal RoPE block over time (B*NN sequences of T), the
 * permutation to [B][T][NN][C], a bidirectional block over the NN neurons (B*T sequences) with a
 * key-padding mask (neuron NN-1 of batch 0 is padding), and the permutation back. Every
 * registry entry of the two blocks is a gc_input: forward copies them into the registry, backward
 * copies the registry's gradients out. The reference (ref_block_*) is the same composition
 * written out with the layers' _ref kernels. */
/* The reference composition: the same block written out with the layers' _ref kernels
 * (double accumulation), its parameters found in the registry by name, its activations here. */
typedef struct {
    const char *prefix;
    tess_nn_attention_dims att;              /* B = the block's sequences */
    tess_nn_norm_kind norm;
    tess_nn_ffn_kind ffn;
    int64_t N, C, F;
    float *n1, *mean1, *rstd1, *qkv, *a, *atty, *tmp, *mid, *n2, *mean2, *rstd2, *c1, *c2, *c3;
    float *dmid, *dn2, *datty, *dqkv, *dn1, *dpre, *scratch;
} ref_block;

static struct {
    tess_registry *reg;
    tess_nn_block *time, *neuron;
    tess_nn_block_scratch scr;
    tess_arena arena;
    uint8_t *kmask; /* (B*T, NN) */
    ref_block rt, rn;
    float *y1, *p, *y2, *dy; /* the reference's own (B,NN,T,C) buffers */
} gc_blk;

static float *ref_alloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

static void ref_block_init(ref_block *r, const char *prefix, const tess_nn_attention_dims *att,
                           tess_nn_norm_kind norm, tess_nn_ffn_kind ffn, int64_t F) {
    const int64_t N = att->B * att->T, C = att->C, TT = att->B * att->NH * att->T * att->T;
    *r = (ref_block){.prefix = prefix, .att = *att, .norm = norm, .ffn = ffn, .N = N, .C = C,
                     .F = F};
    float **nc[] = {&r->n1, &r->atty, &r->tmp, &r->mid, &r->n2, &r->dmid, &r->dn2, &r->datty,
                    &r->dn1};
    for (size_t i = 0; i < sizeof nc / sizeof nc[0]; i++) *nc[i] = ref_alloc(N * C);
    float **nf[] = {&r->c1, &r->c2, &r->c3};
    for (size_t i = 0; i < 3; i++) *nf[i] = ref_alloc(N * F);
    r->mean1 = ref_alloc(N), r->rstd1 = ref_alloc(N), r->mean2 = ref_alloc(N);
    r->rstd2 = ref_alloc(N);
    r->qkv = ref_alloc(3 * N * C), r->dqkv = ref_alloc(3 * N * C);
    r->a = ref_alloc(TT), r->dpre = ref_alloc(TT);
    r->scratch = ref_alloc(tess_nn_mlp_scratch_size(N, F));
}

static void ref_block_free(ref_block *r) {
    float *all[] = {r->n1, r->mean1, r->rstd1, r->qkv, r->a, r->atty, r->tmp, r->mid, r->n2,
                    r->mean2, r->rstd2, r->c1, r->c2, r->c3, r->dmid, r->dn2, r->datty,
                    r->dqkv, r->dn1, r->dpre, r->scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    *r = (ref_block){0};
}

/* Parameter or gradient "<prefix>.<leaf>" of the block, or NULL if the variant has none. */
static float *ref_param(const ref_block *r, const char *leaf, bool grad) {
    char name[TESS_REGISTRY_NAME_MAX];
    snprintf(name, sizeof name, "%s.%s", r->prefix, leaf);
    int64_t i = tess_registry_find(gc_blk.reg, name);
    return i < 0 ? NULL : grad ? tess_registry_grad(gc_blk.reg, i) : tess_registry_param(gc_blk.reg, i);
}
#define RP(leaf) ref_param(r, leaf, false)
#define RG(leaf) ref_param(r, leaf, true)

static void ref_norm_forward(const ref_block *r, float *out, float *mean, float *rstd,
                             const float *in, const char *w, const char *b) {
    if (r->norm == TESS_NN_NORM_LAYER)
        tess_nn_layernorm_forward_ref(out, mean, rstd, in, RP(w), RP(b), r->N, r->C, GC_NORM_EPS);
    else
        tess_nn_rmsnorm_forward_ref(out, rstd, in, RP(w), r->N, r->C, GC_NORM_EPS);
}

static void ref_norm_backward(const ref_block *r, float *din, const float *dout, const float *in,
                              const float *mean, const float *rstd, const char *w, const char *b) {
    if (r->norm == TESS_NN_NORM_LAYER)
        tess_nn_layernorm_backward_ref(din, RG(w), RG(b), dout, in, RP(w), mean, rstd, r->N, r->C);
    else
        tess_nn_rmsnorm_backward_ref(din, RG(w), dout, in, RP(w), rstd, r->N, r->C);
}

/* y (N,C) = block(x (N,C)) by the _ref kernels; keeps its activations for the backward. */
static void ref_block_forward(ref_block *r, float *y, const float *x, const uint8_t *kmask) {
    const int64_t N = r->N, C = r->C, F = r->F;
    ref_norm_forward(r, r->n1, r->mean1, r->rstd1, x, "norm1.w", "norm1.b");
    tess_nn_linear_forward_ref(r->qkv, r->n1, RP("attn.w_qkv"), NULL, N, C, 3 * C);
    tess_nn_attention_forward_ref(r->atty, r->a, r->qkv, kmask, &r->att);
    tess_nn_linear_forward_ref(r->tmp, r->atty, RP("attn.w_o"), NULL, N, C, C);
    for (int64_t i = 0; i < N * C; i++) r->mid[i] = x[i] + r->tmp[i];
    ref_norm_forward(r, r->n2, r->mean2, r->rstd2, r->mid, "norm2.w", "norm2.b");
    if (r->ffn == TESS_NN_FFN_SWIGLU)
        tess_nn_mlp_swiglu_forward_ref(r->tmp, r->c1, r->c3, r->c2, r->n2, RP("mlp.w_gate"),
                                       RP("mlp.w_up"), RP("mlp.w_down"), N, C, F);
    else
        tess_nn_mlp_gelu_forward_ref(r->tmp, r->c1, r->c2, r->n2, RP("mlp.w_fc"), RP("mlp.b_fc"),
                                     RP("mlp.w_proj"), RP("mlp.b_proj"), N, C, F);
    for (int64_t i = 0; i < N * C; i++) y[i] = r->mid[i] + r->tmp[i];
}

/* dx (N,C) = d/dx given dy (N,C) (both may be the same buffer); grads += into the registry. */
static void ref_block_backward(ref_block *r, float *dx, const float *dy, const float *x) {
    const int64_t N = r->N, C = r->C, F = r->F;
    const size_t bytes = (size_t)(N * C) * sizeof(float);
    memcpy(r->dmid, dy, bytes);
    memset(r->dn2, 0, bytes);
    if (r->ffn == TESS_NN_FFN_SWIGLU)
        tess_nn_mlp_swiglu_backward_ref(r->dn2, RG("mlp.w_gate"), RG("mlp.w_up"), RG("mlp.w_down"),
                                        r->scratch, dy, r->n2, RP("mlp.w_gate"), RP("mlp.w_up"),
                                        RP("mlp.w_down"), r->c1, r->c3, r->c2, N, C, F);
    else
        tess_nn_mlp_gelu_backward_ref(r->dn2, RG("mlp.w_fc"), RG("mlp.b_fc"), RG("mlp.w_proj"),
                                      RG("mlp.b_proj"), r->scratch, dy, r->n2, RP("mlp.w_fc"),
                                      RP("mlp.w_proj"), r->c1, r->c2, N, C, F);
    ref_norm_backward(r, r->dmid, r->dn2, r->mid, r->mean2, r->rstd2, "norm2.w", "norm2.b");
    memset(r->datty, 0, bytes);
    tess_nn_linear_backward_ref(r->datty, RG("attn.w_o"), NULL, r->dmid, r->atty, RP("attn.w_o"),
                                N, C, C);
    memset(r->dqkv, 0, 3 * bytes);
    tess_nn_attention_backward_ref(r->dqkv, r->dpre, r->datty, r->qkv, r->a, &r->att);
    memset(r->dn1, 0, bytes);
    tess_nn_linear_backward_ref(r->dn1, RG("attn.w_qkv"), NULL, r->dqkv, r->n1,
                                RP("attn.w_qkv"), N, C, 3 * C);
    memcpy(dx, r->dmid, bytes);
    ref_norm_backward(r, dx, r->dn1, x, r->mean1, r->rstd1, "norm1.w", "norm1.b");
}
#undef RP
#undef RG

static tess_status blocks_build(const gc_ctx *c) {
    const int64_t B = c->dims[0], NN = c->dims[1], T = c->dims[2], C = c->dims[3];
    const bool ln = c->dims[5] != 0;
    const tess_nn_block_config tc = {.T = T, .C = C, .NH = c->dims[4],
                                     .norm = ln ? TESS_NN_NORM_LAYER : TESS_NN_NORM_RMS,
                                     .norm_eps = 1e-5f, .causal = true, .rope = true,
                                     .rope_base = 10000.0f, .std = 0.02, .out_std = 0.01};
    tess_nn_block_config nc = tc;
    nc.T = NN;
    nc.causal = false;
    nc.rope = false;
    const tess_nn_ffn_kind fk = ln ? TESS_NN_FFN_GELU : TESS_NN_FFN_SWIGLU;
    tess_nn_ffn *f1 = NULL, *f2 = NULL;
    TESS_CHECK(tess_registry_create(&gc_blk.reg));
    TESS_CHECK(tess_nn_ffn_dense_create(&f1, fk, C, 2 * C, 0.02, 0.01));
    TESS_CHECK(tess_nn_block_create(&gc_blk.time, &tc, B * NN, f1));
    TESS_CHECK(tess_nn_ffn_dense_create(&f2, fk, C, 2 * C, 0.02, 0.01));
    TESS_CHECK(tess_nn_block_create(&gc_blk.neuron, &nc, B * T, f2));
    TESS_CHECK(tess_nn_block_add_params(gc_blk.time, gc_blk.reg, "time"));
    TESS_CHECK(tess_nn_block_add_params(gc_blk.neuron, gc_blk.reg, "neuron"));
    TESS_CHECK(tess_registry_finalize(gc_blk.reg));
    tess_nn_block_scratch_fit(&gc_blk.scr, gc_blk.time);
    tess_nn_block_scratch_fit(&gc_blk.scr, gc_blk.neuron);
    for (int pass = 0; pass < 2; pass++) { /* measure, then carve for real */
        tess_arena a;
        if (pass == 0) tess_arena_init_measure(&a);
        tess_arena *ap = pass == 0 ? &a : &gc_blk.arena;
        TESS_CHECK(tess_nn_block_carve(gc_blk.time, ap));
        TESS_CHECK(tess_nn_block_carve(gc_blk.neuron, ap));
        TESS_CHECK(tess_nn_block_scratch_carve(&gc_blk.scr, ap));
        if (pass == 0) TESS_CHECK(tess_arena_init(&gc_blk.arena, tess_arena_high_water(&a)));
    }
    tess_nn_attention_dims ta, na;
    TESS_CHECK(tess_nn_attention_dims_init(&ta, B * NN, T, C, tc.NH, true, true));
    TESS_CHECK(tess_nn_attention_dims_init(&na, B * T, NN, C, nc.NH, false, false));
    ref_block_init(&gc_blk.rt, "time", &ta, tc.norm, fk, 2 * C);
    ref_block_init(&gc_blk.rn, "neuron", &na, nc.norm, fk, 2 * C);
    const int64_t total = B * NN * T * C;
    gc_blk.y1 = ref_alloc(total), gc_blk.p = ref_alloc(total), gc_blk.y2 = ref_alloc(total);
    gc_blk.dy = ref_alloc(total);
    gc_blk.kmask = malloc((size_t)(B * T * NN));
    TESS_REQUIRE(gc_blk.kmask, TESS_ERR_MEM, "mask");
    for (int64_t r = 0; r < B * T; r++)
        for (int64_t n = 0; n < NN; n++) gc_blk.kmask[r * NN + n] = !(r < T && n == NN - 1);
    return TESS_OK;
}
static void blocks_setup(gc_ctx *c) {
    const int64_t n = c->dims[0] * c->dims[1] * c->dims[2] * c->dims[3];
    if (blocks_build(c) != TESS_OK) gc_die(tess_error_text(), "blocks_two_axes");
    gc_input(c, "x", n, -1, 1);
    for (int64_t i = 0; i < tess_registry_count(gc_blk.reg); i++) {
        const tess_registry_entry *e = tess_registry_get(gc_blk.reg, i);
        /* Norm gains near 1, weights in [-0.5, 0.5): two stacked blocks with weights of order 1
         * make L so curved that the central difference's truncation error (h^2 times the third
         * derivative) alone reaches 5e-3; it fell 26x when the weights were halved, which a
         * wrong term would not do. */
        bool gain = e->init.kind == TESS_INIT_CONST;
        gc_input(c, e->name, e->local_count, gain ? 0.5 : -0.5, gain ? 1.5 : 0.5);
    }
    gc_cache(c, "y1", n);
    gc_cache(c, "p", n);
    gc_cache(c, "y2", n);
    gc_work(c, "dy2", n);
    gc_work(c, "dy1", n);
    gc_output(c, "out", n);
}
static void blocks_forward(gc_ctx *c) {
    const int64_t B = c->dims[0], NN = c->dims[1], T = c->dims[2], C = c->dims[3];
    for (int64_t i = 0; i < tess_registry_count(gc_blk.reg); i++) {
        const tess_registry_entry *e = tess_registry_get(gc_blk.reg, i);
        memcpy(tess_registry_param(gc_blk.reg, i), gc_x(c, e->name),
               (size_t)e->local_count * sizeof(float));
    }
    tess_nn_block_forward(gc_blk.time, gc_x(c, "y1"), gc_x(c, "x"), NULL, B * NN, &gc_blk.scr);
    tess_tensor_permute_0213(gc_x(c, "p"), gc_x(c, "y1"), B, NN, T, C);
    tess_nn_block_forward(gc_blk.neuron, gc_x(c, "y2"), gc_x(c, "p"), gc_blk.kmask, B * T,
                          &gc_blk.scr);
    tess_tensor_permute_0213(gc_x(c, "out"), gc_x(c, "y2"), B, T, NN, C);
}
static void blocks_backward(gc_ctx *c) {
    const int64_t B = c->dims[0], NN = c->dims[1], T = c->dims[2], C = c->dims[3];
    const int64_t n = B * NN * T * C;
    tess_registry_zero_grads(gc_blk.reg);
    float *dy2 = gc_x(c, "dy2"), *dy1 = gc_x(c, "dy1");
    tess_tensor_permute_0213_backward(dy2, gc_g(c, "out"), B, T, NN, C);
    tess_nn_block_backward(gc_blk.neuron, dy2, &gc_blk.scr);
    tess_tensor_permute_0213_backward(dy1, dy2, B, NN, T, C);
    tess_nn_block_backward(gc_blk.time, dy1, &gc_blk.scr);
    float *dx = gc_g(c, "x");
    for (int64_t i = 0; i < n; i++) dx[i] += dy1[i];
    for (int64_t i = 0; i < tess_registry_count(gc_blk.reg); i++) {
        const tess_registry_entry *e = tess_registry_get(gc_blk.reg, i);
        const float *g = tess_registry_grad(gc_blk.reg, i);
        float *dst = gc_g(c, e->name);
        for (int64_t j = 0; j < e->local_count; j++) dst[j] += g[j];
    }
}
static void blocks_forward_ref(gc_ctx *c) {
    const int64_t B = c->dims[0], NN = c->dims[1], T = c->dims[2], C = c->dims[3];
    for (int64_t i = 0; i < tess_registry_count(gc_blk.reg); i++) {
        const tess_registry_entry *e = tess_registry_get(gc_blk.reg, i);
        memcpy(tess_registry_param(gc_blk.reg, i), gc_x(c, e->name),
               (size_t)e->local_count * sizeof(float));
    }
    ref_block_forward(&gc_blk.rt, gc_blk.y1, gc_x(c, "x"), NULL);
    tess_tensor_permute_0213_ref(gc_blk.p, gc_blk.y1, B, NN, T, C);
    ref_block_forward(&gc_blk.rn, gc_blk.y2, gc_blk.p, gc_blk.kmask);
    tess_tensor_permute_0213_ref(gc_x(c, "out"), gc_blk.y2, B, T, NN, C);
}
static void blocks_backward_ref(gc_ctx *c) {
    const int64_t B = c->dims[0], NN = c->dims[1], T = c->dims[2], C = c->dims[3];
    const int64_t n = B * NN * T * C;
    float *out = gc_x(c, "out"), *keep = malloc((size_t)n * sizeof(float));
    if (!keep) gc_die("out of memory in", "blocks_backward_ref");
    memcpy(keep, out, (size_t)n * sizeof(float)); /* the forward below must not change "out" */
    blocks_forward_ref(c);
    memcpy(out, keep, (size_t)n * sizeof(float));
    free(keep);
    tess_registry_zero_grads(gc_blk.reg);
    memset(gc_blk.dy, 0, (size_t)n * sizeof(float));
    tess_tensor_permute_0213_backward_ref(gc_blk.dy, gc_g(c, "out"), B, T, NN, C);
    ref_block_backward(&gc_blk.rn, gc_blk.dy, gc_blk.dy, gc_blk.p);
    memset(gc_blk.y2, 0, (size_t)n * sizeof(float)); /* reused as d y1 */
    tess_tensor_permute_0213_backward_ref(gc_blk.y2, gc_blk.dy, B, NN, T, C);
    ref_block_backward(&gc_blk.rt, gc_blk.y2, gc_blk.y2, gc_x(c, "x"));
    float *dx = gc_g(c, "x");
    for (int64_t i = 0; i < n; i++) dx[i] += gc_blk.y2[i];
    for (int64_t i = 0; i < tess_registry_count(gc_blk.reg); i++) {
        const tess_registry_entry *e = tess_registry_get(gc_blk.reg, i);
        const float *g = tess_registry_grad(gc_blk.reg, i);
        float *dst = gc_g(c, e->name);
        for (int64_t j = 0; j < e->local_count; j++) dst[j] += g[j];
    }
}
static void blocks_teardown(gc_ctx *c) {
    tess_nn_block_destroy(&gc_blk.time);
    tess_nn_block_destroy(&gc_blk.neuron);
    tess_registry_destroy(&gc_blk.reg);
    tess_arena_free(&gc_blk.arena);
    free(gc_blk.kmask);
    gc_blk.kmask = NULL;
    gc_blk.scr = (tess_nn_block_scratch){0};
    ref_block_free(&gc_blk.rt);
    ref_block_free(&gc_blk.rn);
    free(gc_blk.y1), free(gc_blk.p), free(gc_blk.y2), free(gc_blk.dy);
    gc_blk.y1 = gc_blk.p = gc_blk.y2 = gc_blk.dy = NULL;
}

/* ---- MoE (nn/moe.h) ---- */

/* Logits of order 1 with top-k gaps mostly larger than the FD step (kink rows skip the rest). */

/* moe_gates: dims {N, E, k, score}: outputs gates (N,k) and top-k mass (N) of the scores
 * (softmax or sigmoid, tess_nn_moe_score) of logits */
static void moe_gates_setup(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1], k = c->dims[2];
    gc_input(c, "logits", N * E, -2, 2);
    gc_cache(c, "probs", N * E);
    gc_cache(c, "lse", N);
    gc_ids(c, "topk", N * k, 0, 0);
    gc_work(c, "dprobs", N * E);
    gc_output(c, "gates", N * k);
    gc_output(c, "mass", N);
}
static void moe_gates_run_forward(gc_ctx *c, bool ref) {
    (ref ? tess_nn_moe_router_forward_ref : tess_nn_moe_router_forward)(
        gc_x(c, "probs"), gc_x(c, "lse"), gc_i(c, "topk"), gc_x(c, "gates"), gc_x(c, "mass"),
        gc_x(c, "logits"), NULL, c->dims[0], c->dims[1], c->dims[2],
        (tess_nn_moe_score)c->dims[3]);
}
static void moe_gates_forward(gc_ctx *c) { moe_gates_run_forward(c, false); }
static void moe_gates_forward_ref(gc_ctx *c) { moe_gates_run_forward(c, true); }
static void moe_gates_backward(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1], k = c->dims[2];
    float *dp = gc_x(c, "dprobs");
    tess_nn_moe_gates_backward(dp, gc_g(c, "gates"), gc_x(c, "gates"), gc_x(c, "mass"),
                               gc_i(c, "topk"), N, E, k);
    tess_nn_moe_mass_backward(dp, gc_g(c, "mass"), gc_i(c, "topk"), N, E, k);
    if (c->dims[3] == TESS_NN_MOE_SCORE_SIGMOID)
        tess_nn_moe_sigmoid_backward(gc_g(c, "logits"), dp, gc_x(c, "probs"), gc_x(c, "logits"),
                                     N, E);
    else
        tess_nn_moe_softmax_backward(gc_g(c, "logits"), dp, gc_x(c, "probs"), N, E);
}

/* moe_lb: dims {N, E, k}: L_lb of softmax(logits) with the counts of fixed routings "route"
 * (constants, as in the layer), as if counted over Ntot = 3N tokens (the global-batch form) */
static void moe_lb_setup(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1], k = c->dims[2];
    gc_input(c, "logits", N * E, -2, 2);
    gc_ids(c, "route", N * k, 0, (int32_t)E - 1);
    gc_cache(c, "probs", N * E);
    gc_cache(c, "lse", N);
    gc_work(c, "dprobs", N * E);
    gc_output(c, "loss", 1);
}
static void moe_softmax_only(gc_ctx *c, float *probs, float *lse, const float *logits) {
    /* The router's softmax; its top-k outputs are not used by these rows. */
    const int64_t N = c->dims[0], E = c->dims[1];
    int32_t topk[64];
    float gates[64], mass[64];
    for (int64_t t = 0; t < N; t++)
        tess_nn_moe_router_forward(probs + t * E, lse + t, topk, gates, mass, logits + t * E,
                                   NULL, 1, E, 1, TESS_NN_MOE_SCORE_SOFTMAX);
}
static void moe_lb_forward(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1], k = c->dims[2];
    int64_t counts[64];
    moe_softmax_only(c, gc_x(c, "probs"), gc_x(c, "lse"), gc_x(c, "logits"));
    tess_nn_moe_counts(counts, gc_i(c, "route"), N, E, k);
    gc_x(c, "loss")[0] = tess_nn_moe_lb_forward(gc_x(c, "probs"), counts, N, 3 * N, E, k);
}
static void moe_lb_backward(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1], k = c->dims[2];
    int64_t counts[64];
    tess_nn_moe_counts(counts, gc_i(c, "route"), N, E, k);
    tess_nn_moe_lb_backward(gc_x(c, "dprobs"), gc_g(c, "loss")[0], counts, N, 3 * N, E,
                            k);
    tess_nn_moe_softmax_backward(gc_g(c, "logits"), gc_x(c, "dprobs"), gc_x(c, "probs"), N, E);
}

/* moe_zloss: dims {N, E}: mean of logsumexp(logits)^2 */
static void moe_zloss_setup(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1];
    gc_input(c, "logits", N * E, -2, 2);
    gc_cache(c, "probs", N * E);
    gc_cache(c, "lse", N);
    gc_output(c, "loss", 1);
}
static void moe_zloss_forward(gc_ctx *c) {
    moe_softmax_only(c, gc_x(c, "probs"), gc_x(c, "lse"), gc_x(c, "logits"));
    gc_x(c, "loss")[0] = tess_nn_moe_zloss_forward(gc_x(c, "lse"), c->dims[0]);
}
static void moe_zloss_backward(gc_ctx *c) {
    tess_nn_moe_zloss_backward(gc_g(c, "logits"), gc_g(c, "loss")[0], gc_x(c, "probs"),
                               gc_x(c, "lse"), c->dims[0], c->dims[1]);
}

/* moe_rcp: dims {N, E, k}: R_cp = -mean_t M_a M_b of two layers' logits a, b */
static void moe_rcp_setup(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1], k = c->dims[2];
    gc_input(c, "logits_a", N * E, -2, 2);
    gc_input(c, "logits_b", N * E, -2, 2);
    gc_cache(c, "probs_a", N * E);
    gc_cache(c, "probs_b", N * E);
    gc_cache(c, "lse", N);
    gc_cache(c, "gates", N * k);
    gc_cache(c, "mass_a", N);
    gc_cache(c, "mass_b", N);
    gc_ids(c, "topk_a", N * k, 0, 0);
    gc_ids(c, "topk_b", N * k, 0, 0);
    gc_work(c, "dmass_a", N);
    gc_work(c, "dmass_b", N);
    gc_work(c, "dprobs_a", N * E);
    gc_work(c, "dprobs_b", N * E);
    gc_output(c, "loss", 1);
}
static void moe_rcp_forward(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1], k = c->dims[2];
    tess_nn_moe_router_forward(gc_x(c, "probs_a"), gc_x(c, "lse"), gc_i(c, "topk_a"),
                               gc_x(c, "gates"), gc_x(c, "mass_a"), gc_x(c, "logits_a"), NULL, N,
                               E, k, TESS_NN_MOE_SCORE_SOFTMAX);
    tess_nn_moe_router_forward(gc_x(c, "probs_b"), gc_x(c, "lse"), gc_i(c, "topk_b"),
                               gc_x(c, "gates"), gc_x(c, "mass_b"), gc_x(c, "logits_b"), NULL, N,
                               E, k, TESS_NN_MOE_SCORE_SOFTMAX);
    gc_x(c, "loss")[0] = tess_nn_moe_rcp_forward(gc_x(c, "mass_a"), gc_x(c, "mass_b"), N);
}
static void moe_rcp_backward(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1], k = c->dims[2];
    tess_nn_moe_rcp_backward(gc_x(c, "dmass_a"), gc_x(c, "dmass_b"), gc_g(c, "loss")[0],
                             gc_x(c, "mass_a"), gc_x(c, "mass_b"), N);
    tess_nn_moe_mass_backward(gc_x(c, "dprobs_a"), gc_x(c, "dmass_a"), gc_i(c, "topk_a"), N, E, k);
    tess_nn_moe_mass_backward(gc_x(c, "dprobs_b"), gc_x(c, "dmass_b"), gc_i(c, "topk_b"), N, E, k);
    tess_nn_moe_softmax_backward(gc_g(c, "logits_a"), gc_x(c, "dprobs_a"), gc_x(c, "probs_a"), N,
                                 E);
    tess_nn_moe_softmax_backward(gc_g(c, "logits_b"), gc_x(c, "dprobs_b"), gc_x(c, "probs_b"), N,
                                 E);
}

/* moe_rcp_id: dims {N, E, k}: the identity-coupled R_cp of two layers' logits a, b with a
 * constant co-occurrence average chat (E,E) in [0.25, 1.75) */
static void moe_rcp_id_setup(gc_ctx *c) {
    const int64_t E = c->dims[1];
    moe_rcp_setup(c);
    gc_const(c, "chat", E * E, 0.25, 1.75);
}
static void moe_rcp_id_forward(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1], k = c->dims[2];
    moe_rcp_forward(c); /* the routers; its R_cp value is replaced */
    gc_x(c, "loss")[0] = tess_nn_moe_rcp_id_forward(gc_x(c, "probs_a"), gc_i(c, "topk_a"),
                                                    gc_x(c, "probs_b"), gc_i(c, "topk_b"),
                                                    gc_x(c, "chat"), N, E, k);
}
static void moe_rcp_id_backward(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1], k = c->dims[2];
    tess_nn_moe_rcp_id_backward_rows(gc_x(c, "dprobs_a"), gc_x(c, "dprobs_b"),
                                     gc_g(c, "loss")[0], gc_x(c, "probs_a"), gc_i(c, "topk_a"),
                                     gc_x(c, "probs_b"), gc_i(c, "topk_b"), gc_x(c, "chat"), 0, N,
                                     N, E, k);
    tess_nn_moe_softmax_backward(gc_g(c, "logits_a"), gc_x(c, "dprobs_a"), gc_x(c, "probs_a"), N,
                                 E);
    tess_nn_moe_softmax_backward(gc_g(c, "logits_b"), gc_x(c, "dprobs_b"), gc_x(c, "probs_b"), N,
                                 E);
}

/* moe_rsp_swiglu: dims {N, k, C, F, phi, split}: one SwiGLU expert on R = N*k rows x; outputs y
 * (R,C) and R_sp of its intermediates z, rows paired by token through a scrambled row_of
 * (row_of[t*k+s] = (7 (t*k+s) + 3) mod R, a permutation when gcd(7, R) = 1). split: each slot
 * in a random group 0 or 1 (grp), R_sp of the split pairs only (tess_nn_moe_rsp_sums / N and
 * tess_nn_moe_rsp_backward_grp from the cosines the forward kept, the home side's part with
 * expert parallelism). */
static void moe_rsp_setup(gc_ctx *c) {
    const int64_t N = c->dims[0], k = c->dims[1], C = c->dims[2], F = c->dims[3], R = N * k;
    gc_input(c, "x", R * C, -1, 1);
    gc_input(c, "w_gate", F * C, -1, 1);
    gc_input(c, "w_up", F * C, -1, 1);
    gc_input(c, "w_down", C * F, -1, 1);
    int32_t *row_of = gc_ids(c, "row_of", R, 0, 0);
    for (int64_t i = 0; i < R; i++) row_of[i] = (int32_t)((7 * i + 3) % R);
    if (c->dims[5]) gc_ids(c, "grp", R, 0, 1);
    gc_cache(c, "a", R * F);
    gc_cache(c, "b", R * F);
    gc_cache(c, "z", R * F);
    gc_cache(c, "cos", N * tess_nn_moe_rsp_cache_floats(k));
    gc_work(c, "dz", R * F);
    gc_work(c, "db", R * F);
    gc_output(c, "y", R * C);
    gc_output(c, "rsp", 1);
}
static void moe_rsp_run_forward(gc_ctx *c, bool ref) {
    const int64_t N = c->dims[0], k = c->dims[1], C = c->dims[2], F = c->dims[3], R = N * k;
    const tess_nn_moe_phi phi = (tess_nn_moe_phi)c->dims[4];
    (ref ? tess_nn_moe_expert_forward_ref : tess_nn_moe_expert_forward)(
        gc_x(c, "y"), gc_x(c, "a"), gc_x(c, "b"), gc_x(c, "z"), gc_x(c, "x"), gc_x(c, "w_gate"),
        gc_x(c, "w_up"), gc_x(c, "w_down"), R, C, F);
    if (c->dims[5]) {
        double sums[TESS_NN_MOE_PHI_COUNT];
        if (ref)
            tess_nn_moe_rsp_sums_ref(sums, gc_x(c, "z"), gc_i(c, "row_of"), gc_i(c, "grp"), N, k,
                                     F);
        else /* the cosines kept for the backward */
            tess_nn_moe_rsp_sums(sums, gc_x(c, "cos"), gc_x(c, "z"), gc_i(c, "row_of"),
                                 gc_i(c, "grp"), N, k, F);
        gc_x(c, "rsp")[0] = (float)(sums[phi] / (double)N);
        return;
    }
    gc_x(c, "rsp")[0] = (ref ? tess_nn_moe_rsp_forward_ref : tess_nn_moe_rsp_forward)(
        gc_x(c, "z"), gc_i(c, "row_of"), N, k, F, phi);
}
static void moe_rsp_run_backward(gc_ctx *c, bool ref) {
    const int64_t N = c->dims[0], k = c->dims[1], C = c->dims[2], F = c->dims[3], R = N * k;
    const tess_nn_moe_phi phi = (tess_nn_moe_phi)c->dims[4];
    const int32_t *grp = c->dims[5] ? gc_i(c, "grp") : NULL;
    if (ref)
        tess_nn_moe_rsp_backward_grp_ref(gc_x(c, "dz"), gc_g(c, "rsp")[0], gc_x(c, "z"),
                                         gc_i(c, "row_of"), grp, N, k, F, phi);
    else /* split: from the forward's cosines (the layer's path); else recomputed */
        tess_nn_moe_rsp_backward_grp(gc_x(c, "dz"), gc_g(c, "rsp")[0],
                                     grp ? gc_x(c, "cos") : NULL, gc_x(c, "z"),
                                     gc_i(c, "row_of"), grp, N, k, F, phi);
    (ref ? tess_nn_moe_expert_backward_ref : tess_nn_moe_expert_backward)(
        gc_g(c, "x"), gc_g(c, "w_gate"), gc_g(c, "w_up"), gc_g(c, "w_down"), gc_x(c, "dz"),
        gc_x(c, "db"), gc_g(c, "y"), gc_x(c, "x"), gc_x(c, "w_gate"), gc_x(c, "w_up"),
        gc_x(c, "w_down"), gc_x(c, "a"), gc_x(c, "b"), gc_x(c, "z"), R, C, F, 1.0f, 1.0f, 1.0f);
}
static void moe_rsp_forward(gc_ctx *c) { moe_rsp_run_forward(c, false); }
static void moe_rsp_forward_ref(gc_ctx *c) { moe_rsp_run_forward(c, true); }
static void moe_rsp_backward(gc_ctx *c) { moe_rsp_run_backward(c, false); }
static void moe_rsp_backward_ref(gc_ctx *c) { moe_rsp_run_backward(c, true); }

/* moe_ortho: dims {N, k, C, dropped}: Guo et al.'s orthogonality loss of outputs y (R,C), rows
 * paired by token through the scrambled row_of of moe_rsp_swiglu; with dropped, slot 0 of token 1
 * is dropped (-1). */
static void moe_ortho_setup(gc_ctx *c) {
    const int64_t N = c->dims[0], k = c->dims[1], C = c->dims[2], R = N * k;
    gc_input(c, "y", R * C, -1, 1);
    int32_t *row_of = gc_ids(c, "row_of", R, 0, 0);
    for (int64_t i = 0; i < R; i++) row_of[i] = (int32_t)((7 * i + 3) % R);
    if (c->dims[3]) row_of[k] = -1;
    gc_output(c, "loss", 1);
}
static void moe_ortho_forward(gc_ctx *c) {
    gc_x(c, "loss")[0] = tess_nn_moe_ortho_forward(gc_x(c, "y"), gc_i(c, "row_of"), c->dims[0],
                                                   c->dims[1], c->dims[2]);
}
static void moe_ortho_forward_ref(gc_ctx *c) {
    gc_x(c, "loss")[0] = tess_nn_moe_ortho_forward_ref(gc_x(c, "y"), gc_i(c, "row_of"),
                                                       c->dims[0], c->dims[1], c->dims[2]);
}
static void moe_ortho_backward(gc_ctx *c) {
    tess_nn_moe_ortho_backward(gc_g(c, "y"), gc_g(c, "loss")[0], gc_x(c, "y"), gc_i(c, "row_of"),
                               c->dims[0], c->dims[1], c->dims[2]);
}

/* moe_variance: dims {N, E}: mean over tokens of the variance of softmax(logits) */
static void moe_variance_setup(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1];
    gc_input(c, "logits", N * E, -2, 2);
    gc_cache(c, "probs", N * E);
    gc_cache(c, "lse", N);
    gc_work(c, "dprobs", N * E);
    gc_output(c, "loss", 1);
}
static void moe_variance_forward(gc_ctx *c) {
    moe_softmax_only(c, gc_x(c, "probs"), gc_x(c, "lse"), gc_x(c, "logits"));
    gc_x(c, "loss")[0] = tess_nn_moe_variance_forward(gc_x(c, "probs"), c->dims[0], c->dims[1]);
}
static void moe_variance_backward(gc_ctx *c) {
    const int64_t N = c->dims[0], E = c->dims[1];
    tess_nn_moe_variance_backward(gc_x(c, "dprobs"), gc_g(c, "loss")[0], gc_x(c, "probs"), N, E);
    tess_nn_moe_softmax_backward(gc_g(c, "logits"), gc_x(c, "dprobs"), gc_x(c, "probs"), N, E);
}

/* moe_layers: dims {N, C, F, E, k, shared_F, variant}: two MoE layers of one stack (with a
 * shared SwiGLU expert of width shared_F when > 0), y2 = moe2(moe1(x)), with every
 * aux loss on (lambda_lb 0.5, lambda_z 0.3, lambda_sp 0.7, lambda_cp 0.9); outputs y2 (N,C) and
 * the weighted aux total, whose dout is the stack's loss scale. forward_ref is the same
 * composition token by token from the _ref kernels. variant 0: softmax, dropless; 1: sigmoid
 * scores (lambda_z 0), capacity factor 0.75 dropping by score, padded blocks; 2: capacity 0.75
 * dropping by position, training with router jitter 0.3 (step 3); 3: Guo et al.'s baselines on
 * as well (lambda_o 0.6, lambda_v 0.8); 4: R_cp with the deeper layer detached (cp_detach): the
 * function differentiated is the aux total with R_cp's M^(2) replaced by the constant
 * "m2_frozen", the second layer's top-k mass at the drawn point (setup computes it); 5: R_cp
 * identity-coupled (cp_identity), its co-occurrence average "m2.cp_cooc" a constant drawn in
 * [0.5, 1.5) (every non-trainable registry entry is a constant, not differentiated). */
static struct {
    tess_registry *reg;
    tess_nn_moe_stack *stack;
    tess_nn_ffn *f[2];
    tess_arena arena;
    float *y1, *dy1, *scratch;
} gc_moe;
static tess_nn_moe_config gc_moe_cfg(const gc_ctx *c) {
    tess_nn_moe_config mc = {.every = 1, .lambda_lb = 0.5, .lambda_z = 0.3, .lambda_sp = 0.7,
                             .lambda_cp = 0.9, .phi = TESS_NN_MOE_PHI_SQ, .std = 0.02, .seed = 7};
    mc.F = c->dims[2], mc.E = c->dims[3], mc.k = c->dims[4], mc.shared_F = c->dims[5];
    if (c->dims[6] == 1) {
        mc.score = TESS_NN_MOE_SCORE_SIGMOID, mc.lambda_z = 0;
        mc.drop = TESS_NN_MOE_DROP_PROBS, mc.capacity_factor = 0.75, mc.pad = true;
    } else if (c->dims[6] == 2) {
        mc.drop = TESS_NN_MOE_DROP_POSITION, mc.capacity_factor = 0.75, mc.jitter = 0.3;
    } else if (c->dims[6] == 3) {
        mc.lambda_o = 0.6, mc.lambda_v = 0.8;
    } else if (c->dims[6] == 4) {
        mc.cp_detach = true;
    } else if (c->dims[6] == 5) {
        mc.cp_identity = true;
    }
    return mc;
}
#define GC_MOE_STEP 3
static tess_status moe_layers_build(const gc_ctx *c) {
    const int64_t N = c->dims[0], C = c->dims[1];
    const tess_nn_moe_config mc = gc_moe_cfg(c);
    const tess_tfm_config tc = {.V = 8, .T = N, .C = C, .NH = 1, .F = 4, .L = 2};
    TESS_CHECK(tess_registry_create(&gc_moe.reg));
    TESS_CHECK(tess_nn_moe_stack_create(&gc_moe.stack, &mc));
    tess_nn_moe_stack_set_step(gc_moe.stack, true, GC_MOE_STEP, 0);
    for (int l = 0; l < 2; l++) {
        TESS_CHECK(tess_nn_moe_stack_make_ffn(gc_moe.stack, l, &tc, &gc_moe.f[l]));
        TESS_CHECK(tess_nn_ffn_add_params(gc_moe.f[l], gc_moe.reg, l ? "m2" : "m1"));
    }
    TESS_CHECK(tess_registry_finalize(gc_moe.reg));
    tess_arena m;
    tess_arena_init_measure(&m);
    for (int l = 0; l < 2; l++) TESS_CHECK(tess_nn_ffn_carve(gc_moe.f[l], &m, N));
    TESS_CHECK(tess_arena_init(&gc_moe.arena, tess_arena_high_water(&m)));
    for (int l = 0; l < 2; l++) TESS_CHECK(tess_nn_ffn_carve(gc_moe.f[l], &gc_moe.arena, N));
    gc_moe.y1 = calloc((size_t)(N * C), sizeof(float));
    gc_moe.dy1 = calloc((size_t)(N * C), sizeof(float));
    gc_moe.scratch = calloc((size_t)tess_nn_ffn_scratch_floats(gc_moe.f[0], N), sizeof(float));
    TESS_REQUIRE(gc_moe.y1 && gc_moe.dy1 && gc_moe.scratch, TESS_ERR_MEM, "moe_layers buffers");
    return TESS_OK;
}
static void moe_layers_forward(gc_ctx *c);
static void moe_layers_setup(gc_ctx *c) {
    const int64_t N = c->dims[0], C = c->dims[1];
    if (moe_layers_build(c) != TESS_OK) gc_die(tess_error_text(), "moe_layers");
    gc_input(c, "x", N * C, -1, 1);
    for (int64_t i = 0; i < tess_registry_count(gc_moe.reg); i++) {
        /* Router weights in [-2, 2) keep the top-k gaps wide. With C = 5, F = 4 one token had
         * a small z and R_sp's cosine curved L so much that the h = 1e-2 difference was off by
         * 22% (h = 1e-4 agreed with the analytic gradient to 1e-4): C = 8, F = 6 avoid that. */
        const tess_registry_entry *e = tess_registry_get(gc_moe.reg, i);
        const bool router = strstr(e->name, ".router") != NULL;
        if (!e->trainable)
            gc_const(c, e->name, e->local_count, 0.5, 1.5);
        else
            gc_input(c, e->name, e->local_count, router ? -2.0 : -1.0, router ? 2.0 : 1.0);
    }
    gc_output(c, "y2", N * C);
    gc_output(c, "aux", 1);
    if (c->dims[6] == 4) { /* the detached mass: the second layer's at the drawn point */
        float *frozen = gc_const(c, "m2_frozen", N, 0, 1);
        moe_layers_forward(c);
        memcpy(frozen, tess_nn_moe_stack_mass(gc_moe.stack, 1), (size_t)N * sizeof(float));
    }
}
static void moe_layers_load(gc_ctx *c) {
    for (int64_t i = 0; i < tess_registry_count(gc_moe.reg); i++) {
        const tess_registry_entry *e = tess_registry_get(gc_moe.reg, i);
        memcpy(tess_registry_param(gc_moe.reg, i), gc_x(c, e->name),
               (size_t)e->local_count * sizeof(float));
    }
}
static void moe_layers_forward(gc_ctx *c) {
    const int64_t N = c->dims[0];
    moe_layers_load(c);
    tess_nn_ffn_forward(gc_moe.f[0], gc_moe.y1, gc_x(c, "x"), N);
    tess_nn_ffn_forward(gc_moe.f[1], gc_x(c, "y2"), gc_moe.y1, N);
    tess_nn_moe_aux aux;
    tess_nn_moe_stack_aux(gc_moe.stack, &aux);
    double total = aux.total;
    if (gc_has(c, "m2_frozen")) { /* R_cp with the deeper layer's mass a constant */
        const float *m1 = tess_nn_moe_stack_mass(gc_moe.stack, 0), *m2 = gc_x(c, "m2_frozen");
        double j = 0;
        for (int64_t t = 0; t < N; t++) j += (double)m1[t] * m2[t];
        total += gc_moe_cfg(c).lambda_cp * (-j / (double)N - aux.cp);
    }
    gc_x(c, "aux")[0] = (float)total;
}
static void moe_layers_backward(gc_ctx *c) {
    const int64_t N = c->dims[0], C = c->dims[1];
    tess_registry_zero_grads(gc_moe.reg);
    memset(gc_moe.dy1, 0, (size_t)(N * C) * sizeof(float));
    tess_nn_moe_stack_set_loss_scale(gc_moe.stack, gc_g(c, "aux")[0]);
    tess_nn_ffn_backward(gc_moe.f[1], gc_moe.dy1, gc_moe.scratch, gc_g(c, "y2"), N);
    tess_nn_ffn_backward(gc_moe.f[0], gc_g(c, "x"), gc_moe.scratch, gc_moe.dy1, N);
    for (int64_t i = 0; i < tess_registry_count(gc_moe.reg); i++) {
        const tess_registry_entry *e = tess_registry_get(gc_moe.reg, i);
        if (!e->trainable) continue;
        const float *g = tess_registry_grad(gc_moe.reg, i);
        float *dst = gc_g(c, e->name);
        for (int64_t j = 0; j < e->local_count; j++) dst[j] += g[j];
    }
}
/* One MoE layer (MoE layer index li) token by token from the _ref kernels: y (N,C), its top-k
 * mass (N), scores probs (N,E) and top-k (N,k), and its lambda-weighted L_lb + L_z + R_sp. */
static double moe_layer_ref(float *y, float *mass, float *probs, int32_t *sel, const float *x,
                            const char *pre, int li, gc_ctx *c) {
    const int64_t N = c->dims[0], C = c->dims[1], F = c->dims[2], E = c->dims[3], k = c->dims[4];
    const tess_nn_moe_config mc = gc_moe_cfg(c);
    char nm[64];
    snprintf(nm, sizeof nm, "%s.router", pre);
    const float *wr = gc_x(c, nm);
    snprintf(nm, sizeof nm, "%s.w_gate", pre);
    const float *wg = gc_x(c, nm);
    snprintf(nm, sizeof nm, "%s.w_up", pre);
    const float *wu = gc_x(c, nm);
    snprintf(nm, sizeof nm, "%s.w_down", pre);
    const float *wd = gc_x(c, nm);
    float *h = calloc((size_t)(N * E), sizeof(float)), *p = calloc((size_t)(N * E), sizeof(float));
    float *lse = calloc((size_t)N, sizeof(float)), *g = calloc((size_t)(N * k), sizeof(float));
    float *z = calloc((size_t)(N * k * F), sizeof(float)), *ab = calloc((size_t)(2 * F), sizeof(float));
    float *yk = calloc((size_t)(N * k * C), sizeof(float)); /* each slot's expert output */
    int32_t *topk = calloc((size_t)(N * k), sizeof(int32_t)), *row = calloc((size_t)(N * k), sizeof(int32_t));
    float *xr = calloc((size_t)(N * C), sizeof(float));
    uint8_t *keep = calloc((size_t)(N * k), 1);
    int64_t counts[64];
    if (!h || !p || !lse || !g || !z || !ab || !yk || !topk || !row || !xr || !keep)
        gc_die("out of memory in", "moe_layer_ref");
    /* the router's input: x, or x u with the jitter u of this layer and step */
    memcpy(xr, x, (size_t)(N * C) * sizeof(float));
    if (mc.jitter > 0)
        for (int64_t i = 0; i < N * C; i++)
            xr[i] *= (float)tess_rng_uniform((tess_rng_key){.seed = (uint32_t)mc.seed, .stream = (uint32_t)li},
                                             tess_rng_ctr(TESS_RNG_PURPOSE_JITTER, GC_MOE_STEP), (uint64_t)i,
                                             1.0 - mc.jitter, 1.0 + mc.jitter);
    tess_nn_linear_forward_ref(h, xr, wr, NULL, N, C, E);
    tess_nn_moe_router_forward_ref(p, lse, topk, g, mass, h, NULL, N, E, k, mc.score);
    tess_nn_moe_keep_ref(keep, topk, p, N, E, k,
                         mc.drop ? tess_nn_moe_capacity(N, E, k, mc.capacity_factor) : -1, mc.drop);
    for (int64_t t = 0; t < N; t++) {
        for (int64_t cc = 0; cc < C; cc++) y[t * C + cc] = 0;
        for (int64_t s = 0; s < k; s++) {
            const int64_t e = topk[t * k + s];
            row[t * k + s] = keep[t * k + s] ? (int32_t)(t * k + s) : -1;
            if (!keep[t * k + s]) continue;
            float *yr = yk + (t * k + s) * C;
            tess_nn_moe_expert_forward_ref(yr, ab, ab + F, z + (t * k + s) * F, x + t * C,
                                           wg + e * F * C, wu + e * F * C, wd + e * C * F, 1, C,
                                           F);
            for (int64_t cc = 0; cc < C; cc++) y[t * C + cc] += g[t * k + s] * yr[cc];
        }
    }
    const int64_t Fs = c->dims[5];
    if (Fs > 0) {
        float *ys = calloc((size_t)(N * C), sizeof(float)), *gt = calloc((size_t)(N * Fs), sizeof(float));
        float *up = calloc((size_t)(N * Fs), sizeof(float)), *hh = calloc((size_t)(N * Fs), sizeof(float));
        if (!ys || !gt || !up || !hh) gc_die("out of memory in", "moe_layer_ref");
        char ng[64], nu[64], nd[64];
        snprintf(ng, sizeof ng, "%s.shared.w_gate", pre);
        snprintf(nu, sizeof nu, "%s.shared.w_up", pre);
        snprintf(nd, sizeof nd, "%s.shared.w_down", pre);
        tess_nn_mlp_swiglu_forward_ref(ys, gt, up, hh, x, gc_x(c, ng), gc_x(c, nu), gc_x(c, nd), N,
                                       C, Fs);
        for (int64_t i = 0; i < N * C; i++) y[i] += ys[i];
        free(ys), free(gt), free(up), free(hh);
    }
    tess_nn_moe_counts(counts, topk, N, E, k);
    double aux = mc.lambda_lb * tess_nn_moe_lb_forward(p, counts, N, N, E, k) +
                 mc.lambda_z * tess_nn_moe_zloss_forward(lse, N) +
                 mc.lambda_sp * tess_nn_moe_rsp_forward_ref(z, row, N, k, F, mc.phi) -
                 mc.lambda_v * tess_nn_moe_variance_forward(p, N, E);
    if (mc.lambda_o > 0) aux += mc.lambda_o * tess_nn_moe_ortho_forward_ref(yk, row, N, k, C);
    memcpy(probs, p, (size_t)(N * E) * sizeof(float));
    memcpy(sel, topk, (size_t)(N * k) * sizeof(int32_t));
    free(h), free(p), free(lse), free(g), free(z), free(ab), free(yk), free(topk), free(row);
    free(xr), free(keep);
    return aux;
}
static void moe_layers_forward_ref(gc_ctx *c) {
    const int64_t N = c->dims[0];
    const int64_t E = c->dims[3], k = c->dims[4];
    float m1[64], m2[64], p1[64 * 8], p2[64 * 8];
    int32_t k1[64 * 4], k2[64 * 4];
    if (N > 64 || E > 8 || k > 4) gc_die("dims too large for", "moe_layers_forward_ref");
    double aux = moe_layer_ref(gc_moe.y1, m1, p1, k1, gc_x(c, "x"), "m1", 0, c);
    aux += moe_layer_ref(gc_x(c, "y2"), m2, p2, k2, gc_moe.y1, "m2", 1, c);
    const float *mb = gc_has(c, "m2_frozen") ? gc_x(c, "m2_frozen") : m2;
    double j = 0; /* sum_t sum_{e in K^1, v in K^2} p1_e p2_v (chat_ev, or 1: M^1 M^2) */
    for (int64_t t = 0; t < N; t++) {
        if (!gc_moe_cfg(c).cp_identity) {
            j += (double)m1[t] * mb[t];
            continue;
        }
        for (int64_t s = 0; s < k; s++)
            for (int64_t r = 0; r < k; r++)
                j += (double)p1[t * E + k1[t * k + s]] * p2[t * E + k2[t * k + r]] *
                     gc_x(c, "m2.cp_cooc")[k1[t * k + s] * E + k2[t * k + r]];
    }
    gc_x(c, "aux")[0] = (float)(aux - gc_moe_cfg(c).lambda_cp * j / (double)N);
}
static void moe_layers_teardown(gc_ctx *c) {
    (void)c;
    for (int l = 0; l < 2; l++) tess_nn_ffn_destroy(&gc_moe.f[l]);
    tess_nn_moe_stack_destroy(&gc_moe.stack);
    tess_registry_destroy(&gc_moe.reg);
    tess_arena_free(&gc_moe.arena);
    free(gc_moe.y1), free(gc_moe.dy1), free(gc_moe.scratch);
    gc_moe.y1 = gc_moe.dy1 = gc_moe.scratch = NULL;
}
/* conv1d: dims {B, L, C, OC, K, stride, pad, has_bias}; input (B, L, C), weight (OC, C, K) */
static tess_nn_conv1d_dims conv1d_dims(const gc_ctx *c) {
    return (tess_nn_conv1d_dims){.B = c->dims[0], .L = c->dims[1], .C = c->dims[2],
                                 .OC = c->dims[3], .K = c->dims[4], .stride = c->dims[5],
                                 .pad = c->dims[6]};
}
static void conv1d_setup(gc_ctx *c) {
    tess_nn_conv1d_dims d = conv1d_dims(c);
    gc_input(c, "in", d.B * d.L * d.C, -1, 1);
    gc_input(c, "w", d.OC * d.C * d.K, -1, 1);
    if (c->dims[7]) gc_input(c, "b", d.OC, -1, 1);
    gc_cache(c, "col", tess_nn_conv1d_col_size(&d));
    gc_work(c, "dcol", tess_nn_conv1d_col_size(&d));
    gc_output(c, "out", d.B * tess_nn_conv1d_out_len(&d) * d.OC);
}
static void conv1d_forward(gc_ctx *c) {
    tess_nn_conv1d_dims d = conv1d_dims(c);
    tess_nn_conv1d_forward(gc_x(c, "out"), gc_x(c, "col"), gc_x(c, "in"), gc_x(c, "w"),
                           gc_has(c, "b") ? gc_x(c, "b") : NULL, &d);
}
static void conv1d_forward_ref(gc_ctx *c) {
    tess_nn_conv1d_dims d = conv1d_dims(c);
    tess_nn_conv1d_forward_ref(gc_x(c, "out"), gc_x(c, "in"), gc_x(c, "w"),
                               gc_has(c, "b") ? gc_x(c, "b") : NULL, &d);
}
static void conv1d_backward(gc_ctx *c) {
    tess_nn_conv1d_dims d = conv1d_dims(c);
    tess_nn_conv1d_backward(gc_g(c, "in"), gc_g(c, "w"), gc_has(c, "b") ? gc_g(c, "b") : NULL,
                            gc_x(c, "dcol"), gc_g(c, "out"), gc_x(c, "col"), gc_x(c, "w"), &d);
}
static void conv1d_backward_ref(gc_ctx *c) {
    tess_nn_conv1d_dims d = conv1d_dims(c);
    tess_nn_conv1d_backward_ref(gc_g(c, "in"), gc_g(c, "w"), gc_has(c, "b") ? gc_g(c, "b") : NULL,
                                gc_g(c, "out"), gc_x(c, "in"), gc_x(c, "w"), &d);
}

/* conv1d_direct: the same dims and oracles as conv1d, the direct kernel (no col) */
static void conv1d_direct_setup(gc_ctx *c) {
    tess_nn_conv1d_dims d = conv1d_dims(c);
    gc_input(c, "in", d.B * d.L * d.C, -1, 1);
    gc_input(c, "w", d.OC * d.C * d.K, -1, 1);
    if (c->dims[7]) gc_input(c, "b", d.OC, -1, 1);
    gc_work(c, "work", tess_nn_conv1d_direct_work_size(&d));
    gc_output(c, "out", d.B * tess_nn_conv1d_out_len(&d) * d.OC);
}
static void conv1d_direct_forward(gc_ctx *c) {
    tess_nn_conv1d_dims d = conv1d_dims(c);
    tess_nn_conv1d_direct_forward(gc_x(c, "out"), gc_x(c, "work"), gc_x(c, "in"), gc_x(c, "w"),
                                  gc_has(c, "b") ? gc_x(c, "b") : NULL, &d);
}
static void conv1d_direct_backward(gc_ctx *c) {
    tess_nn_conv1d_dims d = conv1d_dims(c);
    tess_nn_conv1d_direct_backward(gc_g(c, "in"), gc_g(c, "w"),
                                   gc_has(c, "b") ? gc_g(c, "b") : NULL, gc_x(c, "work"),
                                   gc_g(c, "out"), gc_x(c, "in"), gc_x(c, "w"), &d);
}

/* conv1d_patch: the same dims and oracles as conv1d (stride = K, pad 0), the patch kernel */
static void conv1d_patchk_setup(gc_ctx *c) {
    tess_nn_conv1d_dims d = conv1d_dims(c);
    gc_input(c, "in", d.B * d.L * d.C, -1, 1);
    gc_input(c, "w", d.OC * d.C * d.K, -1, 1);
    if (c->dims[7]) gc_input(c, "b", d.OC, -1, 1);
    gc_work(c, "work", tess_nn_conv1d_patch_work_size(&d));
    gc_output(c, "out", d.B * tess_nn_conv1d_out_len(&d) * d.OC);
}
static void conv1d_patchk_forward(gc_ctx *c) {
    tess_nn_conv1d_dims d = conv1d_dims(c);
    tess_nn_conv1d_patch_forward(gc_x(c, "out"), gc_x(c, "work"), gc_x(c, "in"), gc_x(c, "w"),
                                 gc_has(c, "b") ? gc_x(c, "b") : NULL, &d);
}
static void conv1d_patchk_backward(gc_ctx *c) {
    tess_nn_conv1d_dims d = conv1d_dims(c);
    tess_nn_conv1d_patch_backward(gc_g(c, "in"), gc_g(c, "w"),
                                  gc_has(c, "b") ? gc_g(c, "b") : NULL, gc_x(c, "work"),
                                  gc_g(c, "out"), gc_x(c, "in"), gc_x(c, "w"), &d);
}

/* convt1d: dims {B, L, C, OC, K, stride, has_bias}; input (B, L, C), weight (C, OC, K) */
static tess_nn_conv1d_dims convt1d_dims(const gc_ctx *c) {
    return (tess_nn_conv1d_dims){.B = c->dims[0], .L = c->dims[1], .C = c->dims[2],
                                 .OC = c->dims[3], .K = c->dims[4], .stride = c->dims[5]};
}
static void convt1d_setup(gc_ctx *c) {
    tess_nn_conv1d_dims d = convt1d_dims(c);
    gc_input(c, "in", d.B * d.L * d.C, -1, 1);
    gc_input(c, "w", d.C * d.OC * d.K, -1, 1);
    if (c->dims[6]) gc_input(c, "b", d.OC, -1, 1);
    gc_work(c, "col", tess_nn_convt1d_col_size(&d));
    gc_output(c, "out", d.B * tess_nn_convt1d_out_len(&d) * d.OC);
}
static void convt1d_forward(gc_ctx *c) {
    tess_nn_conv1d_dims d = convt1d_dims(c);
    tess_nn_convt1d_forward(gc_x(c, "out"), gc_x(c, "col"), gc_x(c, "in"), gc_x(c, "w"),
                            gc_has(c, "b") ? gc_x(c, "b") : NULL, &d);
}
static void convt1d_forward_ref(gc_ctx *c) {
    tess_nn_conv1d_dims d = convt1d_dims(c);
    tess_nn_convt1d_forward_ref(gc_x(c, "out"), gc_x(c, "in"), gc_x(c, "w"),
                                gc_has(c, "b") ? gc_x(c, "b") : NULL, &d);
}
static void convt1d_backward(gc_ctx *c) {
    tess_nn_conv1d_dims d = convt1d_dims(c);
    tess_nn_convt1d_backward(gc_g(c, "in"), gc_g(c, "w"), gc_has(c, "b") ? gc_g(c, "b") : NULL,
                             gc_x(c, "col"), gc_g(c, "out"), gc_x(c, "in"), gc_x(c, "w"), &d);
}
/* convt1d_patch: the same dims and oracles as convt1d (stride = K), the patch kernel */
static void convt1d_patchk_setup(gc_ctx *c) {
    tess_nn_conv1d_dims d = convt1d_dims(c);
    gc_input(c, "in", d.B * d.L * d.C, -1, 1);
    gc_input(c, "w", d.C * d.OC * d.K, -1, 1);
    if (c->dims[6]) gc_input(c, "b", d.OC, -1, 1);
    gc_work(c, "work", tess_nn_conv1d_patch_work_size(&d));
    gc_output(c, "out", d.B * tess_nn_convt1d_out_len(&d) * d.OC);
}
static void convt1d_patchk_forward(gc_ctx *c) {
    tess_nn_conv1d_dims d = convt1d_dims(c);
    tess_nn_convt1d_patch_forward(gc_x(c, "out"), gc_x(c, "work"), gc_x(c, "in"), gc_x(c, "w"),
                                  gc_has(c, "b") ? gc_x(c, "b") : NULL, &d);
}
static void convt1d_patchk_backward(gc_ctx *c) {
    tess_nn_conv1d_dims d = convt1d_dims(c);
    tess_nn_convt1d_patch_backward(gc_g(c, "in"), gc_g(c, "w"),
                                   gc_has(c, "b") ? gc_g(c, "b") : NULL, gc_x(c, "work"),
                                   gc_g(c, "out"), gc_x(c, "in"), gc_x(c, "w"), &d);
}
static void convt1d_backward_ref(gc_ctx *c) {
    tess_nn_conv1d_dims d = convt1d_dims(c);
    tess_nn_convt1d_backward_ref(gc_g(c, "in"), gc_g(c, "w"), gc_has(c, "b") ? gc_g(c, "b") : NULL,
                                 gc_g(c, "out"), gc_x(c, "in"), gc_x(c, "w"), &d);
}

/* l2norm: dims {N, D}; eps 1e-6 (inputs of order 1 stay far from it) */
static void l2norm_setup(gc_ctx *c) {
    gc_input(c, "in", c->dims[0] * c->dims[1], -1, 1);
    gc_cache(c, "rnorm", c->dims[0]);
    gc_output(c, "out", c->dims[0] * c->dims[1]);
}
static void l2norm_forward(gc_ctx *c) {
    tess_nn_l2norm_forward(gc_x(c, "out"), gc_x(c, "rnorm"), gc_x(c, "in"), c->dims[0],
                           c->dims[1], 1e-6f);
}
static void l2norm_backward(gc_ctx *c) {
    tess_nn_l2norm_backward(gc_g(c, "in"), gc_g(c, "out"), gc_x(c, "out"), gc_x(c, "rnorm"),
                            gc_x(c, "in"), c->dims[0], c->dims[1], 1e-6f);
}

/* codebook (Gumbel-softmax, soft mode, fixed noise): dims {N, K, D}; tau_cos 0.5, tau_g 0.7;
 * "dlog" is a gradient arriving on the logits (the entropy term's path) */
static tess_nn_codebook_dims codebook_dims(const gc_ctx *c) {
    return (tess_nn_codebook_dims){.N = c->dims[0], .K = c->dims[1], .D = c->dims[2],
                                   .tau_cos = 0.5f, .tau_g = 0.7f,
                                   .mode = TESS_NN_CODEBOOK_SOFT};
}
static void codebook_setup(gc_ctx *c) {
    int64_t N = c->dims[0], K = c->dims[1], D = c->dims[2];
    gc_input(c, "z", N * D, -1, 1);
    gc_input(c, "E", K * D, -1, 1);
    gc_const(c, "G", N * K, -1, 2);
    gc_ids(c, "ids", N, 0, 0);
    gc_cache(c, "y", N * K);
    gc_work(c, "work", N * K);
    gc_output(c, "q", N * D);
    gc_output(c, "logits", N * K);
}
static void codebook_forward(gc_ctx *c) {
    tess_nn_codebook_dims d = codebook_dims(c);
    tess_nn_codebook_forward(gc_x(c, "q"), gc_x(c, "logits"), gc_x(c, "y"), gc_i(c, "ids"),
                             gc_x(c, "z"), gc_x(c, "E"), gc_x(c, "G"), &d);
}
static void codebook_forward_ref(gc_ctx *c) {
    tess_nn_codebook_dims d = codebook_dims(c);
    tess_nn_codebook_forward_ref(gc_x(c, "q"), gc_x(c, "logits"), gc_x(c, "y"), gc_i(c, "ids"),
                                 gc_x(c, "z"), gc_x(c, "E"), gc_x(c, "G"), &d);
}
static void codebook_backward(gc_ctx *c) {
    tess_nn_codebook_dims d = codebook_dims(c);
    tess_nn_codebook_backward(gc_g(c, "z"), gc_g(c, "E"), gc_x(c, "work"), gc_g(c, "q"),
                              gc_g(c, "logits"), gc_x(c, "z"), gc_x(c, "E"), gc_x(c, "y"), &d);
}
static void codebook_backward_ref(gc_ctx *c) {
    tess_nn_codebook_dims d = codebook_dims(c);
    tess_nn_codebook_backward_ref(gc_g(c, "z"), gc_g(c, "E"), gc_g(c, "q"), gc_g(c, "logits"),
                                  gc_x(c, "z"), gc_x(c, "E"), gc_x(c, "y"), &d);
}

/* codebook_entropy: dims {N, K}; loss = log K - H(mean_n softmax(logits_n)) */
static void cb_entropy_setup(gc_ctx *c) {
    gc_input(c, "logits", c->dims[0] * c->dims[1], -2, 2);
    gc_cache(c, "p", c->dims[0] * c->dims[1]);
    gc_cache(c, "pbar", c->dims[1]);
    gc_cache(c, "work", c->dims[1]);
    gc_output(c, "loss", 1);
}
static void cb_entropy_forward(gc_ctx *c) {
    gc_x(c, "loss")[0] = (float)tess_nn_codebook_entropy_forward(
        gc_x(c, "p"), gc_x(c, "pbar"), gc_x(c, "logits"), c->dims[0], c->dims[1]);
}
static void cb_entropy_backward(gc_ctx *c) {
    tess_nn_codebook_entropy_backward(gc_g(c, "logits"), gc_x(c, "work"), gc_g(c, "loss")[0],
                                      gc_x(c, "p"), gc_x(c, "pbar"), c->dims[0], c->dims[1]);
}

/* codebook_orth: dims {K, D}; loss = ||E E^T - I||_F^2 / K^2 */
static void cb_orth_setup(gc_ctx *c) {
    gc_input(c, "E", c->dims[0] * c->dims[1], -1, 1);
    gc_cache(c, "gram", c->dims[0] * c->dims[0]);
    gc_work(c, "work", c->dims[0] * c->dims[0]);
    gc_output(c, "loss", 1);
}
static void cb_orth_forward(gc_ctx *c) {
    gc_x(c, "loss")[0] =
        (float)tess_nn_codebook_orth_forward(gc_x(c, "gram"), gc_x(c, "E"), c->dims[0], c->dims[1]);
}
static void cb_orth_forward_ref(gc_ctx *c) {
    gc_x(c, "loss")[0] = (float)tess_nn_codebook_orth_forward_ref(gc_x(c, "E"), c->dims[0], c->dims[1]);
}
static void cb_orth_backward(gc_ctx *c) {
    tess_nn_codebook_orth_backward(gc_g(c, "E"), gc_x(c, "work"), gc_g(c, "loss")[0],
                                   gc_x(c, "gram"), gc_x(c, "E"), c->dims[0], c->dims[1]);
}
static void cb_orth_backward_ref(gc_ctx *c) {
    tess_nn_codebook_orth_backward_ref(gc_g(c, "E"), gc_g(c, "loss")[0], gc_x(c, "E"), c->dims[0],
                                       c->dims[1]);
}

/* codebook_vq_commit: dims {N, K, D}; the commitment loss with the codebook held fixed (the
 * straight-through dq path is not a derivative; tests/nn/test_codebook.c checks it) */
static void cb_vq_setup(gc_ctx *c) {
    int64_t N = c->dims[0], K = c->dims[1], D = c->dims[2];
    gc_input(c, "z", N * D, -1, 1);
    gc_const(c, "E", K * D, -1, 1);
    gc_const(c, "dq0", N * D, 0, 0);
    gc_ids(c, "ids", N, 0, 0);
    gc_cache(c, "q", N * D);
    gc_output(c, "loss", 1);
}
static void cb_vq_forward(gc_ctx *c) {
    gc_x(c, "loss")[0] = (float)tess_nn_codebook_vq_forward(
        gc_x(c, "q"), gc_i(c, "ids"), gc_x(c, "z"), gc_x(c, "E"), c->dims[0], c->dims[1], c->dims[2]);
}
static void cb_vq_backward(gc_ctx *c) {
    tess_nn_codebook_vq_backward(gc_g(c, "z"), gc_x(c, "dq0"), gc_g(c, "loss")[0], gc_x(c, "z"),
                                 gc_x(c, "q"), c->dims[0], c->dims[2]);
}

/* attnpool: dims {G, N, d, masked} (G * N <= 64); masked: member n of group g is padding when
 * (g + n) % 3 == 2 */
static const uint8_t *attnpool_mask(const gc_ctx *c, uint8_t *m) {
    if (!c->dims[3]) return NULL;
    for (int64_t g = 0; g < c->dims[0]; g++)
        for (int64_t n = 0; n < c->dims[1]; n++) m[g * c->dims[1] + n] = (g + n) % 3 != 2;
    return m;
}
static void attnpool_setup(gc_ctx *c) {
    int64_t G = c->dims[0], N = c->dims[1], d = c->dims[2];
    gc_input(c, "h", G * N * d, -1, 1);
    gc_input(c, "q", d, -1, 1);
    gc_cache(c, "a", G * N);
    gc_output(c, "out", G * d);
}
static void attnpool_run_forward(gc_ctx *c, bool ref) {
    uint8_t m[64];
    const uint8_t *mask = attnpool_mask(c, m);
    (ref ? tess_nn_attnpool_forward_ref : tess_nn_attnpool_forward)(
        gc_x(c, "out"), gc_x(c, "a"), gc_x(c, "h"), gc_x(c, "q"), mask, c->dims[0], c->dims[1],
        c->dims[2]);
}
static void attnpool_run_backward(gc_ctx *c, bool ref) {
    (ref ? tess_nn_attnpool_backward_ref : tess_nn_attnpool_backward)(
        gc_g(c, "h"), gc_g(c, "q"), gc_g(c, "out"), gc_x(c, "h"), gc_x(c, "q"), gc_x(c, "a"),
        c->dims[0], c->dims[1], c->dims[2]);
}
static void attnpool_forward(gc_ctx *c) { attnpool_run_forward(c, false); }
static void attnpool_forward_ref(gc_ctx *c) { attnpool_run_forward(c, true); }
static void attnpool_backward(gc_ctx *c) { attnpool_run_backward(c, false); }
static void attnpool_backward_ref(gc_ctx *c) { attnpool_run_backward(c, true); }

/* meanpool: dims {G, N, C, masked} (G * N <= 64), the mask of attnpool; masked = 2 also makes
 * group 0 all padding (it pools to 0 and gets no gradient) */
static void meanpool_setup(gc_ctx *c) {
    gc_input(c, "x", c->dims[0] * c->dims[1] * c->dims[2], -1, 1);
    gc_output(c, "out", c->dims[0] * c->dims[2]);
}
static const uint8_t *meanpool_mask(const gc_ctx *c, uint8_t *m) {
    const uint8_t *mask = attnpool_mask(c, m);
    for (int64_t n = 0; c->dims[3] == 2 && n < c->dims[1]; n++) m[n] = 0;
    return mask;
}
static void meanpool_run_forward(gc_ctx *c, bool ref) {
    uint8_t m[64];
    (ref ? tess_nn_meanpool_forward_ref : tess_nn_meanpool_forward)(
        gc_x(c, "out"), gc_x(c, "x"), meanpool_mask(c, m), c->dims[0], c->dims[1], c->dims[2]);
}
static void meanpool_run_backward(gc_ctx *c, bool ref) {
    uint8_t m[64];
    (ref ? tess_nn_meanpool_backward_ref : tess_nn_meanpool_backward)(
        gc_g(c, "x"), gc_g(c, "out"), meanpool_mask(c, m), c->dims[0], c->dims[1], c->dims[2]);
}
static void meanpool_forward(gc_ctx *c) { meanpool_run_forward(c, false); }
static void meanpool_forward_ref(gc_ctx *c) { meanpool_run_forward(c, true); }
static void meanpool_backward(gc_ctx *c) { meanpool_run_backward(c, false); }
static void meanpool_backward_ref(gc_ctx *c) { meanpool_run_backward(c, true); }

/* THE TABLE. Append rows at the end; keep shapes small (FD costs 2 forwards per input element). */
/* ---- graph rows: one fixed batch of two graphs, 8 nodes, with an isolated node ----
 * graph 0 (5 nodes): edges 0-1, 1-2, 2-0, 2-3, 3-4; graph 1 (3 nodes): edge 0-1, node 2
 * isolated (batch node 7). The rows' dims[0] is N = 8. */
static tess_graph_batch gc_gb;
static void gc_graph_setup(gc_ctx *c) {
    static int64_t node_ptr[] = {0, 5, 8}, edge_ptr[] = {0, 10, 12};
    static int64_t indptr[] = {0, 2, 4, 7, 9, 10, 11, 12, 12};
    static int32_t indices[] = {1, 2, 0, 2, 0, 1, 3, 2, 4, 3, 1, 0};
    tess_graphs gs = {.num_graphs = 2, .num_nodes = 8, .nnz = 12, .node_ptr = node_ptr,
                      .edge_ptr = edge_ptr, .indptr = indptr, .indices = indices};
    const int64_t ids[] = {0, 1};
    if (c->dims[0] != 8 || tess_graph_batch_build(&gc_gb, &gs, ids, 2) != TESS_OK)
        gc_die("graph batch (N must be 8) in row with dims[0] =", "8");
}
static void gc_graph_teardown(gc_ctx *c) {
    (void)c;
    tess_graph_batch_free(&gc_gb);
}
/* The matrix a graph row multiplies by: dims[2] 0 = A, 1 = A-hat, 2 = A-hat2. */
static tess_csr gc_graph_mat(const gc_ctx *c, int which) {
    return which == 0 ? tess_graph_batch_adj(&gc_gb)
           : which == 1 ? tess_graph_batch_ahat(&gc_gb) : tess_graph_batch_ahat2(&gc_gb);
}

/* spmm: dims {N, F, matrix}: out = M x, and (second output) out_t = M^T x2 accumulated onto 0 */
static void spmm_setup(gc_ctx *c) {
    gc_graph_setup(c);
    const int64_t N = c->dims[0], F = c->dims[1];
    gc_input(c, "x", N * F, -1, 1);
    gc_output(c, "out", N * F);
}
static void spmm_run_forward(gc_ctx *c, bool ref) {
    tess_csr M = gc_graph_mat(c, (int)c->dims[2]);
    (ref ? tess_csr_spmm_ref : tess_csr_spmm)(gc_x(c, "out"), &M, gc_x(c, "x"), c->dims[1], 1.0f,
                                              0.0f);
}
static void spmm_run_backward(gc_ctx *c, bool ref) {
    tess_csr M = gc_graph_mat(c, (int)c->dims[2]);
    (ref ? tess_csr_spmm_t_ref : tess_csr_spmm_t)(gc_g(c, "x"), &M, gc_g(c, "out"), c->dims[1]);
}
static void spmm_forward(gc_ctx *c) { spmm_run_forward(c, false); }
static void spmm_forward_ref(gc_ctx *c) { spmm_run_forward(c, true); }
static void spmm_backward(gc_ctx *c) { spmm_run_backward(c, false); }
static void spmm_backward_ref(gc_ctx *c) { spmm_run_backward(c, true); }

/* segment_sum: dims {N, F}: out (G,F) = per-graph sums of x (N,F) over the batch's node->graph */
static void segsum_setup(gc_ctx *c) {
    gc_graph_setup(c);
    gc_input(c, "x", c->dims[0] * c->dims[1], -1, 1);
    gc_output(c, "out", gc_gb.num_graphs * c->dims[1]);
}
static void segsum_forward(gc_ctx *c) {
    tess_segment_sum(gc_x(c, "out"), gc_x(c, "x"), gc_gb.graph_of, c->dims[0], gc_gb.num_graphs,
                     c->dims[1]);
}
static void segsum_forward_ref(gc_ctx *c) {
    tess_segment_sum_ref(gc_x(c, "out"), gc_x(c, "x"), gc_gb.graph_of, c->dims[0],
                         gc_gb.num_graphs, c->dims[1]);
}
static void segsum_backward(gc_ctx *c) {
    tess_segment_sum_backward(gc_g(c, "x"), gc_g(c, "out"), gc_gb.graph_of, c->dims[0],
                              c->dims[1]);
}

/* gin: dims {N, C, H, OC}; eps 0.25 (a fixed constant), A the pattern */
#define GC_GIN_EPS 0.25f
static void gin_setup(gc_ctx *c) {
    gc_graph_setup(c);
    const int64_t N = c->dims[0], C = c->dims[1], H = c->dims[2], OC = c->dims[3];
    gc_input(c, "x", N * C, -1, 1);
    gc_input(c, "w1", H * C, -1, 1);
    gc_input(c, "b1", H, -0.5, 0.5);
    gc_input(c, "w2", OC * H, -1, 1);
    gc_input(c, "b2", OC, -1, 1);
    gc_cache(c, "m", N * C);
    gc_cache(c, "c", N * H);
    gc_cache(c, "r", N * H);
    gc_work(c, "scratch", tess_nn_gin_scratch_size(N, C, H));
    gc_output(c, "out", N * OC);
}
static void gin_run_forward(gc_ctx *c, bool ref) {
    tess_csr A = tess_graph_batch_adj(&gc_gb);
    (ref ? tess_nn_gin_forward_ref : tess_nn_gin_forward)(
        gc_x(c, "out"), gc_x(c, "m"), gc_x(c, "c"), gc_x(c, "r"), gc_x(c, "x"), &A, GC_GIN_EPS,
        gc_x(c, "w1"), gc_x(c, "b1"), gc_x(c, "w2"), gc_x(c, "b2"), c->dims[0], c->dims[1],
        c->dims[2], c->dims[3]);
}
static void gin_forward(gc_ctx *c) { gin_run_forward(c, false); }
static void gin_forward_ref(gc_ctx *c) { gin_run_forward(c, true); }
static void gin_backward(gc_ctx *c) {
    tess_csr A = tess_graph_batch_adj(&gc_gb);
    tess_nn_gin_backward(gc_g(c, "x"), gc_g(c, "w1"), gc_g(c, "b1"), gc_g(c, "w2"), gc_g(c, "b2"),
                         gc_x(c, "scratch"), gc_g(c, "out"), &A, GC_GIN_EPS, gc_x(c, "w1"),
                         gc_x(c, "w2"), gc_x(c, "m"), gc_x(c, "c"), gc_x(c, "r"), c->dims[0],
                         c->dims[1], c->dims[2], c->dims[3]);
}
static void gin_backward_ref(gc_ctx *c) {
    tess_csr A = tess_graph_batch_adj(&gc_gb);
    tess_nn_gin_backward_ref(gc_g(c, "x"), gc_g(c, "w1"), gc_g(c, "b1"), gc_g(c, "w2"),
                             gc_g(c, "b2"), gc_g(c, "out"), &A, GC_GIN_EPS, gc_x(c, "w1"),
                             gc_x(c, "w2"), gc_x(c, "m"), gc_x(c, "c"), gc_x(c, "r"), c->dims[0],
                             c->dims[1], c->dims[2], c->dims[3]);
}

/* gin2: dims {N, C1, C2, H, OC}: the GIN over [x1 | x2] computed transform first, against the
 * concatenating reference; eps and A as gin */
static void gin2_setup(gc_ctx *c) {
    gc_graph_setup(c);
    const int64_t N = c->dims[0], C1 = c->dims[1], C2 = c->dims[2], H = c->dims[3],
                  OC = c->dims[4];
    gc_input(c, "x1", N * C1, -1, 1);
    gc_input(c, "x2", N * C2, -1, 1);
    gc_input(c, "w1", H * (C1 + C2), -1, 1);
    gc_input(c, "b1", H, -0.5, 0.5);
    gc_input(c, "w2", OC * H, -1, 1);
    gc_input(c, "b2", OC, -1, 1);
    gc_cache(c, "y", N * H);
    gc_cache(c, "c", N * H);
    gc_cache(c, "r", N * H);
    gc_work(c, "scratch", tess_nn_gin2_scratch_size(N, H));
    gc_output(c, "out", N * OC);
}
static void gin2_run_forward(gc_ctx *c, bool ref) {
    tess_csr A = tess_graph_batch_adj(&gc_gb);
    (ref ? tess_nn_gin2_forward_ref : tess_nn_gin2_forward)(
        gc_x(c, "out"), gc_x(c, "y"), gc_x(c, "c"), gc_x(c, "r"), gc_x(c, "x1"), gc_x(c, "x2"),
        &A, GC_GIN_EPS, gc_x(c, "w1"), gc_x(c, "b1"), gc_x(c, "w2"), gc_x(c, "b2"), c->dims[0],
        c->dims[1], c->dims[2], c->dims[3], c->dims[4]);
}
static void gin2_forward(gc_ctx *c) { gin2_run_forward(c, false); }
static void gin2_forward_ref(gc_ctx *c) { gin2_run_forward(c, true); }
static void gin2_backward(gc_ctx *c) {
    tess_csr A = tess_graph_batch_adj(&gc_gb);
    tess_nn_gin2_backward(gc_g(c, "x1"), gc_g(c, "x2"), gc_g(c, "w1"), gc_g(c, "b1"),
                          gc_g(c, "w2"), gc_g(c, "b2"), gc_x(c, "scratch"), gc_g(c, "out"), &A,
                          GC_GIN_EPS, gc_x(c, "w1"), gc_x(c, "w2"), gc_x(c, "x1"), gc_x(c, "x2"),
                          gc_x(c, "c"), gc_x(c, "r"), c->dims[0], c->dims[1], c->dims[2],
                          c->dims[3], c->dims[4]);
}
static void gin2_backward_ref(gc_ctx *c) {
    tess_csr A = tess_graph_batch_adj(&gc_gb);
    tess_nn_gin2_backward_ref(gc_g(c, "x1"), gc_g(c, "x2"), gc_g(c, "w1"), gc_g(c, "b1"),
                              gc_g(c, "w2"), gc_g(c, "b2"), gc_g(c, "out"), &A, GC_GIN_EPS,
                              gc_x(c, "w1"), gc_x(c, "w2"), gc_x(c, "x1"), gc_x(c, "x2"),
                              gc_x(c, "c"), gc_x(c, "r"), c->dims[0], c->dims[1], c->dims[2],
                              c->dims[3], c->dims[4]);
}

/* gcn_tanh: dims {N, C, OC}: out = tanh((A-hat s) w^T + b) */
static void gcn_setup(gc_ctx *c) {
    gc_graph_setup(c);
    const int64_t N = c->dims[0], C = c->dims[1], OC = c->dims[2];
    gc_input(c, "s", N * C, -1, 1);
    gc_input(c, "w", OC * C, -1, 1);
    gc_input(c, "b", OC, -0.5, 0.5);
    gc_cache(c, "u", N * C);
    gc_work(c, "scratch", tess_nn_gcn_scratch_size(N, C, OC));
    gc_output(c, "out", N * OC);
}
static void gcn_run_forward(gc_ctx *c, bool ref) {
    tess_csr Ah = tess_graph_batch_ahat(&gc_gb);
    (ref ? tess_nn_gcn_tanh_forward_ref : tess_nn_gcn_tanh_forward)(
        gc_x(c, "out"), gc_x(c, "u"), gc_x(c, "s"), &Ah, gc_x(c, "w"), gc_x(c, "b"), c->dims[0],
        c->dims[1], c->dims[2]);
}
static void gcn_forward(gc_ctx *c) { gcn_run_forward(c, false); }
static void gcn_forward_ref(gc_ctx *c) { gcn_run_forward(c, true); }
static void gcn_backward(gc_ctx *c) {
    tess_csr Ah = tess_graph_batch_ahat(&gc_gb);
    tess_nn_gcn_tanh_backward(gc_g(c, "s"), gc_g(c, "w"), gc_g(c, "b"), gc_x(c, "scratch"),
                              gc_g(c, "out"), gc_x(c, "out"), gc_x(c, "u"), &Ah, gc_x(c, "w"),
                              c->dims[0], c->dims[1], c->dims[2]);
}
static void gcn_backward_ref(gc_ctx *c) {
    tess_csr Ah = tess_graph_batch_ahat(&gc_gb);
    tess_nn_gcn_tanh_backward_ref(gc_g(c, "s"), gc_g(c, "w"), gc_g(c, "b"), gc_g(c, "out"),
                                  gc_x(c, "out"), gc_x(c, "u"), &Ah, gc_x(c, "w"), c->dims[0],
                                  c->dims[1], c->dims[2]);
}

/* relu_dropout: dims {n, with_mask}; mask entries 0 or 2 (p = 0.5) */
static void relu_dropout_setup(gc_ctx *c) {
    float *x = gc_input(c, "x", c->dims[0], -1, 1);
    for (int64_t i = 0; i < c->dims[0]; i++) {
        if (fabsf(x[i]) < 0.05f) x[i] = 0.3f; /* away from the kink */
    }
    if (c->dims[1]) {
        float *m = gc_const(c, "mask", c->dims[0], 0, 1);
        for (int64_t i = 0; i < c->dims[0]; i++) m[i] = m[i] < 0.5f ? 0.0f : 2.0f;
    }
    gc_output(c, "out", c->dims[0]);
}
static void relu_dropout_forward(gc_ctx *c) {
    tess_nn_relu_dropout_forward(gc_x(c, "out"), gc_x(c, "x"),
                                 gc_has(c, "mask") ? gc_x(c, "mask") : NULL, c->dims[0]);
}
static void relu_dropout_backward(gc_ctx *c) {
    tess_nn_relu_dropout_backward(gc_g(c, "x"), gc_g(c, "out"), gc_x(c, "x"),
                                  gc_has(c, "mask") ? gc_x(c, "mask") : NULL, c->dims[0]);
}

/* kalter: dims {N, dh, d, dm, with_mask, linear}; eps 0.25, r_min 1e-4; linear: the
 * linear-transition ablation (no tanh, g = 1). The reference is the float64
 * one (tess_nn_kalter_*_ref): the row converts every buffer to double and back. kinks is off:
 * no step of these draws crosses a ReLU kink (one that did would fail the FD check); the kink
 * filter would instead skip components whose gradient is small against the curvature of tanh
 * and softplus. The float64 finite-difference check at step 1e-6 is tests/nn/test_kalter.c. */
static tess_nn_kalter_dims kalter_dims(const gc_ctx *c) {
    return (tess_nn_kalter_dims){.N = c->dims[0], .dh = c->dims[1], .d = c->dims[2],
                                 .dm = c->dims[3], .eps = GC_GIN_EPS, .r_min = 1e-4f,
                                 .linear = c->dims[5] != 0};
}
static const char *const kalter_pnames[10] = {"w_a", "b_a", "q", "eta", "w1",
                                              "b1",  "w2",  "b2", "w_r", "b_r"};
static void kalter_setup(gc_ctx *c) {
    gc_graph_setup(c);
    tess_nn_kalter_dims d = kalter_dims(c);
    const int64_t N = d.N, D = d.d, dx = d.dh + d.d;
    gc_input(c, "h", N * d.dh, -1, 1);
    gc_input(c, "s", N * D, -1, 1);
    gc_input(c, "P", N * D, 0.2, 1.5);
    gc_input(c, "w_a", D * D, -1, 1);
    gc_input(c, "b_a", D, -0.5, 0.5);
    gc_input(c, "q", D, -1, 1);
    gc_input(c, "eta", D, 0.5, 1.5);
    gc_input(c, "w1", d.dm * dx, -1, 1);
    gc_input(c, "b1", d.dm, -0.5, 0.5);
    gc_input(c, "w2", D * d.dm, -1, 1);
    gc_input(c, "b2", D, -0.5, 0.5);
    gc_input(c, "w_r", D * d.dh, -1, 1);
    gc_input(c, "b_r", D, -1, 1);
    if (c->dims[4]) {
        float *m = gc_const(c, "mask", N * D, 0, 1);
        for (int64_t i = 0; i < N * D; i++) m[i] = m[i] < 0.5f ? 0.0f : 2.0f;
    }
    gc_cache(c, "cache", tess_nn_kalter_cache_size(&d));
    gc_work(c, "scratch", tess_nn_kalter_scratch_size(&d));
    gc_output(c, "s_out", N * D);
    gc_output(c, "p_out", N * D);
    gc_output(c, "h_out", N * D);
}
static tess_nn_kalter_params kalter_params(gc_ctx *c, bool grads) {
    float *v[10];
    for (int i = 0; i < 10; i++) v[i] = grads ? gc_g(c, kalter_pnames[i]) : gc_x(c, kalter_pnames[i]);
    return (tess_nn_kalter_params){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]};
}
static const float *kalter_mask(gc_ctx *c) { return gc_has(c, "mask") ? gc_x(c, "mask") : NULL; }
static void kalter_forward(gc_ctx *c) {
    tess_nn_kalter_dims d = kalter_dims(c);
    tess_csr A = tess_graph_batch_adj(&gc_gb), Ah = tess_graph_batch_ahat(&gc_gb),
             Ah2 = tess_graph_batch_ahat2(&gc_gb);
    tess_nn_kalter_params p = kalter_params(c, false);
    tess_nn_kalter_forward(gc_x(c, "s_out"), gc_x(c, "p_out"), gc_x(c, "h_out"),
                           gc_x(c, "cache"), gc_x(c, "h"), gc_x(c, "s"), gc_x(c, "P"), &A, &Ah,
                           &Ah2, kalter_mask(c), &p, &d);
}
static void kalter_backward(gc_ctx *c) {
    tess_nn_kalter_dims d = kalter_dims(c);
    tess_csr A = tess_graph_batch_adj(&gc_gb), Ah = tess_graph_batch_ahat(&gc_gb),
             Ah2 = tess_graph_batch_ahat2(&gc_gb);
    tess_nn_kalter_params p = kalter_params(c, false), g = kalter_params(c, true);
    tess_nn_kalter_backward(gc_g(c, "h"), gc_g(c, "s"), gc_g(c, "P"), &g, gc_x(c, "scratch"),
                            gc_g(c, "s_out"), gc_g(c, "p_out"), gc_g(c, "h_out"), gc_x(c, "h"),
                            gc_x(c, "cache"), &A, &Ah, &Ah2, kalter_mask(c), &p, &d);
}
/* A double copy of a float buffer's value (grad false) or gradient (grad true); NULL if absent. */
static double *gc_to_f64(gc_ctx *c, const char *name, bool grad) {
    gc_buf *b = gc_find(c, name);
    if (!b) return NULL;
    double *out = calloc((size_t)b->n + 1, sizeof(double));
    if (!out) gc_die("out of memory for", name);
    for (int64_t i = 0; i < b->n; i++) out[i] = grad ? b->g[i] : b->x[i];
    return out;
}
static void kalter_ref(gc_ctx *c, bool backward) {
    tess_nn_kalter_dims d = kalter_dims(c);
    tess_csr A = tess_graph_batch_adj(&gc_gb), Ah = tess_graph_batch_ahat(&gc_gb),
             Ah2 = tess_graph_batch_ahat2(&gc_gb);
    const char *io[3] = {"h", "s", "P"}, *outs[3] = {"s_out", "p_out", "h_out"};
    double *x[3], *gx[3], *pv[10], *pg[10], *o[3], *mask = gc_to_f64(c, "mask", false);
    for (int i = 0; i < 3; i++) {
        x[i] = gc_to_f64(c, io[i], false);
        gx[i] = calloc((size_t)gc_find(c, io[i])->n + 1, sizeof(double));
        o[i] = gc_to_f64(c, outs[i], backward); /* forward: output space; backward: dout */
    }
    for (int i = 0; i < 10; i++) {
        pv[i] = gc_to_f64(c, kalter_pnames[i], false);
        pg[i] = calloc((size_t)gc_find(c, kalter_pnames[i])->n + 1, sizeof(double));
    }
    tess_nn_kalter_params_f64 p = {pv[0], pv[1], pv[2], pv[3], pv[4],
                                   pv[5], pv[6], pv[7], pv[8], pv[9]};
    tess_nn_kalter_params_f64 g = {pg[0], pg[1], pg[2], pg[3], pg[4],
                                   pg[5], pg[6], pg[7], pg[8], pg[9]};
    if (!backward) {
        tess_nn_kalter_forward_ref(o[0], o[1], o[2], x[0], x[1], x[2], &A, &Ah, &Ah2, mask, &p, &d);
        for (int i = 0; i < 3; i++) {
            gc_buf *b = gc_find(c, outs[i]);
            for (int64_t e = 0; e < b->n; e++) b->x[e] = (float)o[i][e];
        }
    } else {
        tess_nn_kalter_backward_ref(gx[0], gx[1], gx[2], &g, o[0], o[1], o[2], x[0], x[1], x[2],
                                    &A, &Ah, &Ah2, mask, &p, &d);
        for (int i = 0; i < 13; i++) {
            gc_buf *b = gc_find(c, i < 3 ? io[i] : kalter_pnames[i - 3]);
            const double *src = i < 3 ? gx[i] : pg[i - 3];
            for (int64_t e = 0; e < b->n; e++) b->g[e] += (float)src[e];
        }
    }
    for (int i = 0; i < 3; i++) free(x[i]), free(gx[i]), free(o[i]);
    for (int i = 0; i < 10; i++) free(pv[i]), free(pg[i]);
    free(mask);
}
static void kalter_forward_ref(gc_ctx *c) { kalter_ref(c, false); }
static void kalter_backward_ref(gc_ctx *c) { kalter_ref(c, true); }

static const gc_row gc_rows[] = {
    {"linear", {5, 7, 4, 1}, linear_setup, linear_forward, linear_backward, linear_forward_ref,
     linear_backward_ref, 0, false, NULL, NULL},
    {"linear_nobias", {3, 9, 6, 0}, linear_setup, linear_forward, linear_backward,
     linear_forward_ref, linear_backward_ref, 0, false, NULL, NULL},
    {"linear_tiles", {13, 7, 20, 1}, linear_setup, linear_tiles_forward, linear_tiles_backward,
     linear_forward_ref, linear_backward_ref, 0, false, NULL, NULL},
    {"linear_tiles_nobias", {5, 17, 3, 0}, linear_setup, linear_tiles_forward,
     linear_tiles_backward, linear_forward_ref, linear_backward_ref, 0, false, NULL, NULL},
    {"embedding", {9, 5, 4}, embedding_setup, embedding_forward, embedding_backward, NULL, NULL,
     0, false, NULL, NULL},
    {"rmsnorm", {4, 11}, rmsnorm_setup, rmsnorm_forward, rmsnorm_backward, rmsnorm_forward_ref,
     rmsnorm_backward_ref, 0, false, NULL, NULL},
    {"layernorm", {4, 11, 1}, layernorm_setup, layernorm_forward, layernorm_backward,
     layernorm_forward_ref, layernorm_backward_ref, 0, false, NULL, NULL},
    {"layernorm_nobias", {3, 8, 0}, layernorm_setup, layernorm_forward, layernorm_backward,
     layernorm_forward_ref, layernorm_backward_ref, 0, false, NULL, NULL},
    {"crossentropy", {5, 7}, crossentropy_setup, crossentropy_forward, crossentropy_backward, NULL,
     NULL, 0, false, NULL, NULL},
    {"mse", {13}, mse_setup, mse_forward, mse_backward, NULL, NULL, 0, false, NULL, NULL},
    {"gelu", {37}, act_setup, gelu_forward, gelu_backward, NULL, NULL, 0, false, NULL, NULL},
    {"silu", {37}, act_setup, silu_forward, silu_backward, NULL, NULL, 0, false, NULL, NULL},
    {"residual_add", {17}, residual_setup, residual_forward, residual_backward, NULL, NULL, 0,
     false, NULL, NULL},
    {"attention_causal", {2, 5, 8, 2, 1, 0}, attention_setup, attention_forward,
     attention_backward, attention_forward_ref, attention_backward_ref, 0, false, NULL, NULL},
    {"attention_bidir_rope", {1, 6, 12, 2, 0, 1}, attention_setup, attention_forward,
     attention_backward, attention_forward_ref, attention_backward_ref, 0, false, NULL, NULL},
    {"attention_causal_rope_blocks", {1, 67, 4, 2, 1, 1}, attention_setup, attention_forward,
     attention_backward, attention_forward_ref, attention_backward_ref, 0, false, NULL, NULL},
    {"attention_causal_mask", {2, 5, 8, 2, 1, 1, 1}, attention_setup, attention_forward,
     attention_backward, attention_forward_ref, attention_backward_ref, 0, false, NULL, NULL},
    {"attention_bidir_rope_mask", {3, 6, 12, 2, 0, 1, 2}, attention_setup, attention_forward,
     attention_backward, attention_forward_ref, attention_backward_ref, 0, false, NULL, NULL},
    {"attention_causal_mask_blocks", {1, 67, 4, 2, 1, 1, 1}, attention_setup, attention_forward,
     attention_backward, attention_forward_ref, attention_backward_ref, 0, false, NULL, NULL},
    /* T and hs multiples of 8 with T <= 64: the short path (tess_matmul_small) */
    {"attention_causal_rope_short", {2, 16, 16, 2, 1, 1, 1}, attention_setup, attention_forward,
     attention_backward, attention_forward_ref, attention_backward_ref, 0, false, NULL, NULL},
    {"attention_bidir_short", {2, 8, 16, 2, 0, 0, 2}, attention_setup, attention_forward,
     attention_backward, attention_forward_ref, attention_backward_ref, 0, false, NULL, NULL},
    /* bidirectional, 64 < T <= 512, T and hs multiples of 8: the wide path (tess_matmul_small's
     * 16-lane tiles, when compiled in) */
    {"attention_bidir_wide", {2, 72, 16, 2, 0, 0, 2}, attention_setup, attention_forward,
     attention_backward, attention_forward_ref, attention_backward_ref, 0, false, NULL, NULL},
    {"attention_bidir_rope_wide", {1, 80, 16, 1, 0, 1, 0}, attention_setup, attention_forward,
     attention_backward, attention_forward_ref, attention_backward_ref, 0, false, NULL, NULL},
    {"mlp_gelu", {4, 6, 10, 1}, mlp_gelu_setup, mlp_gelu_forward, mlp_gelu_backward,
     mlp_gelu_forward_ref, mlp_gelu_backward_ref, 0, false, NULL, NULL},
    {"mlp_gelu_nobias", {3, 5, 7, 0}, mlp_gelu_setup, mlp_gelu_forward, mlp_gelu_backward,
     mlp_gelu_forward_ref, mlp_gelu_backward_ref, 0, false, NULL, NULL},
    {"mlp_swiglu", {4, 6, 10}, mlp_swiglu_setup, mlp_swiglu_forward, mlp_swiglu_backward,
     mlp_swiglu_forward_ref, mlp_swiglu_backward_ref, 0, false, NULL, NULL},
    {"permute_0213", {2, 3, 5, 4}, permute_setup, permute_forward, permute_backward,
     permute_forward_ref, permute_backward_ref, 0, false, NULL, NULL},
    {"permute_0213_tiles", {1, 19, 17, 1}, permute_setup, permute_forward, permute_backward,
     permute_forward_ref, permute_backward_ref, 0, false, NULL, NULL},
    {"blocks_two_axes", {2, 3, 4, 4, 2, 0}, blocks_setup, blocks_forward, blocks_backward,
     blocks_forward_ref, blocks_backward_ref, 0, false, blocks_teardown, NULL},
    {"blocks_two_axes_ln_gelu", {1, 3, 3, 4, 2, 1}, blocks_setup, blocks_forward, blocks_backward,
     blocks_forward_ref, blocks_backward_ref, 0, false, blocks_teardown, NULL},
    /* MoE (nn/moe.h): gates and mass {N,E,k,score}; LB {N,E,k}; z-loss {N,E}; R_cp {N,E,k};
     * R_sp through SwiGLU {N,k,C,F,phi}; two coupled layers {N,C,F,E,k,shared_F,variant};
     * Guo et al.'s orthogonality {N,k,C,dropped} and variance {N,E} */
    {"moe_gates", {7, 6, 2, TESS_NN_MOE_SCORE_SOFTMAX}, moe_gates_setup, moe_gates_forward,
     moe_gates_backward, moe_gates_forward_ref, NULL, 0, true, NULL, NULL},
    {"moe_gates_k3", {5, 8, 3, TESS_NN_MOE_SCORE_SOFTMAX}, moe_gates_setup, moe_gates_forward,
     moe_gates_backward, moe_gates_forward_ref, NULL, 0, true, NULL, NULL},
    {"moe_gates_sigmoid", {7, 6, 2, TESS_NN_MOE_SCORE_SIGMOID}, moe_gates_setup,
     moe_gates_forward, moe_gates_backward, moe_gates_forward_ref, NULL, 0, true, NULL, NULL},
    {"moe_lb", {9, 5, 2}, moe_lb_setup, moe_lb_forward, moe_lb_backward, NULL, NULL, 0, false,
     NULL, NULL},
    {"moe_zloss", {6, 7}, moe_zloss_setup, moe_zloss_forward, moe_zloss_backward, NULL, NULL, 0,
     false, NULL, NULL},
    {"moe_rcp", {8, 6, 2}, moe_rcp_setup, moe_rcp_forward, moe_rcp_backward, NULL, NULL, 0, true,
     NULL, NULL},
    {"moe_rcp_id", {8, 6, 2}, moe_rcp_id_setup, moe_rcp_id_forward, moe_rcp_id_backward, NULL,
     NULL, 0, true, NULL, NULL},
    {"moe_rcp_id_k3", {5, 7, 3}, moe_rcp_id_setup, moe_rcp_id_forward, moe_rcp_id_backward, NULL,
     NULL, 0, true, NULL, NULL},
    {"moe_rsp_swiglu_sq", {5, 2, 4, 6, TESS_NN_MOE_PHI_SQ}, moe_rsp_setup, moe_rsp_forward,
     moe_rsp_backward, moe_rsp_forward_ref, moe_rsp_backward_ref, 0, false, NULL, NULL},
    {"moe_rsp_swiglu_k3_signed", {3, 3, 4, 5, TESS_NN_MOE_PHI_SIGNED}, moe_rsp_setup,
     moe_rsp_forward, moe_rsp_backward, moe_rsp_forward_ref, moe_rsp_backward_ref, 0, false,
     NULL, NULL},
    {"moe_rsp_split_k3_sq", {5, 3, 4, 5, TESS_NN_MOE_PHI_SQ, 1}, moe_rsp_setup, moe_rsp_forward,
     moe_rsp_backward, moe_rsp_forward_ref, moe_rsp_backward_ref, 0, false, NULL, NULL},
    {"moe_layers", {6, 8, 6, 4, 2, 0}, moe_layers_setup, moe_layers_forward, moe_layers_backward,
     moe_layers_forward_ref, NULL, 0, true, moe_layers_teardown, NULL},
    {"moe_layers_shared", {6, 8, 6, 4, 2, 5}, moe_layers_setup, moe_layers_forward,
     moe_layers_backward, moe_layers_forward_ref, NULL, 0, true, moe_layers_teardown, NULL},
    {"moe_layers_sigmoid_cap_probs_pad", {8, 8, 6, 4, 2, 0, 1}, moe_layers_setup,
     moe_layers_forward, moe_layers_backward, moe_layers_forward_ref, NULL, 0, true,
     moe_layers_teardown, NULL},
    {"moe_layers_guo_ov", {9, 8, 6, 4, 2, 0, 3}, moe_layers_setup, moe_layers_forward,
     moe_layers_backward, moe_layers_forward_ref, NULL, 0, true, moe_layers_teardown, NULL},
    /* (the name keys the draws: "moe_layers_cp_detach" drew a point where R_sp's curvature put
     * the h = 1e-2 difference of m1.w_up 2.5e-3 off, at every N tried) */
    {"moe_layers_detached_cp", {9, 8, 6, 4, 2, 0, 4}, moe_layers_setup, moe_layers_forward,
     moe_layers_backward, moe_layers_forward_ref, NULL, 0, true, moe_layers_teardown, NULL},
    {"moe_layers_identity_cp", {9, 8, 6, 4, 2, 0, 5}, moe_layers_setup, moe_layers_forward,
     moe_layers_backward, moe_layers_forward_ref, NULL, 0, true, moe_layers_teardown, NULL},
    {"moe_ortho_k2", {5, 2, 4, 0}, moe_ortho_setup, moe_ortho_forward, moe_ortho_backward,
     moe_ortho_forward_ref, NULL, 0, false, NULL, NULL},
    {"moe_ortho_k4_dropped", {3, 4, 6, 1}, moe_ortho_setup, moe_ortho_forward, moe_ortho_backward,
     moe_ortho_forward_ref, NULL, 0, false, NULL, NULL},
    {"moe_variance", {6, 5}, moe_variance_setup, moe_variance_forward, moe_variance_backward, NULL,
     NULL, 0, false, NULL, NULL},
    {"moe_layers_cap_position_jitter", {9, 8, 6, 4, 2, 0, 2}, moe_layers_setup,
     moe_layers_forward, moe_layers_backward, moe_layers_forward_ref, NULL, 0, true,
     moe_layers_teardown, NULL},
    {"spmm_adj", {8, 3, 0}, spmm_setup, spmm_forward, spmm_backward, spmm_forward_ref,
     spmm_backward_ref, 0, false, gc_graph_teardown, NULL},
    {"spmm_ahat", {8, 4, 1}, spmm_setup, spmm_forward, spmm_backward, spmm_forward_ref,
     spmm_backward_ref, 0, false, gc_graph_teardown, NULL},
    {"spmm_ahat2", {8, 2, 2}, spmm_setup, spmm_forward, spmm_backward, spmm_forward_ref,
     spmm_backward_ref, 0, false, gc_graph_teardown, NULL},
    {"segment_sum", {8, 3}, segsum_setup, segsum_forward, segsum_backward, segsum_forward_ref,
     NULL, 0, false, gc_graph_teardown, NULL},
    {"gin", {8, 3, 5, 4}, gin_setup, gin_forward, gin_backward, gin_forward_ref,
     gin_backward_ref, 0, true, gc_graph_teardown, NULL},
    {"gin2", {8, 3, 2, 5, 4}, gin2_setup, gin2_forward, gin2_backward, gin2_forward_ref,
     gin2_backward_ref, 0, true, gc_graph_teardown, NULL},
    {"gcn_tanh", {8, 4, 3}, gcn_setup, gcn_forward, gcn_backward, gcn_forward_ref,
     gcn_backward_ref, 0, false, gc_graph_teardown, NULL},
    {"relu_dropout", {23, 0}, relu_dropout_setup, relu_dropout_forward, relu_dropout_backward,
     NULL, NULL, 0, false, NULL, NULL},
    {"relu_dropout_mask", {23, 1}, relu_dropout_setup, relu_dropout_forward,
     relu_dropout_backward, NULL, NULL, 0, false, NULL, NULL},
    {"kalter", {8, 2, 3, 4, 0}, kalter_setup, kalter_forward, kalter_backward, kalter_forward_ref,
     kalter_backward_ref, 0, false, gc_graph_teardown, NULL},
    {"kalter_dropout", {8, 3, 4, 5, 1}, kalter_setup, kalter_forward, kalter_backward,
     kalter_forward_ref, kalter_backward_ref, 0, false, gc_graph_teardown, NULL},
    {"kalter_linear", {8, 2, 3, 4, 1, 1}, kalter_setup, kalter_forward, kalter_backward,
     kalter_forward_ref, kalter_backward_ref, 0, false, gc_graph_teardown, NULL},
    {"conv1d_causal", {2, 7, 3, 4, 5, 1, 4, 1}, conv1d_setup, conv1d_forward, conv1d_backward,
     conv1d_forward_ref, conv1d_backward_ref, 0, false, NULL, NULL},
    {"conv1d_patch", {2, 8, 3, 4, 4, 4, 0, 1}, conv1d_setup, conv1d_forward, conv1d_backward,
     conv1d_forward_ref, conv1d_backward_ref, 0, false, NULL, NULL},
    {"conv1d_stride_pad_nobias", {1, 9, 2, 3, 3, 2, 1, 0}, conv1d_setup, conv1d_forward,
     conv1d_backward, conv1d_forward_ref, conv1d_backward_ref, 0, false, NULL, NULL},
    {"conv1d_direct_narrow", {2, 7, 3, 1, 5, 1, 4, 1}, conv1d_direct_setup,
     conv1d_direct_forward, conv1d_direct_backward, conv1d_forward_ref, conv1d_backward_ref, 0,
     false, NULL, NULL},
    {"conv1d_direct_stride_pad_nobias", {1, 9, 2, 3, 3, 2, 1, 0}, conv1d_direct_setup,
     conv1d_direct_forward, conv1d_direct_backward, conv1d_forward_ref, conv1d_backward_ref, 0,
     false, NULL, NULL},
    {"conv1d_direct_empty_windows", {1, 8, 2, 2, 2, 3, 3, 1}, conv1d_direct_setup,
     conv1d_direct_forward, conv1d_direct_backward, conv1d_forward_ref, conv1d_backward_ref, 0,
     false, NULL, NULL},
    {"convt1d_patch", {2, 3, 4, 3, 4, 4, 1}, convt1d_setup, convt1d_forward, convt1d_backward,
     convt1d_forward_ref, convt1d_backward_ref, 0, false, NULL, NULL},
    {"convt1d_overlap_nobias", {1, 4, 3, 2, 3, 2, 0}, convt1d_setup, convt1d_forward,
     convt1d_backward, convt1d_forward_ref, convt1d_backward_ref, 0, false, NULL, NULL},
    {"conv1d_patch_kernel", {2, 8, 3, 4, 4, 4, 0, 1}, conv1d_patchk_setup, conv1d_patchk_forward,
     conv1d_patchk_backward, conv1d_forward_ref, conv1d_backward_ref, 0, false, NULL, NULL},
    {"conv1d_patch_kernel_nobias", {1, 6, 2, 3, 3, 3, 0, 0}, conv1d_patchk_setup,
     conv1d_patchk_forward, conv1d_patchk_backward, conv1d_forward_ref, conv1d_backward_ref, 0,
     false, NULL, NULL},
    {"convt1d_patch_kernel", {2, 3, 4, 3, 4, 4, 1}, convt1d_patchk_setup, convt1d_patchk_forward,
     convt1d_patchk_backward, convt1d_forward_ref, convt1d_backward_ref, 0, false, NULL, NULL},
    {"convt1d_patch_kernel_nobias", {1, 4, 3, 2, 2, 2, 0}, convt1d_patchk_setup,
     convt1d_patchk_forward, convt1d_patchk_backward, convt1d_forward_ref, convt1d_backward_ref,
     0, false, NULL, NULL},
    {"l2norm", {4, 6}, l2norm_setup, l2norm_forward, l2norm_backward, NULL, NULL, 0, false, NULL,
     NULL},
    {"codebook_gumbel_soft", {5, 6, 4}, codebook_setup, codebook_forward, codebook_backward,
     codebook_forward_ref, codebook_backward_ref, 0, false, NULL, NULL},
    {"codebook_entropy", {6, 5}, cb_entropy_setup, cb_entropy_forward, cb_entropy_backward, NULL,
     NULL, 0, false, NULL, NULL},
    {"codebook_orth", {6, 4}, cb_orth_setup, cb_orth_forward, cb_orth_backward,
     cb_orth_forward_ref, cb_orth_backward_ref, 0, false, NULL, NULL},
    {"codebook_vq_commit", {5, 7, 3}, cb_vq_setup, cb_vq_forward, cb_vq_backward, NULL, NULL, 0,
     true, NULL, NULL},
    {"attnpool", {3, 5, 4, 0}, attnpool_setup, attnpool_forward, attnpool_backward,
     attnpool_forward_ref, attnpool_backward_ref, 0, false, NULL, NULL},
    {"attnpool_mask", {4, 5, 4, 1}, attnpool_setup, attnpool_forward, attnpool_backward,
     attnpool_forward_ref, attnpool_backward_ref, 0, false, NULL, NULL},
    /* PyTorch references: dims as in the files (gen_refs.py, gen_attn_mlp_refs.py) */
    {.name = "linear_torch", .dims = {4, 8, 6, 1}, linear_setup, linear_forward, linear_backward,
     linear_forward_ref, linear_backward_ref, .torch = "linear"},
    {.name = "embedding_torch", .dims = {7, 5, 4}, embedding_setup, embedding_forward,
     embedding_backward, .torch = "embedding"},
    {.name = "rmsnorm_torch", .dims = {3, 16}, rmsnorm_setup, rmsnorm_forward, rmsnorm_backward,
     rmsnorm_forward_ref, rmsnorm_backward_ref, .torch = "rmsnorm"},
    {.name = "layernorm_torch", .dims = {3, 16, 1}, layernorm_setup, layernorm_forward,
     layernorm_backward, layernorm_forward_ref, layernorm_backward_ref, .torch = "layernorm"},
    {.name = "crossentropy_torch", .dims = {6, 9}, crossentropy_setup, crossentropy_forward,
     crossentropy_backward, .torch = "crossentropy"},
    {.name = "mse_torch", .dims = {20}, mse_setup, mse_forward, mse_backward, .torch = "mse"},
    {.name = "gelu_torch", .dims = {32}, act_setup, gelu_forward, gelu_backward, .torch = "gelu"},
    {.name = "silu_torch", .dims = {32}, act_setup, silu_forward, silu_backward, .torch = "silu"},
    {.name = "attention_causal_torch", .dims = {2, 5, 8, 2, 1, 0}, attention_setup,
     attention_forward, attention_backward, attention_forward_ref, attention_backward_ref,
     .torch = "attention_causal"},
    {.name = "attention_bidir_rope_torch", .dims = {1, 6, 12, 2, 0, 1}, attention_setup,
     attention_forward, attention_backward, attention_forward_ref, attention_backward_ref,
     .torch = "attention_bidir_rope"},
    {.name = "attention_causal_rope_torch", .dims = {2, 9, 16, 4, 1, 1}, attention_setup,
     attention_forward, attention_backward, attention_forward_ref, attention_backward_ref,
     .torch = "attention_causal_rope"},
    {.name = "mlp_gelu_torch", .dims = {5, 6, 12, 1}, mlp_gelu_setup, mlp_gelu_forward,
     mlp_gelu_backward, mlp_gelu_forward_ref, mlp_gelu_backward_ref, .torch = "mlp_gelu"},
    {.name = "mlp_swiglu_torch", .dims = {5, 6, 10}, mlp_swiglu_setup, mlp_swiglu_forward,
     mlp_swiglu_backward, mlp_swiglu_forward_ref, mlp_swiglu_backward_ref, .torch = "mlp_swiglu"},
    {"meanpool", {3, 5, 4, 0}, meanpool_setup, meanpool_forward, meanpool_backward,
     meanpool_forward_ref, meanpool_backward_ref, 0, false, NULL, NULL},
    {"meanpool_mask", {4, 5, 4, 2}, meanpool_setup, meanpool_forward, meanpool_backward,
     meanpool_forward_ref, meanpool_backward_ref, 0, false, NULL, NULL},
};

/* ------------------------------ the harness ------------------------------ */

static uint32_t gc_hash(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* ||a - s b|| / max(||a||, ||s b||, GC_TINY), in double. */
static double gc_nerr(const float *a, const float *b, double s, int64_t n) {
    double d = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < n; i++) {
        double sb = s * b[i];
        d += (a[i] - sb) * (a[i] - sb);
        na += (double)a[i] * a[i];
        nb += sb * sb;
    }
    double den = fmax(fmax(sqrt(na), sqrt(nb)), GC_TINY);
    return sqrt(d) / den;
}

/* L = sum over outputs of <dout, out>, after a fresh forward. */
static double gc_loss(gc_ctx *c, const gc_row *row) {
    row->forward(c);
    double L = 0;
    for (int b = 0; b < c->nbuf; b++) {
        if (c->buf[b].kind != GC_OUTPUT) continue;
        for (int64_t i = 0; i < c->buf[b].n; i++) L += (double)c->buf[b].g[i] * c->buf[b].x[i];
    }
    return L;
}

static void gc_zero_grads(gc_ctx *c) {
    for (int b = 0; b < c->nbuf; b++) {
        gc_buf *B = &c->buf[b];
        if (B->kind == GC_INPUT) memset(B->g, 0, (size_t)B->n * sizeof(float));
        if (B->kind == GC_WORK) memset(B->x, 0, (size_t)B->n * sizeof(float));
    }
}

static void gc_zero_work(gc_ctx *c) {
    for (int b = 0; b < c->nbuf; b++) {
        gc_buf *B = &c->buf[b];
        if (B->kind == GC_WORK) memset(B->x, 0, (size_t)B->n * sizeof(float));
    }
}

/* Copies of the gradients (or outputs) of all buffers of one kind, packed in declaration order. */
static float *gc_snapshot(gc_ctx *c, gc_kind kind, bool grad) {
    int64_t total = 0;
    for (int b = 0; b < c->nbuf; b++) total += c->buf[b].kind == kind ? c->buf[b].n : 0;
    float *s = malloc((size_t)(total > 0 ? total : 1) * sizeof(float));
    if (!s) gc_die("out of memory for snapshot of", "row");
    int64_t off = 0;
    for (int b = 0; b < c->nbuf; b++) {
        if (c->buf[b].kind != kind) continue;
        memcpy(s + off, grad ? c->buf[b].g : c->buf[b].x, (size_t)c->buf[b].n * sizeof(float));
        off += c->buf[b].n;
    }
    return s;
}

/* Compare each buffer of a kind (grad or value) with scale * its slice of snap. */
static void gc_compare(gc_ctx *c, const gc_row *row, gc_kind kind, bool grad, const float *snap,
                       double scale, double tol, const char *what) {
    int64_t off = 0;
    for (int b = 0; b < c->nbuf; b++) {
        gc_buf *B = &c->buf[b];
        if (B->kind != kind) continue;
        double e = gc_nerr(grad ? B->g : B->x, snap + off, scale, B->n);
        TESS_TEST_CHECK(e <= tol, "%s: %s of '%s': normalised error %.3g > %.3g", row->name, what,
                        B->name, e, tol);
        off += B->n;
    }
}

/* Central differences for every element of every gc_input; compares with the analytic
 * gradients held in the g buffers. */
static void gc_check_fd(gc_ctx *c, const gc_row *row) {
    double tol = row->tol > 0 ? row->tol : GC_TOL_DEFAULT;
    double L0 = row->kinks ? gc_loss(c, row) : 0.0;
    for (int b = 0; b < c->nbuf; b++) {
        gc_buf *B = &c->buf[b];
        if (B->kind != GC_INPUT) continue;
        double d = 0, na = 0, nf = 0;
        int64_t skipped = 0;
        for (int64_t i = 0; i < B->n; i++) {
            float x0 = B->x[i];
            float xp = (float)(x0 + GC_STEP), xm = (float)(x0 - GC_STEP);
            B->x[i] = xp;
            double Lp = gc_loss(c, row);
            B->x[i] = xm;
            double Lm = gc_loss(c, row);
            B->x[i] = x0;
            /* divide by the perturbation actually applied in fp32 */
            double fd = (Lp - Lm) / ((double)xp - (double)xm);
            if (row->kinks) {
                double sp = (Lp - L0) / ((double)xp - x0), sm = (L0 - Lm) / ((double)x0 - xm);
                if (fabs(sp - sm) > GC_KINK_REL * fmax(fabs(sp), fabs(sm)) + 1e-6) {
                    skipped++;
                    continue;
                }
            }
            double g = B->g[i];
            d += (g - fd) * (g - fd);
            na += g * g;
            nf += fd * fd;
        }
        double e = sqrt(d) / fmax(fmax(sqrt(na), sqrt(nf)), GC_TINY);
        printf("  %-16s d%-10s n=%-5lld fd error %.2e (tol %.1e)", row->name, B->name,
               (long long)B->n, e, tol);
        if (row->kinks) printf(", %lld at kinks skipped", (long long)skipped);
        printf("\n");
        TESS_TEST_CHECK(e <= tol, "%s: gradient of '%s': normalised FD error %.3g > %.3g",
                        row->name, B->name, e, tol);
        TESS_TEST_CHECK(skipped <= GC_KINK_SKIP_MAX * (double)B->n,
                        "%s: '%s': %lld of %lld FD components straddle kinks", row->name, B->name,
                        (long long)skipped, (long long)B->n);
        TESS_TEST_CHECK(na > 0, "%s: gradient of '%s' is identically zero", row->name, B->name);
    }
}

/* Buffers of one kind against the file: values (or gradients, as section "d<name>"); buffers
 * without a section are skipped. */
static void gc_torch_compare(gc_ctx *c, tess_ref_file *r, gc_kind kind, bool grad,
                             const char *variant) {
    for (int b = 0; b < c->nbuf; b++) {
        gc_buf *B = &c->buf[b];
        if (B->kind != kind) continue;
        char sec[64];
        snprintf(sec, sizeof sec, "%s%s", grad ? "d" : "", B->name);
        tess_ref_section *s = tess_ref_find(r, sec, B->n);
        if (s) tess_ref_compare(r, s, grad ? B->g : B->x, variant);
    }
}

/* CHECK 0: load the row's PyTorch file into the buffers and compare (see the header). */
static void gc_check_torch(gc_ctx *c, const gc_row *row, const char *dir) {
    tess_ref_file r;
    if (tess_ref_load(&r, dir, row->torch)) return;
    bool ok = true;
    for (int s = 0; s < r.nsec; s++) {
        if (strcmp(r.sec[s].name, "dims") != 0) continue;
        r.sec[s].used = true;
        for (int64_t k = 0; k < r.sec[s].n; k++) ok = ok && r.sec[s].i[k] == row->dims[k];
        TESS_TEST_CHECK(ok, "%s: dims of %s.txt differ from the row's", row->name, row->torch);
    }
    tess_ref_section *eps = tess_ref_find(&r, "eps", 1);
    TESS_TEST_CHECK(!eps || eps->f[0] == GC_NORM_EPS, "%s: eps %g in the file", row->name,
                    eps ? (double)eps->f[0] : 0.0);
    for (int b = 0; ok && b < c->nbuf; b++) { /* the file's inputs and douts */
        gc_buf *B = &c->buf[b];
        char sec[64];
        bool in = B->kind == GC_INPUT || B->kind == GC_CONST || B->kind == GC_IDS;
        if (!in && B->kind != GC_OUTPUT) continue;
        snprintf(sec, sizeof sec, "%s%s", in ? "" : "d", B->name);
        tess_ref_section *s = tess_ref_find(&r, sec, B->n);
        TESS_TEST_CHECK(s != NULL, "%s: %s.txt has no section %s (%lld values)", row->name,
                        row->torch, sec, (long long)B->n);
        ok = s != NULL;
        if (!s) break;
        if (B->kind == GC_IDS)
            memcpy(B->ids, s->i, (size_t)B->n * sizeof(int32_t));
        else
            memcpy(B->kind == GC_OUTPUT ? B->g : B->x, s->f, (size_t)B->n * sizeof(float));
    }
    for (int pass = 0; ok && pass < 2; pass++) {
        void (*fwd)(gc_ctx *) = pass ? row->forward_ref : row->forward;
        void (*bwd)(gc_ctx *) = pass ? row->backward_ref : row->backward;
        const char *variant = pass ? "_ref" : "fast";
        if (fwd) {
            fwd(c);
            gc_torch_compare(c, &r, GC_OUTPUT, false, variant);
            gc_torch_compare(c, &r, GC_CACHE, false, variant);
        }
        if (bwd) {
            row->forward(c); /* the caches the backward reads */
            gc_zero_grads(c);
            bwd(c);
            gc_torch_compare(c, &r, GC_INPUT, true, variant);
        }
    }
    for (int s = 0; ok && s < r.nsec; s++)
        TESS_TEST_CHECK(r.sec[s].used, "%s: section %s of %s.txt is checked by nothing", row->name,
                        r.sec[s].name, row->torch);
    tess_ref_free(&r);
}

static void gc_run_row(const gc_row *row, const char *torch_dir) {
    gc_ctx c = {.dims = row->dims, .key = gc_hash(row->name)};
    row->setup(&c);
    if (row->torch) gc_check_torch(&c, row, torch_dir);

    /* 1. fast forward vs the reference forward */
    row->forward(&c);
    if (row->forward_ref) {
        float *fast = gc_snapshot(&c, GC_OUTPUT, false);
        row->forward_ref(&c);
        gc_compare(&c, row, GC_OUTPUT, false, fast, 1.0, GC_TOL_REF, "forward vs _ref");
        free(fast);
        row->forward(&c); /* the fast forward's caches feed the backward below */
    }

    /* 2. backward accumulates: the second call adds the same amount again */
    gc_zero_grads(&c);
    row->backward(&c);
    float *g1 = gc_snapshot(&c, GC_INPUT, true);
    gc_zero_work(&c);
    row->backward(&c);
    gc_compare(&c, row, GC_INPUT, true, g1, 2.0, GC_TOL_ACC, "accumulation (2 calls = 2x)");

    /* 3. fast backward vs the reference backward */
    if (row->backward_ref) {
        gc_zero_grads(&c);
        row->backward_ref(&c);
        gc_compare(&c, row, GC_INPUT, true, g1, 1.0, GC_TOL_REF, "backward vs _ref");
    }

    /* 4. finite differences against the single-call gradient */
    int64_t off = 0;
    for (int b = 0; b < c.nbuf; b++) {
        if (c.buf[b].kind != GC_INPUT) continue;
        memcpy(c.buf[b].g, g1 + off, (size_t)c.buf[b].n * sizeof(float));
        off += c.buf[b].n;
    }
    free(g1);
    gc_check_fd(&c, row);

    if (row->teardown) row->teardown(&c);
    for (int b = 0; b < c.nbuf; b++) {
        free(c.buf[b].x);
        free(c.buf[b].g);
        free(c.buf[b].ids);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    TESS_TEST_CHECK(argc >= 2, "usage: gradcheck <tests/data/nn_refs dir> [row]");
    const char *dir = argc > 1 ? argv[1] : ".", *only = argc > 2 ? argv[2] : NULL;
    int ran = 0;
    for (size_t r = 0; r < sizeof gc_rows / sizeof gc_rows[0]; r++) {
        if (only && strcmp(only, gc_rows[r].name) != 0) continue;
        gc_run_row(&gc_rows[r], dir);
        ran++;
    }
    TESS_TEST_CHECK(ran > 0, "no row named '%s'", only ? only : "");
    int rc = tess_test_finish("gradcheck");
    MPI_Finalize();
    return rc;
}
