/*
 * mlp.h - the 784-128-10 multilayer perceptron trained by the fashion-mnist
 * workload: x -> ReLU(W1 x + b1) -> W2 h + b2 -> softmax cross-entropy.
 *
 * The parameters are ONE flat float array owned by the caller, so DiLoCo can
 * all-reduce, hash and checkpoint the model as a single tensor:
 *
 *   offset           count    tensor
 *   MLP_W1_OFF=0     100352   W1[128][784]  (row j = weights into hidden unit j)
 *   MLP_B1_OFF       128      b1[128]
 *   MLP_W2_OFF       1280     W2[10][128]   (row c = weights into logit c)
 *   MLP_B2_OFF       10       b2[10]
 *   total            101770   MLP_NPARAMS
 *
 * Gradients use the same layout. Single-threaded on purpose: several peer
 * processes share few cores, so threads would only oversubscribe them.
 */
#ifndef PCCL_WORKLOAD_MLP_H
#define PCCL_WORKLOAD_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "mnist.h"

#define MLP_IN 784
#define MLP_HIDDEN 128
#define MLP_OUT 10

#define MLP_W1_OFF 0
#define MLP_B1_OFF (MLP_W1_OFF + MLP_HIDDEN * MLP_IN)
#define MLP_W2_OFF (MLP_B1_OFF + MLP_HIDDEN)
#define MLP_B2_OFF (MLP_W2_OFF + MLP_OUT * MLP_HIDDEN)
#define MLP_NPARAMS 101770

_Static_assert(MLP_B2_OFF + MLP_OUT == MLP_NPARAMS, "MLP_NPARAMS must match the layout");
_Static_assert(MLP_IN == MNIST_PIXELS && MLP_OUT == MNIST_CLASSES, "MLP shape must match the data");

/* Work buffers for one batch (activations, packed weights); opaque. */
typedef struct mlp_scratch mlp_scratch_t;

/*
 * Allocates buffers for batches of up to max_batch examples (larger batches
 * still work: they are processed in max_batch chunks). NULL on OOM or 0.
 */
mlp_scratch_t *mlp_scratch_new(size_t max_batch);
void mlp_scratch_free(mlp_scratch_t *s);

/*
 * Deterministic initialisation: W1 He-uniform (fan_in 784, ReLU follows),
 * W2 Glorot-uniform (128 -> 10), biases zero, drawn from splitmix64(seed) in
 * layout order. Uses only exact integer ops and correctly rounded float ops,
 * so a seed gives bit-identical parameters on every machine.
 */
void mlp_init(float *params, uint64_t seed);

/*
 * Mean softmax cross-entropy over the batch and its gradient.
 * images: n_total*784 floats, labels: n_total labels in 0..9 (e.g. an
 * mnist_set_t, whose loader validates them; they are not re-checked per step).
 * idx: batch example indices (< n_total) into images/labels, or NULL for rows
 * 0..batch-1.
 * grad: MLP_NPARAMS floats, overwritten with d(mean loss)/d(params).
 * Returns the mean loss (NAN if batch == 0).
 */
float mlp_loss_grad(const float *params, const float *images, const uint8_t *labels, const uint32_t *idx,
                    size_t batch, float *grad, mlp_scratch_t *s);

/* Forward pass only: mean loss of a batch (same arguments, no gradient). */
float mlp_loss(const float *params, const float *images, const uint8_t *labels, const uint32_t *idx,
               size_t batch, mlp_scratch_t *s);

/*
 * Accuracy (fraction of argmax == label) and mean loss over a whole set.
 * scratch may be NULL (one is allocated for the call). Returns 0, or -1 on
 * OOM or an empty set.
 */
int mlp_evaluate(const float *params, const mnist_set_t *set, mlp_scratch_t *scratch, float *accuracy,
                 float *loss);

#endif
