/* op_rhd.c - an all-reduce by recursive halving and doubling (ring_rhd.c) for an op whose COMMENCE chose it:
 * the connections to its partners (not ring neighbours: made on demand, then kept in the connection table like
 * the ring's), opened through the op's wait (connect within the connect timeout, the partner's stream within
 * the peer timeout) on the op's first slot, held until the verdict (op_record.h). */
#include "op/op_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "p2p/p2p.h"
#include "pccl_kernels.h"

/* The partners' connection pairs of one op (at most 1 + log2 of the world: the fold partner and one per step, or
 * the tree's parent and children). */
#define RHD_LINKS_MAX 40
struct op_rhd_links {
    uint32_t n, slot;
    uint32_t pos[RHD_LINKS_MAX];
    p2p_conn_t *tx[RHD_LINKS_MAX], *rx[RHD_LINKS_MAX];
};

/* Where it exists (as the master's msm_algo_has_rhd): a plain all-reduce; a plain reduce-scatter, an all-gather
 * or an all-gather of variable counts of a power-of-two world ranked by ring position; a broadcast with one holder
 * (the binomial tree). A COMMENCE that names it for anything else runs the ring. */
int op_algo_rhd(const pccl_op_t *o) {
    int k = o->d.kind;
    if (o->commence.u.commence.algo != WIRE_ALGO_RHD || o->d.quantization_options.algorithm != pcclQuantNone)
        return 0;
    if (k == pcclExtCollAllReduce) return 1;
    if (k == pcclExtCollBroadcast) { /* the tree: one holder, the root */
        uint32_t holders = 0;
        for (uint32_t p = 0; o->holds && p < o->world; p++) holders += o->holds[p] != 0;
        return holders == 1;
    }
    if (k != pcclExtCollReduceScatter && k != pcclExtCollAllGather && k != pcclExtCollAllGatherV) return 0;
    if (o->world < 2 || (o->world & (o->world - 1)) || !o->rank_of) return 0;
    for (uint32_t p = 0; p < o->world; p++)
        if (o->rank_of[p] != p) return 0;
    return 1;
}

/* Tells the master that the member at ring position peer could not be reached (as the ring reports a
 * neighbour); a connection that failed because the op was aborted meanwhile is no report. */
static void report(pccl_op_t *o, uint32_t peer) {
    if (pwait_result(&o->w)) return;
    wire_msg_t rep = {.type = C2M_PEER_UNREACHABLE};
    memcpy(rep.u.welcome.uuid, o->commence.u.commence.ring[peer], 16);
    comm_send(o->comm, o->epoch, &rep);
}

/* Connects to every partner of the schedule before any data moves (TX to each, then RX from each: a TX needs
 * only the partner's acceptor, so no order of members can deadlock), as the ring opens its streams first: every
 * stream a partner may send on during the op is then this op's to drop after a failure, none is left behind
 * with a stale op's bytes. @return 0, -PERR_IO or -PERR_TIMEOUT with io->err set. */
static int open_links(pccl_op_t *o, struct op_rhd_links *l, ring_io_t *io) {
    pcclComm_t *c = o->comm;
    ring_rhd_sched_t s;
    ring_rhd_schedule(o->pos, o->world, &s);
    if (o->d.kind == pcclExtCollBroadcast) {
        l->n = ring_bcast_tree_partners(o->commence.u.commence.root, o->pos, o->world, l->pos);
    } else {
        if (ring_rhd_fold_partner(&s) != RING_RHD_FOLDED) l->pos[l->n++] = ring_rhd_fold_partner(&s);
        for (uint32_t k = 0; s.vid != RING_RHD_FOLDED && k < s.steps && l->n < RHD_LINKS_MAX; k++)
            l->pos[l->n++] = ring_rhd_partner(&s, k);
    }
    for (uint32_t i = 0; i < l->n; i++)
        if (!(l->tx[i] = p2p_get_tx(c, o->commence.u.commence.ring[l->pos[i]], l->slot, c->connect_timeout_ms,
                                    &o->w))) {
            snprintf(io->err, sizeof io->err, "cannot connect to the partner at ring position %u", l->pos[i]);
            report(o, l->pos[i]);
            return -PERR_IO;
        }
    for (uint32_t i = 0; i < l->n; i++) {
        if (!(l->rx[i] = p2p_get_rx(c, o->commence.u.commence.ring[l->pos[i]], l->slot, c->timeout_ms, &o->w))) {
            snprintf(io->err, sizeof io->err, "the partner at ring position %u did not connect", l->pos[i]);
            report(o, l->pos[i]);
            return -PERR_TIMEOUT;
        }
        p2p_pace_tx(c, l->tx[i]);
    }
    return 0;
}

static int link_peer(void *ctx, ring_io_t *io, uint32_t peer) {
    const struct op_rhd_links *l = ((pccl_op_t *)ctx)->rhd;
    uint32_t i = 0;
    while (i < l->n && l->pos[i] != peer) i++;
    if (i == l->n) {
        snprintf(io->err, sizeof io->err, "ring position %u is no partner", peer);
        return -PERR_INVALID;
    }
    io->tx_fd = l->tx[i]->fd;
    io->rx_fd = l->rx[i]->fd;
    io->tx_link = l->tx[i]->link;
    io->rx_link = l->rx[i]->link;
    return 0;
}

/* The links of the op on the first slot of its COMMENCE, opened. 0 or -PERR_<NAME> with io->err. */
static int links(pccl_op_t *o, ring_io_t *io) {
    if (!o->rhd && !(o->rhd = calloc(1, sizeof *o->rhd))) {
        snprintf(io->err, sizeof io->err, "out of memory");
        return -PERR_NOMEM;
    }
    o->rhd->slot = (uint32_t)__builtin_ctzll(o->commence.u.commence.slots);
    return open_links(o, o->rhd, io);
}

int op_rhd_allreduce(pccl_op_t *o, ring_io_t *io) {
    const pcclExtCollDescriptor_t *d = &o->d;
    int rc = links(o, io);
    if (rc != 0) return rc;
    return ring_allreduce_rhd(io, link_peer, o, d->sendbuf, d->recvbuf, d->count, d->datatype, d->op, o->pos,
                              o->world, o->op_seq);
}

int op_rhd_reduce_scatter(pccl_op_t *o, ring_io_t *io, void *out) {
    const pcclExtCollDescriptor_t *d = &o->d;
    size_t need = ring_reduce_scatter_rhd_work_bytes(d->count, d->datatype, o->pos, o->world), cap = 0;
    /* the partial sums come from the pool: fresh memory would fault in on every operation */
    uint8_t *work = need ? bufpool_get(&o->comm->buffers, need, &cap) : NULL;
    int rc = need && !work ? -PERR_NOMEM : links(o, io);
    if (rc == -PERR_NOMEM) snprintf(io->err, sizeof io->err, "out of memory for %zu bytes of partial sums", need);
    if (rc == 0)
        rc = ring_reduce_scatter_rhd(io, link_peer, o, d->sendbuf, out, d->count, d->datatype, d->op, work, cap,
                                     o->pos, o->world, o->op_seq);
    bufpool_put(&o->comm->buffers, work, cap);
    return rc;
}

int op_rhd_all_gather(pccl_op_t *o, ring_io_t *io, const void *src) {
    int rc = links(o, io);
    if (rc != 0) return rc;
    return ring_allgather_rhd(io, link_peer, o, src, o->d.recvbuf, o->counts, pccl_dtype_size(o->d.datatype),
                              o->pos, o->world, o->op_seq);
}

int op_rhd_broadcast(pccl_op_t *o, ring_io_t *io, const void *src) {
    int rc = links(o, io);
    if (rc != 0) return rc;
    return ring_broadcast_tree(io, link_peer, o, src, o->d.recvbuf, o->move_bytes, o->commence.u.commence.root,
                               o->pos, o->world, o->op_seq);
}

void op_rhd_release(pccl_op_t *o, int kill) {
    struct op_rhd_links *l = o->rhd;
    for (uint32_t i = 0; l && i < l->n; i++) {
        p2p_release(o->comm, l->tx[i], kill);
        p2p_release(o->comm, l->rx[i], kill);
    }
    free(l);
    o->rhd = NULL;
}
