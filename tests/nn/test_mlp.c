/* test_mlp.c - the GELU and SwiGLU MLPs: fast against reference on small odd shapes (with and
 * without GELU biases) and backward accumulation into every gradient; the SwiGLU gate's kernels
 * (vectorised, AVX-512 where built for it) bit for bit against the scalar formula. The PyTorch
 * values are checked by the gradcheck table (tests/gradcheck). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "nn/activation.h" /* tess_nn_gelu_backward, _inplace; tess_nn_swiglu_gate_* */
#include "nn/mlp.h"    /* tess_nn_mlp_* */
#include "tensor/tensor.h" /* tess_tensor_expf, tess_fmaf */
#include "tess_ref.h" /* tess_ref_fill_uniform, tess_ref_rel_err */
#include "tess_test.h"

static float *alloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

/* The parameters and gradients of one MLP, in one buffer each, so a check is one loop. */
enum { NPAR = 4 };
typedef struct {
    int64_t N, C, F;
    bool swiglu, bias;
    float *in, *dout, *out, *din;  /* (N,C) each */
    float *c0, *c1, *c2;           /* caches (N,F): GELU pre, act; SwiGLU gate, up, h */
    float *scratch;                /* tess_nn_mlp_scratch_size(N, F) */
    float *par, *grad;             /* all parameters and their gradients, flat (npar) */
    float *p[NPAR], *g[NPAR];      /* views: GELU w_fc,b_fc,w_proj,b_proj; SwiGLU gate,up,down */
    int64_t np[NPAR], npar;        /* view sizes and their sum */
} mlp_case;

static void case_init(mlp_case *m, int64_t N, int64_t C, int64_t F, bool swiglu, bool bias) {
    *m = (mlp_case){.N = N, .C = C, .F = F, .swiglu = swiglu, .bias = bias};
    int64_t sizes_g[NPAR] = {F * C, F, C * F, C}, sizes_s[NPAR] = {F * C, F * C, C * F, 0};
    m->npar = 0;
    for (int i = 0; i < NPAR; i++) {
        m->np[i] = swiglu ? sizes_s[i] : sizes_g[i];
        m->npar += m->np[i];
    }
    m->par = alloc(m->npar), m->grad = alloc(m->npar);
    for (int i = 0, off = 0; i < NPAR; off += (int)m->np[i], i++) {
        m->p[i] = m->par + off, m->g[i] = m->grad + off;
    }
    m->in = alloc(N * C), m->dout = alloc(N * C), m->out = alloc(N * C), m->din = alloc(N * C);
    m->c0 = alloc(N * F), m->c1 = alloc(N * F), m->c2 = alloc(N * F);
    m->scratch = alloc(tess_nn_mlp_scratch_size(N, F));
}

static void case_free(mlp_case *m) {
    free(m->par), free(m->grad), free(m->in), free(m->dout), free(m->out), free(m->din);
    free(m->c0), free(m->c1), free(m->c2), free(m->scratch);
}

/* Forward, then backward adding into m->din and m->grad; ref selects the reference kernels. */
static void run(mlp_case *m, bool ref) {
    int64_t N = m->N, C = m->C, F = m->F;
    float **p = m->p, **g = m->g;
    if (m->swiglu) {
        (ref ? tess_nn_mlp_swiglu_forward_ref : tess_nn_mlp_swiglu_forward)(
            m->out, m->c0, m->c1, m->c2, m->in, p[0], p[1], p[2], N, C, F);
        (ref ? tess_nn_mlp_swiglu_backward_ref : tess_nn_mlp_swiglu_backward)(
            m->din, g[0], g[1], g[2], m->scratch, m->dout, m->in, p[0], p[1], p[2], m->c0, m->c1,
            m->c2, N, C, F);
    } else {
        const float *b_fc = m->bias ? p[1] : NULL, *b_proj = m->bias ? p[3] : NULL;
        float *db_fc = m->bias ? g[1] : NULL, *db_proj = m->bias ? g[3] : NULL;
        (ref ? tess_nn_mlp_gelu_forward_ref : tess_nn_mlp_gelu_forward)(
            m->out, m->c0, m->c1, m->in, p[0], b_fc, p[2], b_proj, N, C, F);
        (ref ? tess_nn_mlp_gelu_backward_ref : tess_nn_mlp_gelu_backward)(
            m->din, g[0], db_fc, g[2], db_proj, m->scratch, m->dout, m->in, p[0], p[2], m->c0,
            m->c1, N, C, F);
    }
}

static void check_against_ref(int64_t N, int64_t C, int64_t F, bool swiglu, bool bias,
                              uint32_t seed) {
    mlp_case fast, ref;
    case_init(&fast, N, C, F, swiglu, bias);
    case_init(&ref, N, C, F, swiglu, bias);
    tess_ref_fill_uniform(fast.in, N * C, seed, 1.5f);
    tess_ref_fill_uniform(fast.dout, N * C, seed + 1, 1.0f);
    tess_ref_fill_uniform(fast.par, fast.npar, seed + 2, 0.7f);
    tess_ref_fill_uniform(fast.grad, fast.npar, seed + 3, 1.0f); /* nonzero start: backward must add */
    tess_ref_fill_uniform(fast.din, N * C, seed + 4, 1.0f);
    memcpy(ref.in, fast.in, (size_t)(N * C) * sizeof(float));
    memcpy(ref.dout, fast.dout, (size_t)(N * C) * sizeof(float));
    memcpy(ref.din, fast.din, (size_t)(N * C) * sizeof(float));
    memcpy(ref.par, fast.par, (size_t)fast.npar * sizeof(float));
    memcpy(ref.grad, fast.grad, (size_t)fast.npar * sizeof(float));
    run(&fast, false);
    run(&ref, true);
    const char *name = swiglu ? "swiglu" : bias ? "gelu" : "gelu (no bias)";
    double eo = tess_ref_rel_err(fast.out, ref.out, N * C), ed = tess_ref_rel_err(fast.din, ref.din, N * C);
    double eg = tess_ref_rel_err(fast.grad, ref.grad, fast.npar);
    double ec = tess_ref_rel_err(fast.c0, ref.c0, N * F) + tess_ref_rel_err(fast.c1, ref.c1, N * F) +
                (swiglu ? tess_ref_rel_err(fast.c2, ref.c2, N * F) : 0.0);
    TESS_TEST_CHECK(eo < 2e-6 && ec < 2e-6, "%s N=%lld C=%lld F=%lld: forward rel err %.3g, "
                    "caches %.3g", name, (long long)N, (long long)C, (long long)F, eo, ec);
    TESS_TEST_CHECK(ed < 2e-6 && eg < 2e-6, "%s N=%lld C=%lld F=%lld: din rel err %.3g, "
                    "params %.3g", name, (long long)N, (long long)C, (long long)F, ed, eg);

    /* From zero, twice: twice the gradients of once. */
    memset(fast.grad, 0, (size_t)fast.npar * sizeof(float));
    memset(fast.din, 0, (size_t)(N * C) * sizeof(float));
    run(&fast, false);
    memcpy(ref.grad, fast.grad, (size_t)fast.npar * sizeof(float));
    memcpy(ref.din, fast.din, (size_t)(N * C) * sizeof(float));
    run(&fast, false);
    for (int64_t i = 0; i < fast.npar; i++) ref.grad[i] *= 2.0f;
    for (int64_t i = 0; i < N * C; i++) ref.din[i] *= 2.0f;
    TESS_TEST_CHECK(tess_ref_rel_err(fast.grad, ref.grad, fast.npar) < 1e-6 &&
                        tess_ref_rel_err(fast.din, ref.din, N * C) < 1e-6,
                    "%s N=%lld: backward accumulates into every gradient", name, (long long)N);
    case_free(&fast);
    case_free(&ref);
}

/* The in-place GELU backward (the MLP's) is bitwise the accumulating one added into zeros. */
static void check_gelu_inplace(void) {
    enum { n = 203 };
    float x[n], g[n], acc[n] = {0};
    tess_ref_fill_uniform(x, n, 71, 3.0f);
    tess_ref_fill_uniform(g, n, 72, 1.0f);
    x[0] = -20.0f, x[1] = 20.0f, x[2] = 0.0f;
    tess_nn_gelu_backward(acc, g, x, n);
    tess_nn_gelu_backward_inplace(g, x, n);
    TESS_TEST_CHECK(memcmp(acc, g, sizeof g) == 0, "gelu backward in place != += into zeros");
}

/* a and b the same float, NaN matching any NaN */
static bool same_bits(float a, float b) {
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* The SwiGLU gate's kernels against its formula written out one element at a time, bit for
 * bit: lengths 1-40 and 1000 (every tail of the 16-lane loops), gates over [-100, 100] with the
 * clamp's edges, zeros, infinities, a denormal and NaN; and within 1e-5 of double precision on
 * gates in [-20, 20]. */
static void check_swiglu_gate(void) {
    enum { NMAX = 1000 };
    static float gate[NMAX], up[NMAX], d0[NMAX], dh[NMAX], h[NMAX], dup[NMAX];
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 87.3f, -87.3f, 88.3f,
                             -88.3f, 90.0f, -90.0f, 1e-40f, 20.0f, -20.0f};
    const int64_t nspecial = (int64_t)(sizeof special / sizeof special[0]);
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t n = 1; n <= NMAX; n = n < 40 ? n + 1 : NMAX + 1) {
        tess_ref_fill_uniform(gate, n, 80 + (uint32_t)n, 100.0f);
        tess_ref_fill_uniform(up, n, 81 + (uint32_t)n, 2.0f);
        tess_ref_fill_uniform(d0, n, 82 + (uint32_t)n, 2.0f);
        for (int64_t i = 0; i < n && i < nspecial; i++) gate[(i * 7) % n] = special[i];
        memcpy(dh, d0, sizeof(float) * (size_t)n);
        tess_nn_swiglu_gate_forward(h, gate, up, n);
        tess_nn_swiglu_gate_backward_overwrite(dh, dup, gate, up, n);
        for (int64_t i = 0; i < n; i++) {
            const float g = gate[i], d = d0[i];
            const float q = tess_tensor_expf(-g), s = 1.0f / (1.0f + q);
            bad += !same_bits(h[i], g / (1.0f + q) * up[i]);
            bad += !same_bits(dup[i], d * g * s);
            bad += !same_bits(dh[i], d * up[i] * s * tess_fmaf(g, q * s, 1.0f));
            if (fabs(g) > 20.0) continue;
            const double sd = 1.0 / (1.0 + exp(-(double)g)), hd = g * sd * up[i];
            const double dgd = d * up[i] * sd * (1.0 + g * (1.0 - sd));
            const double e[3] = {fabs(h[i] - hd) / (fabs(hd) + 1e-6),
                                 fabs(dup[i] - d * g * sd) / (fabs(d * g * sd) + 1e-6),
                                 fabs(dh[i] - dgd) / (fabs(dgd) + 1e-6)};
            for (int j = 0; j < 3; j++) worst = e[j] > worst ? e[j] : worst;
        }
    }
    TESS_TEST_CHECK(bad == 0, "swiglu gate: %lld values differ from the scalar formula",
                    (long long)bad);
    TESS_TEST_CHECK(worst < 1e-5, "swiglu gate: relative error %g against double", worst);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    check_gelu_inplace();
    check_swiglu_gate();
    const int64_t shapes[][3] = {{1, 1, 1}, {5, 6, 12}, {7, 3, 10}, {33, 16, 40}, {2, 9, 37}};
    uint32_t seed = 20;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++, seed += 5) {
        const int64_t *s = shapes[i];
        check_against_ref(s[0], s[1], s[2], false, true, seed);
        check_against_ref(s[0], s[1], s[2], false, false, seed);
        check_against_ref(s[0], s[1], s[2], true, false, seed);
    }
    TESS_TEST_CHECK(tess_nn_mlp_scratch_size(6, 10) == 120, "scratch is 2*N*F");
    int rc = tess_test_finish("mlp");
    MPI_Finalize();
    return rc;
}
