/* op_rhd.c - the collectives by recursive halving and doubling (ring_rhd.c, ring_rhd_ar.c), and the all-reduce by
 * recursive doubling (ring_rd_ar.c, the same partners), for an op whose COMMENCE chose them: the connections to its partners (not ring neighbours: made on demand, then kept in the
 * connection table like the ring's), opened concurrently through the op's wait (connect within the connect
 * timeout, the partner's stream within the peer timeout) on the op's slots (one stripe each), held until the
 * verdict (op_record.h). */
#include "op/op_record.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/base.h"
#include "p2p/p2p.h"
#include "pccl_kernels.h"

/* The partners' connection pairs of one op on each of its slots (at most 1 + log2 of the world partners: the
 * fold partner and one per step, or the tree's parent and children): pair (s, i) at s * n + i. */
#define RHD_LINKS_MAX 40
#define RHD_CONNECT_THREADS 8 /* partners' connections opened at once */
struct op_rhd_links {
    uint32_t n, k;
    uint32_t pos[RHD_LINKS_MAX];
    uint32_t slot[64];
    p2p_conn_t **tx, **rx;
};

/* Where it exists (as the master's msm_algo_has_rhd): an all-reduce, quantized or not (rhd or recursive doubling);
 * a plain reduce-scatter, an all-gather or an all-gather of variable counts of any world, ranked by ring position;
 * a broadcast with one holder (the binomial tree). A COMMENCE that names it for anything else runs the ring. */
int op_algo_rhd(const pccl_op_t *o) {
    int k = o->d.kind;
    uint8_t algo = o->commence.u.commence.algo;
    if (algo == WIRE_ALGO_RD) return k == pcclExtCollAllReduce;
    if (algo != WIRE_ALGO_RHD) return 0;
    if (k == pcclExtCollAllReduce) return 1;
    if (o->d.quantization_options.algorithm != pcclQuantNone) return 0;
    if (k == pcclExtCollBroadcast) { /* the tree: one holder, the root */
        uint32_t holders = 0;
        for (uint32_t p = 0; o->holds && p < o->world; p++) holders += o->holds[p] != 0;
        return holders == 1;
    }
    if (k != pcclExtCollReduceScatter && k != pcclExtCollAllGather && k != pcclExtCollAllGatherV) return 0;
    if (o->world < 2 || !o->rank_of) return 0;
    for (uint32_t p = 0; p < o->world; p++)
        if (o->rank_of[p] != p) return 0;
    return 1;
}

/* Tells the master that the member at ring position peer could not be reached (rc: how), as the ring reports a
 * neighbour (op_reports_unreachable); once the op is aborted, no report at all: a member has up to log2 of the
 * world partners, whose connects the abort cancels, and two reports about one peer remove it. */
static void report(pccl_op_t *o, uint32_t peer, int rc) {
    if (pwait_result(&o->w) || !op_reports_unreachable(o, rc)) return;
    wire_msg_t rep = {.type = C2M_PEER_UNREACHABLE};
    memcpy(rep.u.welcome.uuid, o->commence.u.commence.ring[peer], 16);
    comm_send(o->comm, o->epoch, &rep);
}

/* The partners' TX connections still missing, opened at once by up to RHD_CONNECT_THREADS threads (each
 * connect bounded by the connect timeout and ended by the op's cancel). */
typedef struct rhd_dial {
    pccl_op_t *o;
    struct op_rhd_links *l;
    uint32_t idx[RHD_LINKS_MAX * 64], n;
    atomic_uint next;
    atomic_uint failed; /* 1 + the first pair that could not connect; 0: none */
} rhd_dial_t;

static void *dial_main(void *arg) {
    rhd_dial_t *d = arg;
    pcclComm_t *c = d->o->comm;
    for (uint32_t j; (j = atomic_fetch_add(&d->next, 1)) < d->n && !atomic_load(&d->failed);) {
        uint32_t x = d->idx[j], i = x % d->l->n;
        d->l->tx[x] = p2p_get_tx(c, d->o->commence.u.commence.ring[d->l->pos[i]], d->l->slot[x / d->l->n],
                                 c->connect_timeout_ms, &d->o->w);
        unsigned none = 0;
        if (!d->l->tx[x]) atomic_compare_exchange_strong(&d->failed, &none, x + 1);
    }
    return NULL;
}

/* Every pair's TX connection: those in the table at once, the others dialled concurrently. 0, or 1 + the
 * first pair that could not connect. */
static uint32_t dial_all(pccl_op_t *o, struct op_rhd_links *l) {
    rhd_dial_t *d = calloc(1, sizeof *d);
    if (!d) return 1;
    d->o = o, d->l = l;
    for (uint32_t x = 0; x < l->n * l->k; x++)
        if (!(l->tx[x] = p2p_find_tx(o->comm, o->commence.u.commence.ring[l->pos[x % l->n]], l->slot[x / l->n])))
            d->idx[d->n++] = x;
    pthread_t th[RHD_CONNECT_THREADS];
    uint32_t nt = d->n < RHD_CONNECT_THREADS ? d->n : RHD_CONNECT_THREADS, started = 0;
    for (uint32_t t = 1; t < nt; t++, started++)
        if (pthread_create(&th[t], NULL, dial_main, d) != 0) break;
    dial_main(d); /* the calling thread dials too (alone for one missing pair) */
    for (uint32_t t = 1; t <= started; t++) pthread_join(th[t], NULL);
    uint32_t failed = atomic_load(&d->failed);
    free(d);
    return failed;
}

/* Connects to every partner of the schedule on every slot of the op before any data moves (the TX connections
 * concurrently, then RX from each: a TX needs only the partner's acceptor, so no order of members can
 * deadlock), as the ring opens its streams first: every stream a partner may send on during the op is then
 * this op's to drop after a failure, none is left behind with a stale op's bytes. @return 0, -PERR_IO or
 * -PERR_TIMEOUT with io->err set. */
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
    if (l->n == 0) return 0;
    if (!(l->tx = calloc((size_t)l->n * l->k, sizeof *l->tx)) || !(l->rx = calloc((size_t)l->n * l->k, sizeof *l->rx))) {
        snprintf(io->err, sizeof io->err, "out of memory");
        return -PERR_NOMEM;
    }
    uint32_t failed = dial_all(o, l);
    if (failed) {
        uint32_t at = l->pos[(failed - 1) % l->n];
        snprintf(io->err, sizeof io->err, "cannot connect to the partner at ring position %u", at);
        report(o, at, -PERR_IO);
        return -PERR_IO;
    }
    for (uint32_t x = 0; x < l->n * l->k; x++) {
        uint32_t at = l->pos[x % l->n];
        if (!(l->rx[x] = p2p_get_rx(c, o->commence.u.commence.ring[at], l->slot[x / l->n], c->timeout_ms, &o->w))) {
            snprintf(io->err, sizeof io->err, "the partner at ring position %u did not connect", at);
            report(o, at, -PERR_TIMEOUT);
            return -PERR_TIMEOUT;
        }
        p2p_pace_tx(c, l->tx[x]);
    }
    return 0;
}

/* A failing stripe ends its siblings (and, through the shut connections, its partners' stripes) at once. */
static void shut_links(void *ctx) {
    const struct op_rhd_links *l = ((pccl_op_t *)ctx)->rhd;
    for (uint32_t x = 0; x < l->n * l->k; x++) {
        if (l->tx[x]) shutdown(l->tx[x]->fd, SHUT_RDWR);
        if (l->rx[x]) shutdown(l->rx[x]->fd, SHUT_RDWR);
    }
}

static int link_peer(void *ctx, ring_io_t *io, uint32_t peer) {
    const struct op_rhd_links *l = ((pccl_op_t *)ctx)->rhd;
    uint32_t i = 0;
    while (i < l->n && l->pos[i] != peer) i++;
    if (i == l->n || io->stripe >= l->k) {
        snprintf(io->err, sizeof io->err, "ring position %u (stripe %u) is no partner", peer, io->stripe);
        return -PERR_INVALID;
    }
    i += io->stripe * l->n;
    io->tx_fd = l->tx[i]->fd;
    io->rx_fd = l->rx[i]->fd;
    io->tx_link = l->tx[i]->link;
    io->rx_link = l->rx[i]->link;
    return 0;
}

/* The links of the op on its first `slots` slots of its COMMENCE, opened. 0 or -PERR_<NAME> with io->err. */
static int links(pccl_op_t *o, ring_io_t *io, uint32_t slots) {
    if (!o->rhd && !(o->rhd = calloc(1, sizeof *o->rhd))) {
        snprintf(io->err, sizeof io->err, "out of memory");
        return -PERR_NOMEM;
    }
    for (uint32_t i = 0; i < 64 && o->rhd->k < slots; i++)
        if (o->commence.u.commence.slots >> i & 1) o->rhd->slot[o->rhd->k++] = i;
    return open_links(o, o->rhd, io);
}

int op_rhd_allreduce(pccl_op_t *o, ring_io_t *ios, uint32_t k) {
    const pcclExtCollDescriptor_t *d = &o->d;
    const pcclQuantizationOptions_t *qo = &d->quantization_options;
    int rd = o->commence.u.commence.algo == WIRE_ALGO_RD;
    size_t need = qo->algorithm == pcclQuantNone ? 0
                  : rd ? ring_rd_quant_wire_bytes(d->count, qo->quantized_datatype)
                       : ring_rhd_quant_wire_bytes(d->count, qo->quantized_datatype, o->world), cap = 0;
    uint8_t *wire = need ? bufpool_get(&o->comm->buffers, need, &cap) : NULL;
    int rc = need && !wire ? -PERR_NOMEM : links(o, ios, k);
    if (rc == -PERR_NOMEM) snprintf(ios->err, sizeof ios->err, "out of memory for %zu bytes of quantized blocks", need);
    ring_rhd_ar_t a = {.link = link_peer, .shut = shut_links, .link_ctx = o,
                       .ar = {.src = d->sendbuf, .buf = d->recvbuf, .count = d->count, .dt = d->datatype,
                              .qdt = qo->quantized_datatype, .op = d->op, .algo = qo->algorithm, .wire = wire,
                              .pos = o->pos, .world = o->world, .op_seq = o->op_seq}};
    if (rc == 0) rc = rd ? ring_allreduce_rd(ios, k, &a) : ring_allreduce_rhd(ios, k, &a);
    bufpool_put(&o->comm->buffers, wire, cap);
    return rc;
}

/* The partners of the op as the rhd collectives take them. */
static ring_rhd_net_t net_of(pccl_op_t *o) {
    return (ring_rhd_net_t){.link = link_peer, .shut = shut_links, .ctx = o, .pos = o->pos, .world = o->world,
                            .op_seq = o->op_seq};
}

int op_rhd_reduce_scatter(pccl_op_t *o, ring_io_t *ios, uint32_t k, void *out) {
    const pcclExtCollDescriptor_t *d = &o->d;
    size_t need = ring_reduce_scatter_rhd_work_bytes(d->count, d->datatype, o->pos, o->world), cap = 0;
    /* the partial sums come from the pool: fresh memory would fault in on every operation */
    uint8_t *work = need ? bufpool_get(&o->comm->buffers, need, &cap) : NULL;
    int rc = need && !work ? -PERR_NOMEM : links(o, ios, k);
    if (rc == -PERR_NOMEM) snprintf(ios->err, sizeof ios->err, "out of memory for %zu bytes of partial sums", need);
    ring_rhd_net_t net = net_of(o);
    if (rc == 0) rc = ring_reduce_scatter_rhd(ios, k, &net, d->sendbuf, out, d->count, d->datatype, d->op, work, cap);
    bufpool_put(&o->comm->buffers, work, cap);
    return rc;
}

int op_rhd_all_gather(pccl_op_t *o, ring_io_t *ios, uint32_t k, const void *src) {
    int rc = links(o, ios, k);
    ring_rhd_net_t net = net_of(o);
    if (rc != 0) return rc;
    return ring_allgather_rhd(ios, k, &net, src, o->d.recvbuf, o->counts, pccl_dtype_size(o->d.datatype));
}

int op_rhd_broadcast(pccl_op_t *o, ring_io_t *ios, uint32_t k, const void *src) {
    int rc = links(o, ios, k);
    ring_rhd_net_t net = net_of(o);
    if (rc != 0) return rc;
    return ring_broadcast_tree(ios, k, &net, src, o->d.recvbuf, o->move_bytes, o->commence.u.commence.root);
}

void op_rhd_release(pccl_op_t *o, int kill) {
    struct op_rhd_links *l = o->rhd;
    for (uint32_t x = 0; l && x < l->n * l->k; x++) {
        if (l->tx && l->tx[x]) p2p_release(o->comm, l->tx[x], kill);
        if (l->rx && l->rx[x]) p2p_release(o->comm, l->rx[x], kill);
    }
    if (l) free(l->tx), free(l->rx);
    free(l);
    o->rhd = NULL;
}
