/* op_record.c - operation records, routing of the master's messages to them, failure notes (op_record.h). */
#include "op/op_record.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "p2p/p2p.h"

/* Recycled op records kept per communicator (each holds an eventfd). */
#define OP_FREE_MAX 16

pccl_op_t *op_find_locked(pcclComm_t *c, uint64_t tag) {
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

void op_unlink_locked(pcclComm_t *c, pccl_op_t *o) {
    for (pccl_op_t **pp = &c->ops; *pp; pp = &(*pp)->next)
        if (*pp == o) {
            *pp = o->next;
            break;
        }
}

/* Recycling keeps the record's eventfd and condvar, which saves two syscalls per launch. */
pccl_op_t *op_get(pcclComm_t *c) {
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

void op_destroy(pccl_op_t *o) {
    pwait_destroy(&o->w);
    free(o);
}

void op_put(pcclComm_t *c, pccl_op_t *o) {
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

/* Takes msg into o (caller holds mu): 1 when o keeps msg (a COMMENCE). */
static int take_locked(pccl_op_t *o, wire_msg_t *msg) {
    if (msg->type == M2C_COLL_COMMENCE && !o->got_commence && !o->got_reject) {
        o->commence = *msg;
        o->op_seq = msg->u.commence.op_seq;
        o->got_commence = 1;
        return 1;
    }
    /* A pipelined op runs before its vote is decided: a rejection of that vote stops it like an abort. */
    if (msg->type == M2C_COLL_REJECT && (!o->got_commence || (o->pipelined && !o->got_end))) {
        o->got_reject = 1;
        o->reject_reason = msg->u.reject.reason;
        snprintf(o->reject_detail, sizeof o->reject_detail, "%.*s", (int)sizeof msg->u.reject.detail - 1,
                 msg->u.reject.detail);
        if (o->got_commence) {
            o->got_end = 1;
            pwait_cancel_locked(&o->w, -PERR_ABORTED);
        }
    } else if ((msg->type == M2C_COLL_ABORT || msg->type == M2C_COLL_COMPLETE || msg->type == M2C_COLL_REVOKE) &&
               o->got_commence && msg->u.coll.op_seq == o->op_seq && !o->got_end) {
        /* An ABORT/COMPLETE for an older attempt of the same tag is ignored by the op_seq check. */
        o->got_end = 1;
        o->end_ok = msg->type == M2C_COLL_COMPLETE && msg->u.coll.ok;
        o->revoked = msg->type == M2C_COLL_REVOKE;
        if (!o->end_ok) pwait_cancel_locked(&o->w, -PERR_ABORTED);
        if (o->end_ok) op_grant_store_locked(o, msg);
    }
    return 0;
}

/* A COLL_REVOKE stops the op running under the grant (it drops its streams, which the other ends then see
 * closed: p2p.h), or drops the grant. */
static void revoke_locked(pcclComm_t *c, pccl_op_t *o, wire_msg_t *msg) {
    if (o && o->pipelined && o->got_commence && !o->got_end && o->op_seq == msg->u.coll.op_seq) take_locked(o, msg);
    else op_grant_revoke_locked(c, msg);
}

int allreduce_route(pcclComm_t *c, wire_msg_t *msg) {
    uint64_t tag;
    switch (msg->type) {
    case M2C_COLL_COMMENCE: tag = msg->u.commence.tag; break;
    case M2C_COLL_REJECT: tag = msg->u.reject.tag; break;
    case M2C_COLL_ABORT: case M2C_COLL_COMPLETE: case M2C_COLL_REVOKE: tag = msg->u.coll.tag; break;
    default: return 0;
    }
    pthread_mutex_lock(&c->mu);
    pccl_op_t *o = op_find_locked(c, tag);
    int taken = 0;
    if (msg->type == M2C_COLL_REVOKE) revoke_locked(c, o, msg);
    else if (o) taken = take_locked(o, msg);
    if (o) pthread_cond_broadcast(o->w.cv);
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

void op_note_failed(pccl_op_t *o) {
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

pcclResult_t op_result(const pcclComm_t *c, int rc) {
    switch (rc) {
    case -PERR_IO: case -PERR_TIMEOUT: case -PERR_CANCELLED: case -PERR_ABORTED: case -PERR_PROTOCOL:
    case -PERR_RESTARTED:
        return comm_ended(c) ? comm_lost_result(c) : pcclRankConnectionLost;
    case -PERR_LOST: return comm_lost_result(c);
    default: return perr_result(rc);
    }
}
