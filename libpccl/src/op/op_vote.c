/* op_vote.c - an operation's vote through the master, up to its COMMENCE or rejection (op_record.h). */
#include "op/op_record.h"

#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "pccl_kernels.h"

/* Waits until the op commenced or was rejected, or the master of the op's epoch is gone, spinning first as the
 * waits for the master's answers do (comm_spin_until). Holds no lock on return. (The reader moves the epoch and
 * then aborts every op, which broadcasts o->w.cv.) 0 or -PERR_RESTARTED. */
static int wait_started(pccl_op_t *o) {
    pcclComm_t *c = o->comm;
    uint64_t spin_until = comm_spin_until(c);
    pthread_mutex_lock(&c->mu);
    while (!o->got_commence && !o->got_reject && !comm_ended(c) && !atomic_load(&c->shutting_down) &&
           atomic_load(&c->master_epoch) == o->epoch)
        pwait_cond_sleep_spin(o->w.cv, &c->mu, 0, spin_until);
    int ok = o->got_commence || o->got_reject;
    pthread_mutex_unlock(&c->mu);
    return ok ? 0 : -PERR_RESTARTED;
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

/* The data a shared-sources broadcast member compares with the root's: the root's input (sendbuf, in place
 * recvbuf), every other member's recvbuf. */
static uint64_t source_hash(const pccl_op_t *o) {
    const pcclExtCollDescriptor_t *d = &o->d;
    const void *data = d->flags & PCCL_EXT_COLL_ROOT ? d->sendbuf : d->recvbuf;
    return pccl_simplehash(data, d->count * pccl_dtype_size(d->datatype));
}

static void fill_init(const pccl_op_t *o, wire_msg_t *init) {
    const pcclExtCollDescriptor_t *d = &o->d;
    init->type = C2M_COLL_INIT;
    init->u.coll_init.tag = d->tag;
    init->u.coll_init.count = d->count;
    init->u.coll_init.dtype = (uint8_t)d->datatype;
    init->u.coll_init.op = (uint8_t)d->op;
    init->u.coll_init.quant_algo = (uint8_t)d->quantization_options.algorithm;
    init->u.coll_init.quant_dtype = (uint8_t)d->quantization_options.quantized_datatype;
    init->u.coll_init.kind = (uint8_t)d->kind;
    init->u.coll_init.flags = (uint8_t)d->flags;
    init->u.coll_init.rank_key = d->flags & PCCL_EXT_COLL_RANKED ? d->rank_key : 0;
    init->u.coll_init.capacity = d->kind == pcclExtCollAllReduce ? 0 : d->recv_capacity;
    init->u.coll_init.max_world = d->kind == pcclExtCollAllGatherV ? d->counts_capacity : 0;
    init->u.coll_init.hash = o->hash;
    init->u.coll_init.algo = o->comm->algo;
}

int op_rejected(const pccl_op_t *o) {
    const char *log = o->comm->log_name, *kind = o->kind->name;
    unsigned long long tag = (unsigned long long)o->tag;
    switch (o->reject_reason) {
    case REJECT_TOO_FEW_PEERS: return -PERR_TOO_FEW_PEERS;
    case REJECT_CONFLICT:
        PLOG_ERROR(log, "%s tag %llu rejected: other peers are in a different operation (the run's peers are out of "
                   "lockstep)%s%s", kind, tag, o->reject_detail[0] ? ": " : "", o->reject_detail);
        return -PERR_MISMATCH;
    default:
        if (o->reject_detail[0])
            PLOG_ERROR(log, "%s tag %llu rejected by the master: %s", kind, tag, o->reject_detail);
        else
            PLOG_ERROR(log, "%s tag %llu rejected: peers passed different parameters for this tag", kind, tag);
        return -PERR_MISMATCH;
    }
}

int op_vote(pccl_op_t *o) {
    pcclComm_t *c = o->comm;
    if (o->d.kind == pcclExtCollBroadcast && (o->d.flags & PCCL_EXT_COLL_SHARED_SOURCES)) o->hash = source_hash(o);
    wire_msg_t init = {0};
    fill_init(o, &init);
    /* The op was registered before this vote, so its COMMENCE can never be missed. A failed send shows up as a
     * lost or restarted master below. While a restarted master is awaited, comm_begin holds the vote back. */
    if (comm_begin(c, &o->epoch) != 0) return -PERR_RESTARTED; /* lost for good: op_result says so */
    clear_stale_abort(o);
    /* Under the grant of the tag's previous op (same vote, same master connection) the op is commenced now: its
     * ring starts while the vote travels, and the master's verdict covers both (docs/protocol.md). */
    pthread_mutex_lock(&c->mu);
    o->vote = init;
    if (!o->no_grant && op_grant_take_locked(o, &init)) init.u.coll_init.grant_seq = o->op_seq;
    pthread_mutex_unlock(&c->mu);
    if (comm_send(c, o->epoch, &init) != 0) {
        /* A restarted master that took this peer back as a newcomer gets no vote from it (comm_send holds it
         * back), so no COMMENCE can come: the op ends as for a peer not yet accepted. A leaving peer sends no
         * vote either: nothing will come for it. */
        peer_state_t role = comm_role(c);
        if (role == PEER_REJOINING) return -PERR_TOO_FEW_PEERS;
        if (role == PEER_LEAVING) return -PERR_LOST;
    }
    if (o->pipelined) return 0;
    int rc = wait_started(o);
    if (rc != 0) return rc;
    return o->got_reject ? op_rejected(o) : 0;
}
