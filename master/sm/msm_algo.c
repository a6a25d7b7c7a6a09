/*
 * msm_algo.c - the cost model and choice of msm_algo.h (pure). The alpha-beta model is Hockney's; the ring's
 * cost is Patarasuk & Yuan's (JPDC 2009), recursive halving and doubling's Rabenseifner's (ICCS 2004) with the
 * fold of Thakur, Rabenseifner & Gropp (IJHPCA 2005).
 */
#include "sm/msm_algo.h"

#include "base/base.h"
#include "pccl_coll.h"
#include "sm/msm_internal.h"

double msm_algo_ring_s(const msm_algo_cost_t *c) {
    double n = c->world;
    if (c->bcast) return (n - 1.0) * c->alpha + c->bytes * c->beta_ring;
    return 2.0 * (n - 1.0) * (c->alpha + c->bytes * c->beta_ring / n);
}

double msm_algo_rhd_s(const msm_algo_cost_t *c) {
    uint32_t p = 1, steps = 0;
    while (p * 2 <= c->world) p *= 2, steps++;
    double byte = c->bytes * c->beta_rhd * MSM_ALGO_RHD_BYTE_FACTOR;
    if (c->bcast) return (steps + (c->world > p)) * (c->alpha + byte);
    double t = 2.0 * steps * c->alpha + 2.0 * (p - 1.0) / p * byte;
    if (c->world > p) t += 2.0 * (c->alpha + byte);
    return t;
}

int msm_algo_has_rhd(unsigned kind, int quantized, int by_position, uint32_t holders, uint32_t world) {
    if (kind == pcclExtCollAllReduce) return 1;
    if (quantized) return 0;
    if (kind == pcclExtCollBroadcast) return holders == 1;
    if (kind != pcclExtCollReduceScatter && kind != pcclExtCollAllGather && kind != pcclExtCollAllGatherV) return 0;
    if (kind != pcclExtCollReduceScatter) return by_position && world >= 2; /* all-gathers fold */
    return by_position && world >= 2 && (world & (world - 1)) == 0;
}

uint8_t msm_algo_choose(int has_rhd, uint8_t forced, const msm_algo_cost_t *c) {
    if (!has_rhd || forced == WIRE_ALGO_RING) return WIRE_ALGO_RING;
    if (forced == WIRE_ALGO_RHD) return WIRE_ALGO_RHD;
    if (!c) return WIRE_ALGO_RING;
    return c->world > 2 && msm_algo_rhd_s(c) < msm_algo_ring_s(c) ? WIRE_ALGO_RHD : WIRE_ALGO_RING;
}

/* One pass over the bandwidth store (no per-pair lookups: an operation of hundreds of peers stays cheap). */
static double slowest_mbps(const msm_t *m) {
    double slowest = 0;
    for (int i = 0; i < m->nbw; i++)
        if (m->bw[i].mbps > 0 && (slowest == 0 || m->bw[i].mbps < slowest)) slowest = m->bw[i].mbps;
    return slowest > 0 ? slowest : MSM_ALGO_DEFAULT_MBPS;
}

uint8_t msm_algo_for(const msm_t *m, int has_rhd, unsigned kind, uint8_t forced, uint64_t bytes, uint32_t world) {
    if (!has_rhd || forced != WIRE_ALGO_AUTO) return msm_algo_choose(has_rhd, forced, NULL);
    double beta = 8.0 / (slowest_mbps(m) * 1e6);
    msm_algo_cost_t c = {.bytes = (double)bytes, .alpha = MSM_ALGO_ALPHA_S, .beta_ring = beta, .beta_rhd = beta,
                         .world = world, .bcast = kind == pcclExtCollBroadcast};
    return msm_algo_choose(has_rhd, forced, &c);
}

const char *msm_algo_name(uint8_t algo) {
    return algo == WIRE_ALGO_AUTO ? "auto" : algo == WIRE_ALGO_RING ? "ring" : algo == WIRE_ALGO_RHD ? "rhd"
                                                                                                    : "unknown";
}
