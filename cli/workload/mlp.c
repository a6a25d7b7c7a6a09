/*
 * mlp.c - forward/backward of the 784-128-10 MLP on the CPU, single thread.
 *
 * Where the time goes: the two 784x128 products, Z1 = X W1^T (forward) and
 * dW1 = dZ1^T X (backward), ~100k multiply-adds per example each; everything
 * else is small beside them. Both are register-blocked micro-kernels (4 examples x 8 hidden
 * units, or 4 hidden units x 8 pixels) written with 4-float vectors, so the 8
 * accumulators stay in vector registers at -O2 as well as -O3 and without
 * -ffast-math (auto-vectorization alone left half of them spilled and
 * scalar). They also skip zero pixels, which are half of
 * Fashion-MNIST (the black background), via per-block lists of nonzero
 * entries. Float sums are never reassociated, so the result is a fixed
 * function of the inputs for a given build.
 */
#include "mlp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MLP_PANEL 8                          /* hidden units per packed W1 panel */
#define MLP_NPANELS (MLP_HIDDEN / MLP_PANEL) /* 16 */
#define MLP_SB 4                             /* examples per forward register block */
#define MLP_KB 8                             /* pixels per backward register block */
#define MLP_NKB (MLP_IN / MLP_KB)            /* 98 */
#define MLP_JB 4                             /* hidden units per backward register block */
#define MLP_MAX_CHUNK 4096                   /* keeps example indices in uint16_t */

/* 4-float vectors via the GCC/clang vector extension: SSE on x86-64, NEON on
 * arm64, plain scalar code elsewhere. Element-wise ops only, so results do not
 * depend on the vector width. A scalar operand is broadcast to all lanes. */
typedef float mlp_v4 __attribute__((vector_size(16)));
typedef int32_t mlp_v4i __attribute__((vector_size(16)));

static inline mlp_v4 mlp_load(const float *p) {
    mlp_v4 v;
    memcpy(&v, p, sizeof v); /* unaligned-safe; compiles to one vector load */
    return v;
}

static inline void mlp_store(float *p, mlp_v4 v) { memcpy(p, &v, sizeof v); }

/* max(z, 0) per lane: the comparison yields all-ones lanes where z > 0. */
static inline mlp_v4 mlp_relu(mlp_v4 z) {
    const mlp_v4 zero = {0};
    const mlp_v4i keep = z > zero;
    return (mlp_v4)((mlp_v4i)z & keep);
}

_Static_assert(MLP_HIDDEN % MLP_PANEL == 0 && MLP_IN % MLP_KB == 0 && MLP_HIDDEN % MLP_JB == 0,
               "block sizes must divide the layer sizes");

struct mlp_scratch {
    size_t chunk;         /* examples per pass, a multiple of MLP_SB */
    float *w1p;           /* W1 repacked as [panel][pixel][MLP_PANEL]: contiguous in the k loop */
    const float **xrow;   /* chunk input rows (pointers into the caller's images) */
    float *zero_row;      /* MLP_IN zeros: pads the last forward block */
    float *h;             /* [chunk][MLP_HIDDEN] ReLU activations */
    float *dz;            /* [chunk][MLP_HIDDEN] d loss / d pre-activation */
    float *logits;        /* [chunk][MLP_OUT] logits, then d loss / d logits */
    uint16_t *nzk;        /* [MLP_IN] pixels nonzero in some example of a forward block */
    uint16_t *nzb;        /* [MLP_NKB][chunk] examples with a nonzero pixel in block kb */
    uint16_t *nzb_len;    /* [MLP_NKB] */
};

mlp_scratch_t *mlp_scratch_new(size_t max_batch) {
    if (max_batch == 0) return NULL;
    if (max_batch > MLP_MAX_CHUNK) max_batch = MLP_MAX_CHUNK;
    size_t chunk = (max_batch + MLP_SB - 1) / MLP_SB * MLP_SB;
    mlp_scratch_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->chunk = chunk;
    s->w1p = malloc(sizeof(float) * MLP_HIDDEN * MLP_IN);
    s->xrow = malloc(sizeof(*s->xrow) * chunk);
    s->zero_row = calloc(MLP_IN, sizeof(float));
    s->h = malloc(sizeof(float) * chunk * MLP_HIDDEN);
    s->dz = malloc(sizeof(float) * chunk * MLP_HIDDEN);
    s->logits = malloc(sizeof(float) * chunk * MLP_OUT);
    s->nzk = malloc(sizeof(uint16_t) * MLP_IN);
    s->nzb = malloc(sizeof(uint16_t) * MLP_NKB * chunk);
    s->nzb_len = malloc(sizeof(uint16_t) * MLP_NKB);
    if (!s->w1p || !s->xrow || !s->zero_row || !s->h || !s->dz || !s->logits || !s->nzk || !s->nzb ||
        !s->nzb_len) {
        mlp_scratch_free(s);
        return NULL;
    }
    return s;
}

void mlp_scratch_free(mlp_scratch_t *s) {
    if (!s) return;
    free(s->w1p);
    free(s->xrow);
    free(s->zero_row);
    free(s->h);
    free(s->dz);
    free(s->logits);
    free(s->nzk);
    free(s->nzb);
    free(s->nzb_len);
    free(s);
}

/* splitmix64: tiny, well mixed, and defined purely by 64-bit integer ops. */
static uint64_t mlp_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-limit, limit): 24 random bits make 2u-1 exact, so the only
 * rounding is the final correctly rounded product. */
static float mlp_uniform(uint64_t *state, float limit) {
    float u = (float)(mlp_splitmix64(state) >> 40) * (1.0f / 16777216.0f);
    float sym = 2.0f * u - 1.0f;
    return sym * limit;
}

void mlp_init(float *params, uint64_t seed) {
    uint64_t st = seed;
    const float lim1 = sqrtf(6.0f / (float)MLP_IN);                  /* He uniform */
    const float lim2 = sqrtf(6.0f / (float)(MLP_HIDDEN + MLP_OUT));   /* Glorot uniform */
    for (size_t i = 0; i < (size_t)MLP_HIDDEN * MLP_IN; i++) params[MLP_W1_OFF + i] = mlp_uniform(&st, lim1);
    for (size_t i = 0; i < MLP_HIDDEN; i++) params[MLP_B1_OFF + i] = 0.0f;
    for (size_t i = 0; i < (size_t)MLP_OUT * MLP_HIDDEN; i++) params[MLP_W2_OFF + i] = mlp_uniform(&st, lim2);
    for (size_t i = 0; i < MLP_OUT; i++) params[MLP_B2_OFF + i] = 0.0f;
}

/* W1[j][k] -> w1p[j/8][k][j%8], so a forward panel streams 8 weights per pixel. */
static void mlp_pack_w1(const float *w1, float *w1p) {
    for (int p = 0; p < MLP_NPANELS; p++) {
        float *dst = w1p + (size_t)p * MLP_IN * MLP_PANEL;
        for (int t = 0; t < MLP_PANEL; t++) {
            const float *src = w1 + (size_t)(p * MLP_PANEL + t) * MLP_IN;
            for (int k = 0; k < MLP_IN; k++) dst[k * MLP_PANEL + t] = src[k];
        }
    }
}

/* h[b] = ReLU(W1 x_b + b1) for b < nb; blocks of 4 examples share each weight load. */
static void mlp_forward_hidden(mlp_scratch_t *s, const float *b1, size_t nb) {
    for (size_t b0 = 0; b0 < nb; b0 += MLP_SB) {
        const float *x0 = s->xrow[b0];
        const float *x1 = b0 + 1 < nb ? s->xrow[b0 + 1] : s->zero_row;
        const float *x2 = b0 + 2 < nb ? s->xrow[b0 + 2] : s->zero_row;
        const float *x3 = b0 + 3 < nb ? s->xrow[b0 + 3] : s->zero_row;
        /* Pixels that are zero in all four examples contribute exactly 0. */
        int nk = 0;
        for (int k = 0; k < MLP_IN; k++) {
            s->nzk[nk] = (uint16_t)k;
            nk += (x0[k] != 0.0f) | (x1[k] != 0.0f) | (x2[k] != 0.0f) | (x3[k] != 0.0f);
        }
        for (int p = 0; p < MLP_NPANELS; p++) {
            const float *wp = s->w1p + (size_t)p * MLP_IN * MLP_PANEL;
            mlp_v4 a0l = {0}, a0h = {0}, a1l = {0}, a1h = {0}, a2l = {0}, a2h = {0}, a3l = {0}, a3h = {0};
            for (int i = 0; i < nk; i++) {
                const int k = s->nzk[i];
                const mlp_v4 wl = mlp_load(wp + k * MLP_PANEL), wh = mlp_load(wp + k * MLP_PANEL + 4);
                const float v0 = x0[k], v1 = x1[k], v2 = x2[k], v3 = x3[k];
                a0l += v0 * wl;
                a0h += v0 * wh;
                a1l += v1 * wl;
                a1h += v1 * wh;
                a2l += v2 * wl;
                a2h += v2 * wh;
                a3l += v3 * wl;
                a3h += v3 * wh;
            }
            const mlp_v4 bl = mlp_load(b1 + p * MLP_PANEL), bh = mlp_load(b1 + p * MLP_PANEL + 4);
            const mlp_v4 acc[MLP_SB][2] = {{a0l, a0h}, {a1l, a1h}, {a2l, a2h}, {a3l, a3h}};
            for (size_t r = 0; r < MLP_SB && b0 + r < nb; r++) {
                float *hrow = s->h + (b0 + r) * MLP_HIDDEN + p * MLP_PANEL;
                mlp_store(hrow, mlp_relu(acc[r][0] + bl));
                mlp_store(hrow + 4, mlp_relu(acc[r][1] + bh));
            }
        }
    }
}

/* Dot product of two 128-vectors with 8 fixed partial sums: vectorizable
 * without reassociation, and the same order on every call. */
static float mlp_dot_hidden(const float *a, const float *b) {
    float acc[8] = {0};
    for (int j = 0; j < MLP_HIDDEN; j += 8)
        for (int t = 0; t < 8; t++) acc[t] += a[j + t] * b[j + t];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static void mlp_forward_logits(mlp_scratch_t *s, const float *params, size_t nb) {
    const float *w2 = params + MLP_W2_OFF, *b2 = params + MLP_B2_OFF;
    for (size_t b = 0; b < nb; b++) {
        const float *h = s->h + b * MLP_HIDDEN;
        float *o = s->logits + b * MLP_OUT;
        for (int c = 0; c < MLP_OUT; c++) o[c] = b2[c] + mlp_dot_hidden(h, w2 + c * MLP_HIDDEN);
    }
}

/* log(sum(exp(o))) computed stably; returns the max index in *argmax. */
static float mlp_logsumexp(const float *o, int *argmax) {
    int am = 0;
    for (int c = 1; c < MLP_OUT; c++)
        if (o[c] > o[am]) am = c;
    float m = o[am], sum = 0.0f;
    for (int c = 0; c < MLP_OUT; c++) sum += expf(o[c] - m);
    if (argmax) *argmax = am;
    return m + logf(sum);
}

/* Points xrow at the chunk's examples. */
static void mlp_gather(mlp_scratch_t *s, const float *images, const uint32_t *idx, size_t off, size_t nb) {
    for (size_t b = 0; b < nb; b++) {
        size_t row = idx ? idx[off + b] : off + b;
        s->xrow[b] = images + row * MLP_IN;
    }
}

/* Cross-entropy of the chunk; when want_grad, replaces logits by d loss/d logits
 * (scaled by inv_batch so the gradient is that of the mean over the batch). */
static double mlp_softmax_xent(mlp_scratch_t *s, const uint8_t *labels, const uint32_t *idx, size_t off,
                               size_t nb, int want_grad, float inv_batch) {
    double total = 0.0;
    for (size_t b = 0; b < nb; b++) {
        float *o = s->logits + b * MLP_OUT;
        const int y = labels[idx ? idx[off + b] : off + b];
        const float lse = mlp_logsumexp(o, NULL);
        total += (double)(lse - o[y]);
        if (want_grad) {
            for (int c = 0; c < MLP_OUT; c++) {
                float p = expf(o[c] - lse);
                o[c] = (p - (c == y ? 1.0f : 0.0f)) * inv_batch;
            }
        }
    }
    return total;
}

/* Layer 2 backward plus ReLU: accumulates dW2, db2, db1 and fills dz. */
static void mlp_backward_head(mlp_scratch_t *s, const float *params, float *grad, size_t nb) {
    const float *w2 = params + MLP_W2_OFF;
    float *gw2 = grad + MLP_W2_OFF, *gb2 = grad + MLP_B2_OFF, *gb1 = grad + MLP_B1_OFF;
    for (size_t b = 0; b < nb; b++) {
        const float *dl = s->logits + b * MLP_OUT;
        const float *h = s->h + b * MLP_HIDDEN;
        float *dz = s->dz + b * MLP_HIDDEN;
        for (int j = 0; j < MLP_HIDDEN; j++) dz[j] = 0.0f;
        for (int c = 0; c < MLP_OUT; c++) {
            const float g = dl[c];
            const float *w = w2 + c * MLP_HIDDEN;
            float *gw = gw2 + c * MLP_HIDDEN;
            gb2[c] += g;
            for (int j = 0; j < MLP_HIDDEN; j++) {
                gw[j] += g * h[j];
                dz[j] += g * w[j];
            }
        }
        for (int j = 0; j < MLP_HIDDEN; j++) {
            dz[j] = h[j] > 0.0f ? dz[j] : 0.0f;
            gb1[j] += dz[j];
        }
    }
}

/* dW1 += dz^T X over the chunk: 4 hidden units x 8 pixels per register block,
 * visiting only the examples whose 8 pixels are not all zero. */
static void mlp_backward_w1(mlp_scratch_t *s, float *grad, size_t nb) {
    float *gw1 = grad + MLP_W1_OFF;
    for (int kb = 0; kb < MLP_NKB; kb++) {
        uint16_t *list = s->nzb + (size_t)kb * s->chunk;
        int len = 0;
        for (size_t b = 0; b < nb; b++) {
            const float *x = s->xrow[b] + kb * MLP_KB;
            int any = 0;
            for (int t = 0; t < MLP_KB; t++) any |= x[t] != 0.0f;
            list[len] = (uint16_t)b;
            len += any;
        }
        s->nzb_len[kb] = (uint16_t)len;
    }
    for (int kb = 0; kb < MLP_NKB; kb++) {
        const uint16_t *list = s->nzb + (size_t)kb * s->chunk;
        const int len = s->nzb_len[kb];
        if (len == 0) continue;
        for (int j0 = 0; j0 < MLP_HIDDEN; j0 += MLP_JB) {
            mlp_v4 a0l = {0}, a0h = {0}, a1l = {0}, a1h = {0}, a2l = {0}, a2h = {0}, a3l = {0}, a3h = {0};
            for (int i = 0; i < len; i++) {
                const int b = list[i];
                const float *x = s->xrow[b] + kb * MLP_KB;
                const mlp_v4 xl = mlp_load(x), xh = mlp_load(x + 4);
                const float *d = s->dz + (size_t)b * MLP_HIDDEN + j0;
                const float d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
                a0l += d0 * xl;
                a0h += d0 * xh;
                a1l += d1 * xl;
                a1h += d1 * xh;
                a2l += d2 * xl;
                a2h += d2 * xh;
                a3l += d3 * xl;
                a3h += d3 * xh;
            }
            float *g = gw1 + (size_t)j0 * MLP_IN + kb * MLP_KB;
            mlp_store(g, mlp_load(g) + a0l);
            mlp_store(g + 4, mlp_load(g + 4) + a0h);
            g += MLP_IN;
            mlp_store(g, mlp_load(g) + a1l);
            mlp_store(g + 4, mlp_load(g + 4) + a1h);
            g += MLP_IN;
            mlp_store(g, mlp_load(g) + a2l);
            mlp_store(g + 4, mlp_load(g + 4) + a2h);
            g += MLP_IN;
            mlp_store(g, mlp_load(g) + a3l);
            mlp_store(g + 4, mlp_load(g + 4) + a3h);
        }
    }
}

static float mlp_run(const float *params, const float *images, const uint8_t *labels, const uint32_t *idx,
                     size_t batch, float *grad, mlp_scratch_t *s) {
    if (batch == 0) return NAN;
    if (grad) memset(grad, 0, sizeof(float) * MLP_NPARAMS);
    mlp_pack_w1(params + MLP_W1_OFF, s->w1p);
    const float inv_batch = 1.0f / (float)batch;
    double total = 0.0;
    for (size_t off = 0; off < batch; off += s->chunk) {
        const size_t nb = batch - off < s->chunk ? batch - off : s->chunk;
        mlp_gather(s, images, idx, off, nb);
        mlp_forward_hidden(s, params + MLP_B1_OFF, nb);
        mlp_forward_logits(s, params, nb);
        total += mlp_softmax_xent(s, labels, idx, off, nb, grad != NULL, inv_batch);
        if (grad) {
            mlp_backward_head(s, params, grad, nb);
            mlp_backward_w1(s, grad, nb);
        }
    }
    return (float)(total / (double)batch);
}

float mlp_loss_grad(const float *params, const float *images, const uint8_t *labels, const uint32_t *idx,
                    size_t batch, float *grad, mlp_scratch_t *s) {
    return mlp_run(params, images, labels, idx, batch, grad, s);
}

float mlp_loss(const float *params, const float *images, const uint8_t *labels, const uint32_t *idx,
               size_t batch, mlp_scratch_t *s) {
    return mlp_run(params, images, labels, idx, batch, NULL, s);
}

int mlp_evaluate(const float *params, const mnist_set_t *set, mlp_scratch_t *scratch, float *accuracy,
                 float *loss) {
    if (!set || set->n == 0) return -1;
    mlp_scratch_t *s = scratch ? scratch : mlp_scratch_new(256);
    if (!s) return -1;
    mlp_pack_w1(params + MLP_W1_OFF, s->w1p);
    double total = 0.0;
    size_t correct = 0;
    for (size_t off = 0; off < set->n; off += s->chunk) {
        const size_t nb = set->n - off < s->chunk ? set->n - off : s->chunk;
        mlp_gather(s, set->images, NULL, off, nb);
        mlp_forward_hidden(s, params + MLP_B1_OFF, nb);
        mlp_forward_logits(s, params, nb);
        for (size_t b = 0; b < nb; b++) {
            const float *o = s->logits + b * MLP_OUT;
            int am;
            const float lse = mlp_logsumexp(o, &am);
            const int y = set->labels[off + b];
            total += (double)(lse - o[y]);
            correct += am == y;
        }
    }
    if (!scratch) mlp_scratch_free(s);
    if (accuracy) *accuracy = (float)((double)correct / (double)set->n);
    if (loss) *loss = (float)(total / (double)set->n);
    return 0;
}
