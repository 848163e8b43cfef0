/* loss.c - softmax cross-entropy and mean squared error (see loss.h). */
#include "nn/loss.h"

#include <math.h>

#include "core/status.h"   /* TESS_ASSERT */
#include "tensor/tensor.h" /* tess_tensor_max, tess_tensor_sum, tess_tensor_expf */

float tess_nn_crossentropy_forward(float *probs, const float *logits, const int32_t *targets,
                                   int64_t N, int64_t V) {
    /* probs (N,V), logits (N,V), targets (N) */
    TESS_ASSERT(V >= 1);
    double total = 0.0;
    int64_t count = 0;
    for (int64_t n = 0; n < N; n++) {
        const float *x = logits + n * V;
        float *p = probs + n * V;
        float m = tess_tensor_max(x, V);
        for (int64_t v = 0; v < V; v++) p[v] = tess_tensor_expf(x[v] - m);
        double s = tess_tensor_sum(p, V);
        float inv = (float)(1.0 / s);
        for (int64_t v = 0; v < V; v++) p[v] *= inv;
        int32_t t = targets[n];
        TESS_ASSERT(t >= -1 && t < V);
        if (t < 0) continue;
        /* -log p_t = log s - (x_t - m) */
        total += log(s) - ((double)x[t] - m);
        count++;
    }
    return count > 0 ? (float)(total / (double)count) : 0.0f;
}

void tess_nn_crossentropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                                   int64_t N, int64_t V, float dloss) {
    /* dlogits (N,V), probs (N,V), targets (N) */
    int64_t count = 0;
    for (int64_t n = 0; n < N; n++) count += targets[n] >= 0;
    if (count == 0) return;
    float scale = dloss / (float)count;
    for (int64_t n = 0; n < N; n++) {
        int32_t t = targets[n];
        if (t < 0) continue;
        TESS_ASSERT(t < V);
        tess_tensor_axpy(dlogits + n * V, scale, probs + n * V, V);
        dlogits[n * V + t] -= scale;
    }
}

float tess_nn_mse_forward(const float *pred, const float *target, int64_t n) {
    /* pred (n), target (n) */
    if (n == 0) return 0.0f;
    double acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; k++) {
            double d = (double)pred[i + k] - target[i + k];
            acc[k] += d * d;
        }
    }
    for (int k = 0; i < n; i++, k++) {
        double d = (double)pred[i] - target[i];
        acc[k] += d * d;
    }
    double s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    return (float)(s / (double)n);
}

void tess_nn_mse_backward(float *restrict dpred, const float *restrict pred,
                          const float *restrict target, int64_t n, float dloss) {
    /* dpred (n), pred (n), target (n) */
    if (n == 0) return;
    float scale = 2.0f * dloss / (float)n;
    for (int64_t i = 0; i < n; i++) dpred[i] += scale * (pred[i] - target[i]);
}
