/* allreduce.c - see allreduce.h. */
#include "op/allreduce.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/base.h"
#include "p2p/p2p.h"
#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "ring/ring.h"

#define STAGING_BYTES (1u << 20)

typedef struct pccl_op {
    /* Kept when the record is recycled (op_get clears everything from `comm` on). The op's wait: cancelled
     * (-PERR_ABORTED, -PERR_RESTARTED, -PERR_LOST, -PERR_CANCELLED) for an abort from the master, a lost
     * master or destroy, which wakes its ring's poll (w.fd) and its thread (w.cv); w.cv is also signalled
     * (with comm->mu) for this op's master messages and its end, so a message wakes only the thread that
     * waits for it. */
    pwait_t w;
    pcclComm_t *comm;
    uint64_t tag;
    const void *sendbuf;
    void *recvbuf;
    pcclReduceDescriptor_t desc;
    int is_async; /* run by a pool worker (else on the caller's thread) */
    /* filled by the reader under comm->mu */
    int got_commence, got_reject, got_end, end_ok;
    int ring_done; /* its ring finished and it reported so in its epoch: only a verdict ends it */
    uint8_t reject_reason;
    uint64_t op_seq;
    wire_msg_t commence;
    /* result, written by whoever runs the op; finished (under mu) tells the awaiter */
    pcclResult_t result;
    pcclReduceInfo_t info;
    unsigned epoch; /* of the master connection its vote went to (comm.h) */
    int finished;
    struct pccl_op *next;      /* comm->ops */
    struct pccl_op *next_work; /* comm->work queue or comm->op_free */
} pccl_op_t;

/* Recycled op records kept per communicator (each holds an eventfd). */
#define OP_FREE_MAX 16

static pccl_op_t *find_op(pcclComm_t *c, uint64_t tag) {
    for (pccl_op_t *o = c->ops; o; o = o->next)
        if (o->tag == tag) return o;
    return NULL;
}

int comm_ops_outstanding(pcclComm_t *c) {
    pthread_mutex_lock(&c->mu);
    int any = c->ops != NULL;
    pthread_mutex_unlock(&c->mu);
    return any;
}


static void unlink_op_locked(pcclComm_t *c, pccl_op_t *o) {
    for (pccl_op_t **pp = &c->ops; *pp; pp = &(*pp)->next)
        if (*pp == o) {
            *pp = o->next;
            break;
        }
}

/* A zeroed op record: recycled when possible (its eventfd and condvar are reused, which saves two
 * syscalls per launch), else new. NULL when out of resources. */
static pccl_op_t *op_get(pcclComm_t *c) {
    pthread_mutex_lock(&c->mu);
    pccl_op_t *o = c->op_free;
    if (o) {
        c->op_free = o->next_work;
        c->nop_free--;
    }
    pthread_mutex_unlock(&c->mu);
    if (o) {
        if (pwait_result(&o->w)) pwait_reset(&o->w); /* an open wait has nothing to drain */
        memset((char *)o + offsetof(pccl_op_t, comm), 0, sizeof *o - offsetof(pccl_op_t, comm));
        return o;
    }
    o = calloc(1, sizeof *o);
    if (!o) return NULL;
    if (pwait_init(&o->w, &c->mu, NULL, 1) != 0) {
        free(o);
        return NULL;
    }
    return o;
}

static void op_destroy(pccl_op_t *o) {
    pwait_destroy(&o->w);
    free(o);
}

/* Returns an op that nobody references any more (unlinked, not queued) to the free list. */
static void op_put(pcclComm_t *c, pccl_op_t *o) {
    wire_msg_free(&o->commence);
    memset(&o->commence, 0, sizeof o->commence);
    pthread_mutex_lock(&c->mu);
    if (c->nop_free < OP_FREE_MAX) {
        o->next_work = c->op_free;
        c->op_free = o;
        c->nop_free++;
        o = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    if (o) op_destroy(o);
}

int allreduce_route(pcclComm_t *c, wire_msg_t *msg) {
    uint64_t tag;
    switch (msg->type) {
    case M2C_COLL_COMMENCE: tag = msg->u.commence.tag; break;
    case M2C_COLL_REJECT: tag = msg->u.reject.tag; break;
    case M2C_COLL_ABORT: case M2C_COLL_COMPLETE: tag = msg->u.coll.tag; break;
    default: return 0;
    }
    pthread_mutex_lock(&c->mu);
    pccl_op_t *o = find_op(c, tag);
    int taken = 0;
    if (o) {
        if (msg->type == M2C_COLL_COMMENCE && !o->got_commence && !o->got_reject) {
            o->commence = *msg;
            o->op_seq = msg->u.commence.op_seq;
            o->got_commence = 1;
            taken = 1;
        } else if (msg->type == M2C_COLL_REJECT && !o->got_commence) {
            o->got_reject = 1;
            o->reject_reason = msg->u.reject.reason;
        } else if ((msg->type == M2C_COLL_ABORT || msg->type == M2C_COLL_COMPLETE) && o->got_commence &&
                   msg->u.coll.op_seq == o->op_seq && !o->got_end) {
            /* An ABORT/COMPLETE for an older attempt of the same tag is ignored by the op_seq check. */
            o->got_end = 1;
            o->end_ok = msg->type == M2C_COLL_COMPLETE && msg->u.coll.ok;
            if (!o->end_ok) pwait_cancel_locked(&o->w, -PERR_ABORTED);
        }
        pthread_cond_broadcast(o->w.cv);
    }
    int woke = o && pwait_result(&o->w);
    pthread_mutex_unlock(&c->mu);
    if (woke) p2p_wake(c); /* a ring waiting for its predecessor's connection */
    if (!taken) wire_msg_free(msg);
    return 1;
}

void allreduce_abort_all_locked(pcclComm_t *c, int reason) {
    for (pccl_op_t *o = c->ops; o; o = o->next)
        if (!pwait_cancel_locked(&o->w, reason)) pthread_cond_broadcast(o->w.cv); /* its waits look again */
}

void allreduce_abort_all(pcclComm_t *c, int reason) {
    pthread_mutex_lock(&c->mu);
    allreduce_abort_all_locked(c, reason);
    pthread_mutex_unlock(&c->mu);
    p2p_wake(c);
}

/* Waits until pred(o) holds or the master of the op's epoch is gone; returns 0 or -1. Holds no lock on
 * return. (The reader moves the epoch and then aborts every op, which broadcasts o->cv.) */
static int wait_for(pccl_op_t *o, int (*pred)(const pccl_op_t *)) {
    pcclComm_t *c = o->comm;
    pthread_mutex_lock(&c->mu);
    while (!pred(o) && !comm_ended(c) && !atomic_load(&c->shutting_down) &&
           atomic_load(&c->master_epoch) == o->epoch)
        pwait_cond_sleep(o->w.cv, &c->mu, 0);
    int ok = pred(o);
    pthread_mutex_unlock(&c->mu);
    return ok ? 0 : -1;
}
static int started(const pccl_op_t *o) { return o->got_commence || o->got_reject; }

/* Marks the ring finished unless the master of the op's epoch is already gone (then the op ends as
 * unfinished: nobody heard of the finish, and a RESUME lists it so). 1 when marked. */
static int mark_ring_done(pccl_op_t *o) {
    pcclComm_t *c = o->comm;
    pthread_mutex_lock(&c->mu);
    int in_time = atomic_load(&c->master_epoch) == o->epoch && !comm_ended(c);
    o->ring_done = in_time;
    pthread_mutex_unlock(&c->mu);
    return in_time;
}

/* Waits for COMPLETE/ABORT of an op whose ring finished. When the master is lost meanwhile the
 * verdict comes from the restarted one (the rebuild answers every RESUME that lists the op), so
 * the wait goes on through the reconnect window. 0 with the verdict in end_ok, -1 without one. */
static int await_verdict(pccl_op_t *o) {
    pcclComm_t *c = o->comm;
    uint64_t deadline = 0;
    pthread_mutex_lock(&c->mu);
    while (!o->got_end && !comm_ended(c) && !atomic_load(&c->shutting_down)) {
        if (atomic_load(&c->master_epoch) == o->epoch) {
            pwait_cond_sleep(o->w.cv, &c->mu, 0);
            continue;
        }
        if (c->reconnect_ms <= 0 || atomic_load(&c->stopping)) break;
        uint64_t now = net_now_ms();
        if (!deadline) deadline = now + (uint64_t)c->reconnect_ms + (uint64_t)c->connect_timeout_ms + 5000;
        if (now >= deadline) break;
        pwait_cond_sleep(o->w.cv, &c->mu, deadline);
    }
    int got = o->got_end;
    pthread_mutex_unlock(&c->mu);
    return got ? 0 : -1;
}

/* Remembers a commenced op that failed here, for a RESUME (comm.h failed_ops). */
static void note_failed(pccl_op_t *o) {
    pcclComm_t *c = o->comm;
    pthread_mutex_lock(&c->mu);
    uint32_t i = c->nfailed_ops++ % FAILED_OPS_MAX;
    c->failed_ops[i].tag = o->tag;
    c->failed_ops[i].op_seq = o->op_seq;
    c->failed_ops[i].epoch = o->epoch;
    pthread_mutex_unlock(&c->mu);
}

int allreduce_unsettled_locked(pcclComm_t *c, wire_op_outcome_t **out) {
    unsigned lost = atomic_load(&c->master_epoch) - 1;
    uint32_t nfailed = c->nfailed_ops < FAILED_OPS_MAX ? c->nfailed_ops : FAILED_OPS_MAX, n = 0, cap = nfailed;
    for (pccl_op_t *o = c->ops; o; o = o->next) cap++;
    *out = NULL;
    if (cap == 0) return 0;
    wire_op_outcome_t *v = calloc(cap, sizeof *v);
    if (!v) return -PERR_NOMEM;
    for (uint32_t k = 0; k < nfailed; k++)
        if (c->failed_ops[k].epoch == lost)
            v[n++] = (wire_op_outcome_t){.tag = c->failed_ops[k].tag, .op_seq = c->failed_ops[k].op_seq};
    for (pccl_op_t *o = c->ops; o; o = o->next)
        if (o->epoch == lost && o->got_commence && !o->got_end)
            v[n++] = (wire_op_outcome_t){.tag = o->tag, .op_seq = o->op_seq, .finished = (uint8_t)o->ring_done};
    if (n > WIRE_MAX_OPS) { /* keep the finished ones: an unfinished one missing can only be one already failed */
        uint32_t m = 0;
        for (uint32_t k = 0; k < n; k++)
            if (v[k].finished || m + (n - k) <= WIRE_MAX_OPS) v[m++] = v[k];
        n = m < WIRE_MAX_OPS ? m : WIRE_MAX_OPS;
    }
    if (n == 0) {
        free(v);
        v = NULL;
    }
    *out = v;
    return (int)n;
}

void allreduce_settle_unanswered(pcclComm_t *c) {
    pthread_mutex_lock(&c->mu);
    for (pccl_op_t *o = c->ops; o; o = o->next)
        if (o->ring_done && !o->got_end && o->epoch != atomic_load(&c->master_epoch)) {
            o->got_end = 1;
            o->end_ok = 0;
            pthread_cond_broadcast(o->w.cv);
        }
    pthread_mutex_unlock(&c->mu);
}

static void send_done(pccl_op_t *o, int ok) {
    wire_msg_t d = {.type = C2M_COLL_DONE};
    d.u.coll.tag = o->tag;
    d.u.coll.op_seq = o->op_seq;
    d.u.coll.ok = (uint8_t)ok;
    comm_send(o->comm, o->epoch, &d);
}

/* The ring of this op (quantized or not) over its k stripes' connected sockets: 0 or -PERR_<NAME> (ring.h). */
static int run_ring(pccl_op_t *o, ring_io_t *ios, uint32_t k, uint32_t me, uint32_t n) {
    const pcclReduceDescriptor_t *d = &o->desc;
    const pcclQuantizationOptions_t *qo = &d->quantization_options;
    pcclDataType_t dt = d->src_descriptor.datatype;
    if (qo->algorithm == pcclQuantNone) {
        if (k == 1) return ring_allreduce(ios, o->sendbuf, o->recvbuf, d->count, dt, d->op, me, n, o->op_seq);
        return ring_allreduce_striped(ios, k, o->sendbuf, o->recvbuf, d->count, dt, d->op, pcclQuantNone, dt, NULL,
                                      me, n, o->op_seq);
    }
    size_t need = ring_quant_wire_bytes(d->count, qo->quantized_datatype, n), cap = 0;
    uint8_t *wire = bufpool_get(&o->comm->buffers, need, &cap);
    if (!wire) {
        snprintf(ios->err, sizeof ios->err, "out of memory for %zu bytes of quantized blocks", need);
        return -PERR_IO;
    }
    int rc = k == 1 ? ring_allreduce_quant(ios, o->recvbuf, d->count, dt, d->op, qo->algorithm,
                                           qo->quantized_datatype, wire, me, n, o->op_seq)
                    : ring_allreduce_striped(ios, k, o->recvbuf, o->recvbuf, d->count, dt, d->op, qo->algorithm,
                                             qo->quantized_datatype, wire, me, n, o->op_seq);
    bufpool_put(&o->comm->buffers, wire, cap);
    return rc;
}

/* Whether the ring takes the backup itself as it goes (ring_io_t.backup): in place, plain ring (the
 * quantized ring's backup is copied upfront, while the vote travels). */
static int ring_backs_up(const pccl_op_t *o) {
    return o->sendbuf == o->recvbuf && o->desc.quantization_options.algorithm == pcclQuantNone;
}

/* Whether the op needs a backup at all: only in place. Out of place sendbuf is never written, so a
 * failed op leaves the input intact (recvbuf is then undefined) and a retry needs nothing
 * restored; the plain ring also reads sendbuf directly, so it copies nothing either. */
static int needs_backup(const pccl_op_t *o) { return o->sendbuf == o->recvbuf; }

/* This peer's rank in the op's ring (records the ring and the world for a RESUME). @return 0, or -PERR_PROTOCOL
 * when the master's ring is unusable (logged). */
static int op_rank(pccl_op_t *o, uint32_t *me_out) {
    pcclComm_t *c = o->comm;
    const __typeof__(o->commence.u.commence) *cm = &o->commence.u.commence;
    uint32_t n = cm->n, me = n;
    for (uint32_t i = 0; i < n; i++)
        if (memcmp(cm->ring[i], c->uuid, 16) == 0) me = i;
    comm_set_world(c, &cm->world);
    comm_note_ring(c, (const uint8_t(*)[16])cm->ring, n);
    o->info.local_world_size = n;
    if (me == n || n < 2) {
        PLOG_ERROR(c->log_name, "tag %llu: ring from the master is unusable", (unsigned long long)o->tag);
        return -PERR_PROTOCOL;
    }
    *me_out = me;
    return 0;
}

/* The op's k streams to the successor and from the predecessor, one pair per slot, through the op's wait.
 * @return 0, -PERR_IO when a successor's stream could not be opened, or -PERR_TIMEOUT when a predecessor's
 * did not arrive (or the op was cancelled meanwhile). */
static int open_streams(pccl_op_t *o, uint32_t me, const uint32_t *slot_of, uint32_t k, p2p_conn_t **tx,
                        p2p_conn_t **rx) {
    pcclComm_t *c = o->comm;
    const __typeof__(o->commence.u.commence) *cm = &o->commence.u.commence;
    uint32_t n = cm->n;
    for (uint32_t s = 0; s < k; s++)
        if (!(tx[s] = p2p_get_tx(c, cm->ring[(me + 1) % n], slot_of[s], c->connect_timeout_ms, &o->w)))
            return -PERR_IO;
    for (uint32_t s = 0; s < k; s++)
        if (!(rx[s] = p2p_get_rx(c, cm->ring[(me + n - 1) % n], slot_of[s], c->timeout_ms, &o->w)))
            return -PERR_TIMEOUT;
    return 0;
}

/* The pacing policy of an op of `bytes` bytes on its streams: the unsent-bytes cap of same-host sends,
 * bounded receive buffers, and spliced sends from the size where they pay off (p2p.h). */
static void pace_streams(pcclComm_t *c, ring_io_t *ios, p2p_conn_t **tx, p2p_conn_t **rx, uint32_t k, size_t bytes) {
    for (uint32_t s = 0; s < k; s++) {
        ios[s].tx_fd = tx[s]->fd;
        ios[s].rx_fd = rx[s]->fd;
        ios[s].tx_link = tx[s]->link;
        ios[s].rx_link = rx[s]->link;
        p2p_pace_tx(c, tx[s]);
        p2p_bound_rx(c, rx[s], bytes);
        if (p2p_splices(c, tx[s], bytes)) ios[s].tx_pipe = p2p_tx_pipe(tx[s]);
    }
}

/* Tells the master which neighbour could not be reached (opened: what open_streams returned); two such
 * reports about one peer remove it. A predecessor's stream missing because the op was aborted is no report. */
static void report_unreachable(pccl_op_t *o, uint32_t me, int opened) {
    const __typeof__(o->commence.u.commence) *cm = &o->commence.u.commence;
    uint32_t n = cm->n;
    if (opened == -PERR_TIMEOUT && pwait_result(&o->w)) return;
    wire_msg_t rep = {.type = C2M_PEER_UNREACHABLE};
    memcpy(rep.u.welcome.uuid, cm->ring[opened == -PERR_IO ? (me + 1) % n : (me + n - 1) % n], 16);
    comm_send(o->comm, o->epoch, &rep);
}

/* The API edge's one mapping for an operation that failed here: once the run ended, what every call then
 * returns (comm_lost_result); else a ring neighbour was lost (perr_result's default for -PERR_IO, whatever the
 * code was: the master aborted it, its wait was cancelled, the ring failed). */
static pcclResult_t op_failed_result(const pcclComm_t *c) {
    return comm_ended(c) ? comm_lost_result(c) : pcclRankConnectionLost;
}

/* The op's result after its ring returned rc: a finished ring reports and waits for the group's verdict
 * (another peer may still fail), a failed one reports its failure unless the master aborted it. */
static pcclResult_t verdict(pccl_op_t *o, int rc, const ring_io_t *io) {
    pcclComm_t *c = o->comm;
    if (rc == 0 && !mark_ring_done(o)) return op_failed_result(c);
    if (rc == 0) {
        send_done(o, 1);
        if (await_verdict(o) != 0) return op_failed_result(c);
        if (o->end_ok) return pcclSuccess;
        PLOG_INFO(c->log_name, "all-reduce tag %llu finished here but was aborted for the group; restoring",
                  (unsigned long long)o->tag);
        return pcclRankConnectionLost;
    }
    if (rc != -PERR_CANCELLED) {
        PLOG_WARN(c->log_name, "all-reduce tag %llu failed: %s", (unsigned long long)o->tag, io->err);
        send_done(o, 0);
    } else {
        PLOG_INFO(c->log_name, "all-reduce tag %llu aborted by the master (another peer failed)",
                  (unsigned long long)o->tag);
    }
    return op_failed_result(c);
}

/* Runs the ring for a commenced op: rank, streams, pacing, ring, reports, verdict, restore. */
static pcclResult_t perform(pccl_op_t *o, void *backup, size_t bytes) {
    pcclComm_t *c = o->comm;
    uint32_t me;
    if (op_rank(o, &me) != 0) {
        send_done(o, 0);
        return pcclInternalError;
    }
    /* One stripe per slot the master assigned (ring_stripe.c); every peer got the same slots. */
    uint32_t k = 0, slot_of[64];
    for (uint32_t i = 0; i < 64; i++)
        if (o->commence.u.commence.slots >> i & 1) slot_of[k++] = i;
    p2p_conn_t *tx[64] = {0}, *rx[64] = {0};
    int opened = open_streams(o, me, slot_of, k, tx, rx);
    size_t staging_cap = 0;
    uint8_t *staging = bufpool_get(&c->buffers, (size_t)k * STAGING_BYTES, &staging_cap);
    int rc = -PERR_IO;
    ring_io_t ios[64];
    for (uint32_t s = 0; s < k; s++)
        ios[s] = (ring_io_t){.abort_fd = o->w.fd, .abort_flag = &o->w.result, .timeout_ms = c->timeout_ms,
                             .staging = staging ? staging + (size_t)s * STAGING_BYTES : NULL,
                             .staging_size = STAGING_BYTES, .backup = ring_backs_up(o) ? backup : NULL};
    ring_io_t *io = &ios[0];
    if (opened == 0 && staging) {
        pace_streams(c, ios, tx, rx, k, bytes);
        if (o->sendbuf != o->recvbuf && o->desc.quantization_options.algorithm != pcclQuantNone)
            memcpy(o->recvbuf, o->sendbuf, bytes); /* the quantized ring works in place */
        rc = run_ring(o, ios, k, me, o->commence.u.commence.n);
    } else {
        snprintf(io->err, sizeof io->err, "%s", opened == -PERR_IO        ? "cannot connect to ring successor"
                                                : opened == -PERR_TIMEOUT ? "ring predecessor did not connect"
                                                                          : "out of memory");
        if (opened != 0) report_unreachable(o, me, opened);
    }
    bufpool_put(&c->buffers, staging, staging_cap);
    o->info.tx_bytes = io->tx_bytes;
    o->info.rx_bytes = io->rx_bytes;
    pcclResult_t result = verdict(o, rc, io);
    if (result != pcclSuccess) note_failed(o);
    /* After any failure the streams may hold partial data: drop them, a retry reconnects. */
    for (uint32_t s = 0; s < k; s++) {
        p2p_release(c, tx[s], result != pcclSuccess);
        p2p_release(c, rx[s], result != pcclSuccess);
    }
    /* With io->backup the ring restored what it modified when it failed; the whole backup is
     * only complete (and needed) when the ring finished and the group aborted afterwards. */
    if (backup && result != pcclSuccess && (!io->backup || rc == 0)) memcpy(o->recvbuf, backup, bytes);
    return result;
}

/* An op registered before a lost master came back was aborted with the old connection's ops, but
 * it votes only now, to the new master: that abort must not end the new vote's ring at once (the
 * peer would retry the tag while the master still runs it, a duplicate vote). Only this vote's
 * COMMENCE lets the new master abort it, so nothing of this epoch is lost. */
static void clear_stale_abort(pccl_op_t *o) {
    pcclComm_t *c = o->comm;
    pthread_mutex_lock(&c->mu);
    if (pwait_result(&o->w)) pwait_reset(&o->w);
    pthread_mutex_unlock(&c->mu);
}

/* Runs one operation from the vote to the end (on a pool worker or the caller's thread). */
static void run_op(pccl_op_t *o) {
    pcclComm_t *c = o->comm;
    size_t bytes = o->desc.count * pccl_dtype_size(o->desc.src_descriptor.datatype), backup_cap = 0;
    /* Memory first: an op that cannot run must not vote, or the others would wait for it. */
    void *backup = NULL;
    if (needs_backup(o) && !(backup = bufpool_get(&c->buffers, bytes, &backup_cap))) {
        o->result = pcclInternalError;
        return;
    }
    wire_msg_t init = {.type = C2M_COLL_INIT};
    init.u.coll_init.tag = o->desc.tag;
    init.u.coll_init.count = o->desc.count;
    init.u.coll_init.dtype = (uint8_t)o->desc.src_descriptor.datatype;
    init.u.coll_init.op = (uint8_t)o->desc.op;
    init.u.coll_init.quant_algo = (uint8_t)o->desc.quantization_options.algorithm;
    init.u.coll_init.quant_dtype = (uint8_t)o->desc.quantization_options.quantized_datatype;
    /* The op was registered before this vote, so its COMMENCE can never be missed. A failed send
     * shows up as a lost or restarted master below. An upfront backup copy overlaps the master's
     * round trip. While a restarted master is awaited, comm_begin holds the vote back. */
    int held_back = 0, withdrawn = 0;
    if (comm_begin(c, &o->epoch) == 0) {
        clear_stale_abort(o);
        /* A restarted master that took this peer back as a newcomer gets no vote from it (comm_send
         * holds it back), so no COMMENCE can come: the op ends as for a peer not yet accepted. A
         * leaving peer sends no vote either: nothing will come for it. */
        int sent = comm_send(c, o->epoch, &init);
        held_back = sent != 0 && comm_role(c) == PEER_REJOINING;
        withdrawn = sent != 0 && comm_role(c) == PEER_LEAVING;
    } else o->epoch = atomic_load(&c->master_epoch) - 1; /* lost for good: the wait below ends at once */
    if (backup && !ring_backs_up(o) && !held_back && !withdrawn) memcpy(backup, o->recvbuf, bytes);
    if (held_back) {
        o->result = pcclTooFewPeers;
    } else if (withdrawn) {
        o->result = comm_lost_result(c);
    } else if (wait_for(o, started) != 0) {
        o->result = op_failed_result(c);
    } else if (o->got_reject) {
        switch (o->reject_reason) {
        case REJECT_TOO_FEW_PEERS: o->result = pcclTooFewPeers; break;
        case REJECT_CONFLICT:
            PLOG_ERROR(c->log_name, "all-reduce tag %llu rejected: other peers are in a different operation "
                       "(the run's peers are out of lockstep)", (unsigned long long)o->tag);
            o->result = pcclInvalidUsage;
            break;
        default:
            PLOG_ERROR(c->log_name, "all-reduce tag %llu rejected: peers passed different count/dtype/op/"
                       "quantization for this tag", (unsigned long long)o->tag);
            o->result = pcclInvalidUsage;
            break;
        }
    } else {
        o->result = perform(o, backup, bytes);
    }
    bufpool_put(&c->buffers, backup, backup_cap);
}

/* A pool worker: runs queued async ops until the communicator stops it. Parked workers cost
 * nothing; keeping them saves a thread creation and join per operation. */
static void *worker_main(void *arg) {
    pcclComm_t *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->work_head && !c->workers_stop) {
            c->workers_idle++;
            pthread_cond_wait(&c->work_cv, &c->mu);
            c->workers_idle--;
        }
        pccl_op_t *o = c->work_head;
        if (!o) break; /* stopping, nothing queued */
        c->work_head = o->next_work;
        if (!c->work_head) c->work_tail = NULL;
        c->work_queued--;
        pthread_mutex_unlock(&c->mu);
        run_op(o);
        pthread_mutex_lock(&c->mu);
        o->finished = 1; /* the awaiter may free o as soon as mu is released */
        pthread_cond_broadcast(o->w.cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Queues o for a worker, starting one if every parked worker is already spoken for.
 * Caller holds mu. Returns -1 if no thread could be started (o is not queued then). */
static int enqueue_locked(pcclComm_t *c, pccl_op_t *o) {
    if (c->workers_idle <= c->work_queued) {
        /* Every op waiting for a COMMENCE needs its own thread (ops beyond the pool wait at the
         * master), so the pool grows to the largest number of ops in flight at once. */
        if (c->nworkers == c->workers_cap) {
            uint32_t cap = c->workers_cap ? 2 * c->workers_cap : 4;
            pthread_t *w = realloc(c->workers, cap * sizeof *w);
            if (!w) return -PERR_NOMEM;
            c->workers = w;
            c->workers_cap = cap;
        }
        if (pthread_create(&c->workers[c->nworkers], NULL, worker_main, c) != 0) return -PERR_FAILED;
        c->nworkers++;
    }
    o->next_work = NULL;
    if (c->work_tail) c->work_tail->next_work = o;
    else c->work_head = o;
    c->work_tail = o;
    c->work_queued++;
    return 0; /* the caller signals work_cv after unlocking: a woken worker does not block on mu */
}

static pcclResult_t validate(const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d) {
    if (!sendbuf || !recvbuf || !d || d->count == 0) return pcclInvalidArgument;
    pcclDataType_t dt = d->src_descriptor.datatype;
    if (pccl_dtype_size(dt) == 0) return pcclInvalidArgument;
    if ((unsigned)d->op > pcclMin) return pcclInvalidArgument;
    const pcclQuantizationOptions_t *q = &d->quantization_options;
    if (q->algorithm != pcclQuantNone && pccl_quant_check(dt, q->algorithm, q->quantized_datatype) != 0) {
        PLOG_ERROR("pccl", "cannot quantize %s to %s with algorithm %d (sources: float, double, float16, bfloat16; "
                   "targets: uint8, int8, uint16, and float16 with zero-point-scale)", pccl_dtype_name(dt),
                   pccl_dtype_name(q->quantized_datatype), (int)q->algorithm);
        return pcclInvalidArgument;
    }
    size_t bytes = d->count * pccl_dtype_size(dt);
    if (bytes / pccl_dtype_size(dt) != d->count) return pcclInvalidArgument;
    const uint8_t *s = sendbuf, *r = recvbuf;
    if (s != r && s < r + bytes && r < s + bytes) return pcclInvalidArgument; /* partial overlap */
    return pcclSuccess;
}

/* Creates and registers an op (so that its COMMENCE can never be missed); async ops are also
 * queued for a worker under the same lock. */
static pcclResult_t launch(const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d, pcclComm_t *c,
                           int is_async, pccl_op_t **out) {
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    if ((r = validate(sendbuf, recvbuf, d)) != pcclSuccess) return r;
    pccl_op_t *o = op_get(c);
    if (!o) return pcclInternalError;
    o->comm = c;
    o->tag = d->tag;
    o->sendbuf = sendbuf;
    o->recvbuf = recvbuf;
    o->desc = *d;
    o->is_async = is_async;
    pthread_mutex_lock(&c->mu);
    /* Alone as of the last topology: fail at launch, as PCCL 1.0 does, rather than at the await. */
    if (c->world.group_world_size < 2) {
        pthread_mutex_unlock(&c->mu);
        op_put(c, o);
        return pcclTooFewPeers;
    }
    if (find_op(c, d->tag)) {
        pthread_mutex_unlock(&c->mu);
        op_put(c, o);
        PLOG_ERROR(c->log_name, "all-reduce tag %llu is already in flight", (unsigned long long)d->tag);
        return pcclInvalidUsage;
    }
    if (is_async && (c->workers_stop || enqueue_locked(c, o) != 0)) {
        pthread_mutex_unlock(&c->mu);
        op_put(c, o);
        return pcclInternalError;
    }
    o->next = c->ops;
    c->ops = o;
    pthread_mutex_unlock(&c->mu);
    if (is_async) pthread_cond_signal(&c->work_cv);
    *out = o;
    return pcclSuccess;
}

/* Launch only registers the op and hands it to a parked worker, which votes and runs it. */
pcclResult_t pcclAllReduceAsync(const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d,
                                const pcclComm_t *cc, pcclAsyncReduceOp_t *handle) {
    pcclComm_t *c = (pcclComm_t *)cc;
    if (!handle) return pcclInvalidArgument;
    pccl_op_t *o;
    pcclResult_t r = launch(sendbuf, recvbuf, d, c, 1, &o);
    if (r != pcclSuccess) return r;
    handle->comm = c;
    handle->tag = d->tag;
    return pcclSuccess;
}

/* Takes o out of the work queue if no worker has picked it up yet (caller holds mu). */
static int unqueue_locked(pcclComm_t *c, pccl_op_t *o) {
    pccl_op_t *prev = NULL;
    for (pccl_op_t *q = c->work_head; q; prev = q, q = q->next_work)
        if (q == o) {
            if (prev) prev->next_work = o->next_work;
            else c->work_head = o->next_work;
            if (c->work_tail == o) c->work_tail = prev;
            c->work_queued--;
            return 1;
        }
    return 0;
}

static pcclResult_t finish_op(pcclComm_t *c, pccl_op_t *o, pcclReduceInfo_t *info) {
    pthread_mutex_lock(&c->mu);
    if (o->is_async && unqueue_locked(c, o)) {
        /* Awaited before a worker woke up for it: run it here rather than wait for two hand-offs. */
        pthread_mutex_unlock(&c->mu);
        run_op(o);
        pthread_mutex_lock(&c->mu);
        o->finished = 1;
    }
    while (o->is_async && !o->finished) pwait_cond_sleep(o->w.cv, &c->mu, 0);
    unlink_op_locked(c, o);
    pthread_mutex_unlock(&c->mu);
    pcclResult_t r = o->result;
    if (info) *info = o->info;
    op_put(c, o);
    return r;
}

pcclResult_t pcclAwaitAsyncReduce(const pcclAsyncReduceOp_t *h, pcclReduceInfo_t *info) {
    if (!h || !h->comm) return pcclInvalidArgument;
    pcclComm_t *c = h->comm;
    pthread_mutex_lock(&c->mu);
    pccl_op_t *o = find_op(c, h->tag);
    pthread_mutex_unlock(&c->mu);
    if (!o || !o->is_async) return pcclInvalidArgument;
    return finish_op(c, o, info);
}

void allreduce_join_all(pcclComm_t *c) {
    for (;;) {
        pthread_mutex_lock(&c->mu);
        pccl_op_t *o = c->ops;
        while (o && !o->is_async) o = o->next; /* a blocking op belongs to its caller */
        pthread_mutex_unlock(&c->mu);
        if (!o) break;
        finish_op(c, o, NULL);
    }
    pthread_mutex_lock(&c->mu);
    c->workers_stop = 1;
    pthread_cond_broadcast(&c->work_cv);
    pthread_mutex_unlock(&c->mu);
    for (uint32_t i = 0; i < c->nworkers; i++) pthread_join(c->workers[i], NULL);
    free(c->workers);
    c->workers = NULL;
    c->nworkers = c->workers_cap = 0;
    while (c->op_free) {
        pccl_op_t *o = c->op_free;
        c->op_free = o->next_work;
        op_destroy(o);
    }
    c->nop_free = 0;
}

/* The blocking call runs the op on the caller's thread: no hand-off to a worker and back. */
pcclResult_t pcclAllReduce(const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d,
                           const pcclComm_t *cc, pcclReduceInfo_t *info) {
    pcclComm_t *c = (pcclComm_t *)cc;
    pccl_op_t *o;
    pcclResult_t r = launch(sendbuf, recvbuf, d, c, 0, &o);
    if (r != pcclSuccess) return r;
    run_op(o);
    return finish_op(c, o, info);
}

pcclResult_t pcclAllReduceMultipleWithRetry(const pcclReduceOpDescriptor_t *descs, size_t count,
                                            const pcclComm_t *cc, pcclReduceInfo_t *info, int max_in_flight) {
    pcclComm_t *c = (pcclComm_t *)cc;
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    if (!descs || count == 0 || max_in_flight <= 0) return pcclInvalidArgument;
    for (size_t i = 0; i < count; i++)
        if ((r = validate(descs[i].sendbuf, descs[i].recvbuf, &descs[i].descriptor)) != pcclSuccess) return r;
    size_t *todo = malloc(count * sizeof *todo), *failed = malloc(count * sizeof *failed);
    pcclAsyncReduceOp_t *h = malloc(count * sizeof *h);
    if (!todo || !failed || !h) {
        free(todo);
        free(failed);
        free(h);
        return pcclInternalError;
    }
    pcclReduceInfo_t total = {0};
    size_t ntodo = count;
    for (size_t i = 0; i < count; i++) todo[i] = i;
    pcclResult_t result = pcclSuccess;
    /* Rounds: every peer sees the same per-tag outcomes, so every peer retries the same list. */
    while (ntodo && result == pcclSuccess) {
        size_t nfailed = 0, launched = 0, awaited = 0;
        while (awaited < ntodo) {
            while (launched < ntodo && launched - awaited < (size_t)max_in_flight) {
                const pcclReduceOpDescriptor_t *d = &descs[todo[launched]];
                pcclResult_t lr = pcclAllReduceAsync(d->sendbuf, d->recvbuf, &d->descriptor, c, &h[launched]);
                if (lr != pcclSuccess) {
                    result = lr;
                    break;
                }
                launched++;
            }
            if (awaited == launched) break;
            pcclReduceInfo_t one = {0};
            pcclResult_t ar = pcclAwaitAsyncReduce(&h[awaited], &one);
            total.tx_bytes += one.tx_bytes;
            total.rx_bytes += one.rx_bytes;
            if (one.local_world_size) total.local_world_size = one.local_world_size;
            if (ar == pcclRankConnectionLost) failed[nfailed++] = todo[awaited];
            else if (ar != pcclSuccess && result == pcclSuccess) result = ar;
            awaited++;
        }
        memcpy(todo, failed, nfailed * sizeof *todo);
        ntodo = nfailed;
    }
    free(todo);
    free(failed);
    free(h);
    if (info) *info = total;
    return result;
}
