/*
 * op_record.h - the operation record every collective shares, and the table of what differs per kind
 * (internal to op/).
 *
 * One record per operation of any kind (all-reduce included): the same vote (COLL_INIT), COMMENCE
 * routing, streams (one pair per connection slot), verdict (COLL_DONE, then COMPLETE or ABORT), restore of
 * the caller's buffer on failure (in place from a backup; out of place the input is never written),
 * failure notes for a restarted master, worker pool and await. Only the data movement differs: op_kind_t.
 *
 * Every internal function here returns 0 or -PERR_<NAME> (base/err.h); the op keeps its code in rc and
 * each API entry point maps it to pcclResult_t once (op_result).
 */
#ifndef PCCL_OP_RECORD_H
#define PCCL_OP_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "pccl_coll.h"
#include "ring/ring.h"

typedef struct pccl_op pccl_op_t;

/* What one kind of collective does with the shared record. */
typedef struct op_kind {
    const char *name; /* the kind's name in logs ("all_reduce", "broadcast", ...: pccl_coll.h's kinds) */
    int moves_data;   /* 0: no streams, no data, no report: the op ends at its COMMENCE (the barrier) */
    /* Checks a descriptor at launch (sendbuf already NULL-normalized to recvbuf when in place): 0 or -PERR_INVALID
     * (the reason logged). */
    int (*validate)(const pcclExtCollDescriptor_t *d);
    /* After COMMENCE (world, pos, rank_of and counts set): fills info.count/offset/root, the byte range of
     * recvbuf to back up (bk_off, bk_len; in place only) and move_bytes. 0, or -PERR_PROTOCOL when the output
     * would not fit (the master checks it first). */
    int (*plan)(pccl_op_t *o);
    /* Moves the data over the op's k connected stripes: 0 or -PERR_<NAME> (ring.h; the reason in ios[0].err). */
    int (*run)(pccl_op_t *o, ring_io_t *ios, uint32_t k);
} op_kind_t;

extern const op_kind_t op_kind_all_reduce, op_kind_broadcast, op_kind_all_gather, op_kind_all_gather_v,
    op_kind_reduce_scatter, op_kind_barrier;
/* The kind of value k (pcclExtCollKind_t), NULL when unknown. */
const op_kind_t *op_kind_of(int k);

struct pccl_op {
    /* Kept when the record is recycled (op_get clears everything from `comm` on). The op's wait: cancelled
     * (-PERR_ABORTED, -PERR_RESTARTED, -PERR_LOST, -PERR_CANCELLED) for an abort from the master, a lost
     * master or destroy, which wakes its ring's poll (w.fd) and its thread (w.cv); w.cv is also signalled
     * (with comm->mu) for this op's master messages and its end, so a message wakes only the thread that
     * waits for it. */
    pwait_t w;
    pcclComm_t *comm;
    uint64_t tag;
    pcclExtCollDescriptor_t d; /* sendbuf == recvbuf in place */
    const op_kind_t *kind;
    int is_async; /* run by a pool worker (else on the caller's thread) */
    /* filled by the reader under comm->mu */
    int got_commence, got_reject, got_end, end_ok;
    int ring_done; /* its data moved and it reported so in its epoch: only a verdict ends it */
    int pipelined; /* it runs under a grant (op_grant.c): commenced by the verdict of the tag's previous op */
    int revoked;   /* the master revoked that grant: it restores and votes again, plainly (no_grant) */
    int no_grant;
    wire_msg_t vote; /* the COLL_INIT it sent (a grant it earns is valid for the same vote) */
    uint8_t reject_reason;
    char reject_detail[256];
    uint64_t op_seq;
    wire_msg_t commence;
    /* set after COMMENCE by whoever runs the op (op_run.c) */
    uint32_t pos, world;    /* this member's ring position and the op's world size */
    uint32_t *rank_of;      /* rank of each ring position (world entries) */
    uint64_t *counts;       /* elements of each rank's block, by rank (world entries) */
    const uint8_t *holds;   /* broadcast: which ring positions hold the data (world entries) */
    size_t bk_off, bk_len;  /* bytes of recvbuf the backup keeps (in place) */
    /* In place, a kind whose input moves within recvbuf before the data (the all-gathers: from recvbuf's start to
     * the rank's block, own_len bytes to own_off; 0: none) keeps no copy of it: the input is back at the start
     * once the restore moves it there, before it puts the backup back (own_moved: the move was made). */
    size_t own_off, own_len;
    int own_moved;
    uint8_t *backup;        /* that backup while the op runs */
    int ring_backs_up;      /* the ring copies the backup itself as it goes (in place: the plain all-reduce and
                             * the ring broadcast; ring_io_t.backup) */
    int splices;            /* how the kind lets the ring splice the caller's pages (P2P_SPLICE_*, p2p.h) */
    size_t move_bytes;      /* payload size the streams are paced for */
    uint64_t hash;          /* shared-sources broadcast: simplehash of this member's data */
    struct op_rhd_links *rhd; /* recursive halving and doubling: its partners' connections until the verdict */
    /* result, written by whoever runs the op; finished (under mu) tells the awaiter */
    int rc;
    pcclExtCollInfo_t info;
    unsigned epoch; /* of the master connection its vote went to (comm.h) */
    int finished;
    struct pccl_op *next;      /* comm->ops */
    struct pccl_op *next_work; /* comm->work queue or comm->op_free */
};

/* op_record.c: records, routing and failure notes. */
pccl_op_t *op_find_locked(pcclComm_t *c, uint64_t tag);
/* A zeroed record (recycled when possible); NULL when out of resources. */
pccl_op_t *op_get(pcclComm_t *c);
/* Returns a record nobody references any more (unlinked, not queued). */
void op_put(pcclComm_t *c, pccl_op_t *o);
void op_destroy(pccl_op_t *o);
void op_unlink_locked(pcclComm_t *c, pccl_op_t *o);
/* Remembers a commenced op that failed here, for a RESUME (comm.h failed_ops). */
void op_note_failed(pccl_op_t *o);
/* The API edge's one mapping of an op's code: 0 pcclSuccess; a failure of the operation itself (aborted, a lost
 * neighbour, a wait cancelled, a master lost meanwhile) pcclRankConnectionLost, or once the run ended what every
 * call then returns (comm_lost_result); the others perr_result's default (-PERR_MISMATCH pcclInvalidUsage,
 * -PERR_TOO_FEW_PEERS pcclTooFewPeers, -PERR_INVALID pcclInvalidArgument, ...). */
pcclResult_t op_result(const pcclComm_t *c, int rc);

/* op_rhd.c: the all-reduce, reduce-scatter and all-gathers by recursive halving and doubling, the all-reduce by
 * recursive doubling (the same partners), the broadcast along a binomial tree (docs/algorithms.md).
 * op_algo_rhd: whether the op's COMMENCE chose one of them and the op has it (then op_run opens no ring streams: the
 * kind's run connects to its partners on the op's k slots, one stripe each (ios[0..k-1]), through op_rhd_allreduce
 * (quantized or not), op_rhd_reduce_scatter (out: the member's block), op_rhd_all_gather (src: the member's block)
 * or op_rhd_broadcast; op_rhd_release drops them after the verdict, killed after any failure, as the ring's
 * streams are). */
int op_algo_rhd(const pccl_op_t *o);
int op_rhd_allreduce(pccl_op_t *o, ring_io_t *ios, uint32_t k);
int op_rhd_reduce_scatter(pccl_op_t *o, ring_io_t *ios, uint32_t k, void *out);
int op_rhd_all_gather(pccl_op_t *o, ring_io_t *ios, uint32_t k, const void *src);
int op_rhd_broadcast(pccl_op_t *o, ring_io_t *ios, uint32_t k, const void *src);
void op_rhd_release(pccl_op_t *o, int kill);

/* op_vote.c: sends the vote and waits for COMMENCE. 0 once commenced, else the op's code (a rejection is
 * logged with the master's reason). Under a grant it is commenced at once. */
int op_vote(pccl_op_t *o);
/* The code of a rejected op, its reason logged. */
int op_rejected(const pccl_op_t *o);

/* op_grant.c: grants of pipelined collectives (comm->grants, under comm->mu). */
/* Keeps the grant a COMPLETE of o carries (none: nothing), replacing an older one of its tag. */
void op_grant_store_locked(pccl_op_t *o, const wire_msg_t *complete);
/* Takes o's tag's grant: 1 when it fits vote (same epoch, same vote), o commenced under it; else 0 (dropped). */
int op_grant_take_locked(pccl_op_t *o, const wire_msg_t *vote);
/* Drops the grant a COLL_REVOKE names. */
void op_grant_revoke_locked(pcclComm_t *c, const wire_msg_t *revoke);
void op_grants_clear(pcclComm_t *c);

/* op_run.c: runs one operation from the vote to the end (on a pool worker or the caller's thread); o->rc. */
void op_run(pccl_op_t *o);

/* op_pool.c: launch (checks, registers the op so its COMMENCE is never missed, and queues an async op for a
 * worker) and finish (waits for an async op, unlinks it and takes its code and info). d is validated here. */
/* Looks up d's kind and runs its checks on a copy whose sendbuf is NULL-normalized: 0 or -PERR_INVALID (logged). */
int op_validate(const pcclExtCollDescriptor_t *d, pcclExtCollDescriptor_t *out);
int op_launch(pcclComm_t *c, const pcclExtCollDescriptor_t *d, int is_async, pccl_op_t **out);
int op_finish(pcclComm_t *c, pccl_op_t *o, pcclExtCollInfo_t *info);
/* The API edge's retry loop (collective.c): runs n validated ops of distinct tags, at most max_in_flight at once, retrying those aborted (op_result
 * pcclRankConnectionLost; every member sees the same outcomes, so every member retries the same ones) until all
 * succeed or another result ends it. infos[i]: op i's last attempt, its tx/rx bytes summed over the attempts.
 * pcclSuccess or the first result that is not a retryable abort. */
pcclResult_t op_multiple_with_retry(pcclComm_t *c, const pcclExtCollDescriptor_t *descs, size_t n, pcclExtCollInfo_t *infos,
                           int max_in_flight);
/* Awaits the async op of tag (op_finish): its code, or -PERR_INVALID when there is none. */
int op_await(pcclComm_t *c, uint64_t tag, pcclExtCollInfo_t *info);

/* Shared by the kinds' checks: a known dtype, a byte count that does not overflow, no partial overlap of
 * sendbuf (send_elems) and recvbuf (recv_elems) out of place. 0 or -PERR_INVALID. */
int op_check_buffers(const pcclExtCollDescriptor_t *d, uint64_t send_elems, uint64_t recv_elems);
/* The reduce op and quantization of an all-reduce or reduce-scatter: 0 or -PERR_INVALID (logged). */
int op_check_reduce(const pcclExtCollDescriptor_t *d);
/* The send buffer of an op in place: its first elements live in recvbuf, copied into the backup first. */
int op_in_place(const pccl_op_t *o);
/* Whether a member whose streams to a ring neighbour or links to an rhd partner failed to open with rc
 * (-PERR_IO: no connection to it; -PERR_TIMEOUT: its connection never came) reports that peer unreachable to the
 * master: not under a grant (the peer may just not have called yet: the master's word follows, docs/protocol.md
 * "Pipelined collectives"), and not a connection that never came because the op was aborted meanwhile. */
int op_reports_unreachable(const pccl_op_t *o, int rc);

#endif
