/*
 * optim.c - AdamW, SGD and the DiLoCo outer Nesterov step on flat arrays.
 */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/*
 * OPTIM_NO_CONTRACT: forbid fusing a*b+c into one FMA in the outer step. An FMA
 * rounds once instead of twice, so a peer whose compiler fused (e.g. GCC in
 * gnu mode on an FMA-capable target) would drift from one that did not. The
 * statements below are also split so that even a compiler that contracts only
 * within an expression (clang's default) has nothing to fuse.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define OPTIM_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define OPTIM_NO_CONTRACT
#endif

adamw_config_t adamw_defaults(float lr) {
    adamw_config_t c = {.lr = lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
    return c;
}

int adamw_init(adamw_state_t *st, size_t n) {
    memset(st, 0, sizeof *st);
    st->m = calloc(n ? n : 1, sizeof(float));
    st->v = calloc(n ? n : 1, sizeof(float));
    if (!st->m || !st->v) {
        adamw_free(st);
        return -1;
    }
    st->n = n;
    return 0;
}

void adamw_reset(adamw_state_t *st) {
    if (st->n) {
        memset(st->m, 0, sizeof(float) * st->n);
        memset(st->v, 0, sizeof(float) * st->n);
    }
    st->step = 0;
}

void adamw_free(adamw_state_t *st) {
    free(st->m);
    free(st->v);
    memset(st, 0, sizeof *st);
}

/* Contraction is off here only so that the SSE lanes and the scalar tail give
 * identical bits on FMA-capable builds too (the inner step need not match
 * across peers, but one element's result should not depend on its position). */
OPTIM_NO_CONTRACT
void adamw_step(adamw_state_t *st, const adamw_config_t *cfg, float *params, const float *grad) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    st->step++;
    /* Bias corrections in double: b^t for large t underflows gracefully. */
    const double bc1 = 1.0 - pow((double)cfg->beta1, (double)st->step);
    const double bc2 = 1.0 - pow((double)cfg->beta2, (double)st->step);
    const float step_size = (float)((double)cfg->lr / bc1);
    const float inv_bc2_sqrt = (float)(1.0 / sqrt(bc2));
    const float decay = 1.0f - cfg->lr * cfg->weight_decay;
    const float b1 = cfg->beta1, b2 = cfg->beta2, c1 = 1.0f - cfg->beta1, c2 = 1.0f - cfg->beta2;
    const float eps = cfg->eps;
    float *m = st->m, *v = st->v;
    const size_t n = st->n;
    size_t i = 0;
#if defined(__SSE2__)
    /* Explicit SIMD because sqrtf's errno semantics stop GCC from vectorizing
     * this loop without -fno-math-errno, and scalar it is a large share of a training step. */
    const __m128 vb1 = _mm_set1_ps(b1), vc1 = _mm_set1_ps(c1), vb2 = _mm_set1_ps(b2), vc2 = _mm_set1_ps(c2);
    const __m128 vdecay = _mm_set1_ps(decay), vstep = _mm_set1_ps(step_size);
    const __m128 vibc2 = _mm_set1_ps(inv_bc2_sqrt), veps = _mm_set1_ps(eps);
    for (; i + 4 <= n; i += 4) {
        const __m128 g = _mm_loadu_ps(grad + i);
        const __m128 mi = _mm_add_ps(_mm_mul_ps(vb1, _mm_loadu_ps(m + i)), _mm_mul_ps(vc1, g));
        const __m128 vi = _mm_add_ps(_mm_mul_ps(vb2, _mm_loadu_ps(v + i)), _mm_mul_ps(vc2, _mm_mul_ps(g, g)));
        _mm_storeu_ps(m + i, mi);
        _mm_storeu_ps(v + i, vi);
        const __m128 denom = _mm_add_ps(_mm_mul_ps(_mm_sqrt_ps(vi), vibc2), veps);
        const __m128 upd = _mm_div_ps(_mm_mul_ps(vstep, mi), denom);
        _mm_storeu_ps(params + i, _mm_sub_ps(_mm_mul_ps(_mm_loadu_ps(params + i), vdecay), upd));
    }
#endif
    /* The same operations in the same order as the SSE path; sqrt and div are
     * correctly rounded in both, so lanes and tail agree bit for bit. */
    for (; i < n; i++) {
        const float g = grad[i];
        const float mi = b1 * m[i] + c1 * g;
        const float vi = b2 * v[i] + c2 * (g * g);
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrtf(vi) * inv_bc2_sqrt + eps;
        params[i] = params[i] * decay - step_size * mi / denom;
    }
}

void sgd_step(float *params, const float *grad, size_t n, float lr, float weight_decay) {
    for (size_t i = 0; i < n; i++) params[i] -= lr * (grad[i] + weight_decay * params[i]);
}

OPTIM_NO_CONTRACT
void outer_pseudo_grad(const float *outer_params, const float *inner_params, float *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = outer_params[i] - inner_params[i];
}

OPTIM_NO_CONTRACT
void outer_nesterov_step(float *params, const float *pseudo_grad, float *momentum, size_t n, float lr, float mu) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    for (size_t i = 0; i < n; i++) {
        const float g = pseudo_grad[i];
        float buf = mu * momentum[i];
        buf = buf + g;
        momentum[i] = buf;
        float upd = mu * buf;
        upd = g + upd;
        const float delta = lr * upd;
        params[i] = params[i] - delta;
    }
}
