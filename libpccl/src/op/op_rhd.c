/* op_rhd.c - an all-reduce by recursive halving and doubling (ring_rhd.c) for an op whose COMMENCE chose it:
 * the connections to its partners, opened on demand through the op's wait (connect within the connect timeout,
 * the partner's stream within the peer timeout) on the op's first slot, held until the verdict (op_record.h). */
#include "op/op_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "p2p/p2p.h"

/* The partners' connection pairs of one op (at most 2 + log2 of the world: the fold partner and one per step). */
#define RHD_LINKS_MAX 40
struct op_rhd_links {
    uint32_t n, slot;
    uint32_t pos[RHD_LINKS_MAX];
    p2p_conn_t *tx[RHD_LINKS_MAX], *rx[RHD_LINKS_MAX];
};

/* Only a plain all-reduce has it: a COMMENCE that names it for anything else runs the ring. */
int op_algo_rhd(const pccl_op_t *o) {
    return o->commence.u.commence.algo == WIRE_ALGO_RHD && o->d.kind == pcclExtCollAllReduce &&
           o->d.quantization_options.algorithm == pcclQuantNone;
}

/* Tells the master that the member at ring position peer could not be reached (as the ring reports a
 * neighbour); a missing stream because the op was aborted meanwhile is no report. */
static void report(pccl_op_t *o, uint32_t peer, int rc) {
    if (rc == -PERR_TIMEOUT && pwait_result(&o->w)) return;
    wire_msg_t rep = {.type = C2M_PEER_UNREACHABLE};
    memcpy(rep.u.welcome.uuid, o->commence.u.commence.ring[peer], 16);
    comm_send(o->comm, o->epoch, &rep);
}

static int link_peer(void *ctx, ring_io_t *io, uint32_t peer) {
    pccl_op_t *o = ctx;
    pcclComm_t *c = o->comm;
    struct op_rhd_links *l = o->rhd;
    const uint8_t *uuid = o->commence.u.commence.ring[peer];
    uint32_t i = 0;
    while (i < l->n && l->pos[i] != peer) i++;
    if (i == l->n) {
        if (l->n == RHD_LINKS_MAX) {
            snprintf(io->err, sizeof io->err, "more than %d partners", RHD_LINKS_MAX);
            return -PERR_INVALID;
        }
        l->pos[i] = peer;
        l->n++;
        if (!(l->tx[i] = p2p_get_tx(c, uuid, l->slot, c->connect_timeout_ms, &o->w))) {
            snprintf(io->err, sizeof io->err, "cannot connect to partner at ring position %u", peer);
            report(o, peer, -PERR_IO);
            return -PERR_IO;
        }
        if (!(l->rx[i] = p2p_get_rx(c, uuid, l->slot, c->timeout_ms, &o->w))) {
            snprintf(io->err, sizeof io->err, "partner at ring position %u did not connect", peer);
            report(o, peer, -PERR_TIMEOUT);
            return -PERR_TIMEOUT;
        }
        p2p_pace_tx(c, l->tx[i]);
    }
    io->tx_fd = l->tx[i]->fd;
    io->rx_fd = l->rx[i]->fd;
    io->tx_link = l->tx[i]->link;
    io->rx_link = l->rx[i]->link;
    return 0;
}

int op_rhd_allreduce(pccl_op_t *o, ring_io_t *io, uint32_t slot) {
    const pcclExtCollDescriptor_t *d = &o->d;
    if (!o->rhd && !(o->rhd = calloc(1, sizeof *o->rhd))) {
        snprintf(io->err, sizeof io->err, "out of memory");
        return -PERR_NOMEM;
    }
    o->rhd->slot = slot;
    return ring_allreduce_rhd(io, link_peer, o, d->sendbuf, d->recvbuf, d->count, d->datatype, d->op, o->pos,
                              o->world, o->op_seq);
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
