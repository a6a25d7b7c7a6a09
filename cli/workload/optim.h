/*
 * optim.h - optimizers on flat float arrays: AdamW and SGD for the inner
 * (local) steps, and DiLoCo's outer Nesterov-momentum step.
 *
 * All updates are element-wise loops with no reductions, so each output
 * element depends only on the same element of the inputs.
 */
#ifndef PCCL_WORKLOAD_OPTIM_H
#define PCCL_WORKLOAD_OPTIM_H

#include <stddef.h>
#include <stdint.h>

typedef struct adamw_config {
    float lr;
    float beta1;        /* typically 0.9 */
    float beta2;        /* typically 0.999 */
    float eps;          /* typically 1e-8 */
    float weight_decay; /* decoupled: p -= lr * weight_decay * p */
} adamw_config_t;

/* PyTorch's torch.optim.AdamW defaults (weight_decay 0.01). */
adamw_config_t adamw_defaults(float lr);

typedef struct adamw_state {
    size_t n;
    float *m;      /* first moment */
    float *v;      /* second moment */
    uint64_t step; /* steps taken; drives bias correction */
} adamw_state_t;

/* Allocates zeroed moments for n parameters; 0, or -1 on OOM. */
int adamw_init(adamw_state_t *st, size_t n);
/* Zeroes the moments and the step count (keeps the allocation). */
void adamw_reset(adamw_state_t *st);
void adamw_free(adamw_state_t *st);

/*
 * One AdamW step, the same math as torch.optim.AdamW:
 *   t += 1
 *   p -= lr * wd * p
 *   m = b1 m + (1 - b1) g ;  v = b2 v + (1 - b2) g^2
 *   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 */
void adamw_step(adamw_state_t *st, const adamw_config_t *cfg, float *params, const float *grad);

/* Plain SGD with optional decoupled weight decay: p -= lr * (g + wd * p). */
void sgd_step(float *params, const float *grad, size_t n, float lr, float weight_decay);

/* DiLoCo pseudo-gradient of one worker: out = outer - inner (the direction the
 * outer model should move is -out, matching a gradient's sign). */
void outer_pseudo_grad(const float *outer_params, const float *inner_params, float *out, size_t n);

/*
 * DiLoCo outer step: SGD with Nesterov momentum (torch.optim.SGD with
 * nesterov=True, dampening 0) on the averaged pseudo-gradient g:
 *   momentum = mu * momentum + g
 *   params  -= lr * (g + mu * momentum)
 * Every peer applies it to the same averaged g and must get bit-identical
 * params, so it is compiled without floating-point contraction (no FMA) and
 * each output element is a fixed sequence of correctly rounded operations.
 * mu = 0 gives plain SGD (lr 1.0, mu 0: params -= g, i.e. plain averaging).
 */
void outer_nesterov_step(float *params, const float *pseudo_grad, float *momentum, size_t n, float lr, float mu);

#endif
