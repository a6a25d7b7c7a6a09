/* op_run.c - an operation from its COMMENCE to its verdict, for every kind: this member's place and rank, the
 * backup, the streams (one pair per connection slot), the kind's data movement, COLL_DONE, the group's verdict
 * and the restore of the caller's buffer on failure (op_record.h). */
#include "op/op_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "p2p/p2p.h"
#include "pccl_kernels.h"

#define STAGING_BYTES (1u << 20)

static int op_revoked(pccl_op_t *o);
#define MAX_STRIPES 64

/* Marks the data moved unless the master of the op's epoch is already gone (then the op ends as
 * unfinished: nobody heard of the finish, and a RESUME lists it so). 1 when marked. */
static int mark_ring_done(pccl_op_t *o) {
    pcclComm_t *c = o->comm;
    pthread_mutex_lock(&c->mu);
    int in_time = atomic_load(&c->master_epoch) == o->epoch && !comm_ended(c);
    o->ring_done = in_time;
    pthread_mutex_unlock(&c->mu);
    return in_time;
}

/* Waits for the verdict of a commenced op (COMPLETE, ABORT; under a grant also REVOKE or REJECT). When the
 * master is lost meanwhile the verdict of an op whose data moved comes from the restarted one (the rebuild
 * answers every RESUME that lists the op as finished), so with through_restart the wait goes on through the
 * reconnect window. 0 with the verdict in end_ok, -PERR_RESTARTED without one. */
static int await_verdict(pccl_op_t *o, int through_restart) {
    pcclComm_t *c = o->comm;
    uint64_t deadline = 0, spin_until = comm_spin_until(c);
    pthread_mutex_lock(&c->mu);
    while (!o->got_end && !comm_ended(c) && !atomic_load(&c->shutting_down)) {
        if (atomic_load(&c->master_epoch) == o->epoch) {
            pwait_cond_sleep_spin(o->w.cv, &c->mu, 0, spin_until);
            continue;
        }
        if (!through_restart || c->reconnect_ms <= 0 || atomic_load(&c->stopping)) break;
        uint64_t now = net_now_ms();
        if (!deadline) deadline = now + (uint64_t)c->reconnect_ms + (uint64_t)c->connect_timeout_ms + 5000;
        if (now >= deadline) break;
        pwait_cond_sleep(o->w.cv, &c->mu, deadline);
    }
    int got = o->got_end;
    pthread_mutex_unlock(&c->mu);
    return got ? 0 : -PERR_RESTARTED;
}

static void send_done(pccl_op_t *o, int ok) {
    wire_msg_t d = {.type = C2M_COLL_DONE};
    d.u.coll.tag = o->tag;
    d.u.coll.op_seq = o->op_seq;
    d.u.coll.ok = (uint8_t)ok;
    comm_send(o->comm, o->epoch, &d);
}

/* Fills rank_of, counts and holds from the COMMENCE's members: 0, or -PERR_FAILED when they are not a ranking
 * of the world (logged). */
static int read_members(pccl_op_t *o, uint8_t *seen) {
    const __typeof__(o->commence.u.commence) *cm = &o->commence.u.commence;
    uint32_t n = o->world;
    uint8_t *holds = (uint8_t *)o->holds;
    for (uint32_t p = 0; p < n; p++) {
        uint32_t r = cm->members[p].rank;
        uint64_t cnt = o->d.kind == pcclExtCollAllGatherV ? cm->members[p].count : o->d.count;
        holds[p] = cm->members[p].holds;
        if (r >= n || seen[r]) {
            PLOG_ERROR(o->comm->log_name, "%s tag %llu: the master's ranks are not a ranking of %u members",
                       o->kind->name, (unsigned long long)o->tag, n);
            return -PERR_FAILED;
        }
        seen[r] = 1;
        o->rank_of[p] = r;
        o->counts[r] = cnt;
    }
    if (cm->kind != (uint8_t)o->d.kind) {
        PLOG_ERROR(o->comm->log_name, "%s tag %llu: the master commenced kind %u", o->kind->name,
                   (unsigned long long)o->tag, (unsigned)cm->kind);
        return -PERR_FAILED;
    }
    return 0;
}

/* This member's ring position, world and ranks from the COMMENCE (records the ring and the world for a RESUME).
 * 0, -PERR_FAILED when the master's ring is unusable (logged), or -PERR_NOMEM. */
static int place(pccl_op_t *o) {
    pcclComm_t *c = o->comm;
    const __typeof__(o->commence.u.commence) *cm = &o->commence.u.commence;
    uint32_t n = cm->n, me = n;
    for (uint32_t i = 0; i < n; i++)
        if (memcmp(cm->ring[i], c->uuid, 16) == 0) me = i;
    comm_set_world(c, &cm->world);
    comm_note_ring(c, (const uint8_t(*)[16])cm->ring, n);
    o->info.world_size = n;
    if (me == n || n < 2) {
        PLOG_ERROR(c->log_name, "%s tag %llu: ring from the master is unusable", o->kind->name,
                   (unsigned long long)o->tag);
        return -PERR_FAILED;
    }
    o->pos = me;
    o->world = n;
    /* one block: counts (8-byte aligned first), rank_of, holds, and the ranks seen while reading them */
    uint8_t *m = calloc(n, sizeof(uint64_t) + sizeof(uint32_t) + 2);
    if (!m) return -PERR_NOMEM;
    o->counts = (uint64_t *)m;
    o->rank_of = (uint32_t *)(m + n * sizeof(uint64_t));
    o->holds = m + n * (sizeof(uint64_t) + sizeof(uint32_t));
    int rc = read_members(o, m + n * (sizeof(uint64_t) + sizeof(uint32_t) + 1));
    o->info.rank = o->rank_of[me];
    return rc;
}

/* The backup of the bytes of recvbuf the kind may write (in place only). 0 or -PERR_NOMEM. */
static int take_backup(pccl_op_t *o, size_t *cap) {
    if (!o->bk_len) return 0;
    if (!(o->backup = bufpool_get(&o->comm->buffers, o->bk_len, cap))) return -PERR_NOMEM;
    if (!o->ring_backs_up) memcpy(o->backup, (uint8_t *)o->d.recvbuf + o->bk_off, o->bk_len);
    return 0;
}

/* Tells the master which neighbour could not be reached (opened: what open_streams returned); two such
 * reports about one peer remove it (op_reports_unreachable says when none is made). */
static void report_unreachable(pccl_op_t *o, int opened) {
    const __typeof__(o->commence.u.commence) *cm = &o->commence.u.commence;
    uint32_t n = cm->n, me = o->pos;
    if (!op_reports_unreachable(o, opened)) return;
    wire_msg_t rep = {.type = C2M_PEER_UNREACHABLE};
    memcpy(rep.u.welcome.uuid, cm->ring[opened == -PERR_IO ? (me + 1) % n : (me + n - 1) % n], 16);
    comm_send(o->comm, o->epoch, &rep);
}

/* The op's k streams to the successor and from the predecessor, one pair per slot, through the op's wait.
 * @return 0, -PERR_IO when a successor's stream could not be opened, or -PERR_TIMEOUT when a predecessor's
 * did not arrive (or the op was cancelled meanwhile). */
static int open_streams(pccl_op_t *o, const uint32_t *slot_of, uint32_t k, p2p_conn_t **tx, p2p_conn_t **rx) {
    pcclComm_t *c = o->comm;
    const __typeof__(o->commence.u.commence) *cm = &o->commence.u.commence;
    uint32_t n = cm->n, me = o->pos;
    for (uint32_t s = 0; s < k; s++)
        if (!(tx[s] = p2p_get_tx(c, cm->ring[(me + 1) % n], slot_of[s], c->connect_timeout_ms, &o->w)))
            return -PERR_IO;
    for (uint32_t s = 0; s < k; s++)
        if (!(rx[s] = p2p_get_rx(c, cm->ring[(me + n - 1) % n], slot_of[s], c->timeout_ms, &o->w)))
            return -PERR_TIMEOUT;
    return 0;
}

/* The pacing policy of an op on its streams: the unsent-bytes cap of same-host sends, bounded receive buffers,
 * and spliced sends from the size where they pay off (p2p.h), for the kinds whose ring splices. */
static void pace_streams(pccl_op_t *o, ring_io_t *ios, p2p_conn_t **tx, p2p_conn_t **rx, uint32_t k) {
    pcclComm_t *c = o->comm;
    for (uint32_t s = 0; s < k; s++) {
        ios[s].tx_fd = tx[s]->fd;
        ios[s].rx_fd = rx[s]->fd;
        ios[s].tx_link = tx[s]->link;
        ios[s].rx_link = rx[s]->link;
        p2p_pace_tx(c, tx[s]);
        p2p_bound_rx(c, rx[s], o->move_bytes, o->splices);
        if (p2p_splices(c, tx[s], o->move_bytes, o->splices)) ios[s].tx_pipe = p2p_tx_pipe(tx[s]);
    }
}

/* Opens the op's streams (one stripe per slot the master assigned; every member got the same slots) and runs
 * the kind's data movement over them. *k: the streams opened, which the caller releases. */
static int move_data(pccl_op_t *o, ring_io_t *ios, p2p_conn_t **tx, p2p_conn_t **rx, uint32_t *k) {
    pcclComm_t *c = o->comm;
    uint32_t slot_of[MAX_STRIPES];
    *k = 0;
    for (uint32_t i = 0; i < MAX_STRIPES; i++)
        if (o->commence.u.commence.slots >> i & 1) slot_of[(*k)++] = i;
    int own_links = op_algo_rhd(o); /* the kind connects to its partners itself */
    int opened = own_links ? 0 : open_streams(o, slot_of, *k, tx, rx);
    int spin_us = p2p_local_peers_fit(c) ? RING_SPIN_US : 0;
    size_t staging_cap = 0;
    uint8_t *staging = bufpool_get(&c->buffers, (size_t)*k * STAGING_BYTES, &staging_cap);
    for (uint32_t s = 0; s < *k; s++)
        ios[s] = (ring_io_t){.abort_fd = o->w.fd, .abort_flag = &o->w.result, .timeout_ms = c->timeout_ms,
                             .spin_us = spin_us, .staging = staging ? staging + (size_t)s * STAGING_BYTES : NULL,
                             .staging_size = STAGING_BYTES, .backup = o->ring_backs_up ? o->backup : NULL};
    int rc = -PERR_IO;
    if (opened == 0 && staging) {
        if (!own_links) pace_streams(o, ios, tx, rx, *k);
        rc = o->kind->run(o, ios, *k);
    } else {
        snprintf(ios->err, sizeof ios->err, "%s", opened == -PERR_IO        ? "cannot connect to ring successor"
                                                : opened == -PERR_TIMEOUT ? "ring predecessor did not connect"
                                                                          : "out of memory");
        if (opened != 0) report_unreachable(o, opened);
    }
    bufpool_put(&c->buffers, staging, staging_cap);
    return rc;
}

/* The op's code after its data movement returned rc: a member that finished reports and waits for the group's
 * verdict (another member may still fail), a failed one reports its failure unless the master aborted it. */
static int verdict(pccl_op_t *o, int rc, const ring_io_t *io) {
    pcclComm_t *c = o->comm;
    const char *kind = o->kind->name;
    unsigned long long tag = (unsigned long long)o->tag;
    if (rc == 0 && !mark_ring_done(o)) return -PERR_RESTARTED;
    if (rc == 0) {
        send_done(o, 1);
        if (await_verdict(o, 1) != 0) return -PERR_RESTARTED;
        if (o->end_ok) return 0;
        if (!op_revoked(o))
            PLOG_INFO(c->log_name, "%s tag %llu finished here but was aborted for the group; restoring", kind, tag);
        return -PERR_ABORTED;
    }
    if (rc != -PERR_CANCELLED) send_done(o, 0);
    /* Under a grant a ring fails also while a member has not started it yet: the master decides (ABORT, or
     * REVOKE and a plain vote), so the op waits for its word. */
    if (o->pipelined) await_verdict(o, 0);
    if (op_revoked(o))
        PLOG_DEBUG(c->log_name, "%s tag %llu stopped: the master revoked its grant", kind, tag);
    else if (rc != -PERR_CANCELLED)
        PLOG_WARN(c->log_name, "%s tag %llu failed: %s", kind, tag, io->err);
    else
        PLOG_INFO(c->log_name, "%s tag %llu aborted by the master (another peer failed)", kind, tag);
    return rc;
}

/* The caller's buffer as it was: the input moved back to recvbuf's start (own_moved), then the backup. */
static void restore(pccl_op_t *o) {
    uint8_t *buf = o->d.recvbuf;
    if (o->own_moved) memmove(buf, buf + o->own_off, o->own_len);
    o->own_moved = 0;
    if (o->backup) memcpy(buf + o->bk_off, o->backup, o->bk_len);
}

/* A commenced op: place, plan, backup, data, verdict, restore (a kind that moves no data: place alone). */
static int perform(pccl_op_t *o) {
    pcclComm_t *c = o->comm;
    size_t backup_cap = 0;
    o->own_off = o->own_len = 0;
    o->own_moved = 0;
    int rc = place(o);
    if (rc == 0) rc = o->kind->plan(o);
    if (rc == 0) rc = take_backup(o, &backup_cap);
    if (rc == 0 && o->own_len && o->own_off) { /* what it overwrites is in the backup now */
        memmove((uint8_t *)o->d.recvbuf + o->own_off, o->d.recvbuf, o->own_len);
        o->own_moved = 1;
    }
    if (!o->kind->moves_data) {
        /* A barrier is complete at its COMMENCE (every member voted): the master expects no report. */
    } else if (rc != 0) {
        send_done(o, 0);
    } else {
        p2p_conn_t *tx[MAX_STRIPES] = {0}, *rx[MAX_STRIPES] = {0};
        ring_io_t ios[MAX_STRIPES];
        uint32_t k = 0;
        ios[0] = (ring_io_t){0};
        int moved = move_data(o, ios, tx, rx, &k);
        o->info.tx_bytes = ios[0].tx_bytes;
        o->info.rx_bytes = ios[0].rx_bytes;
        rc = verdict(o, moved, &ios[0]);
        if (rc != 0 && !op_revoked(o)) op_note_failed(o);
        /* After any failure the streams may hold partial data: drop them, a retry reconnects. */
        for (uint32_t s = 0; s < k; s++) {
            p2p_release(c, tx[s], rc != 0);
            p2p_release(c, rx[s], rc != 0);
        }
        op_rhd_release(o, rc != 0);
        /* A ring that takes the backup as it goes restored what it modified when it failed; its backup is only
         * complete (and needed) when the data moved and the group aborted afterwards. */
        if (rc != 0 && (!o->ring_backs_up || moved == 0)) restore(o);
    }
    bufpool_put(&c->buffers, o->backup, backup_cap);
    o->backup = NULL;
    free(o->counts);
    o->counts = NULL;
    o->rank_of = NULL;
    o->holds = NULL;
    return rc;
}

/* Whether the master revoked the grant o ran under (read under mu: the reader sets it). */
static int op_revoked(pccl_op_t *o) {
    pthread_mutex_lock(&o->comm->mu);
    int r = o->revoked;
    pthread_mutex_unlock(&o->comm->mu);
    return r;
}

/* After a revoked grant: the op as before its vote, to vote again plainly. */
static void reset_for_vote(pccl_op_t *o) {
    pcclComm_t *c = o->comm;
    pthread_mutex_lock(&c->mu);
    wire_msg_free(&o->commence);
    memset(&o->commence, 0, sizeof o->commence);
    o->got_commence = o->got_reject = o->got_end = o->end_ok = o->ring_done = 0;
    o->pipelined = o->revoked = 0;
    o->no_grant = 1;
    o->op_seq = 0;
    pthread_mutex_unlock(&c->mu);
}

void op_run(pccl_op_t *o) {
    int rc = op_vote(o);
    if (rc == 0) rc = perform(o);
    if (rc != 0 && op_revoked(o)) {
        PLOG_DEBUG(o->comm->log_name, "%s tag %llu: grant revoked, voting again", o->kind->name,
                   (unsigned long long)o->tag);
        reset_for_vote(o);
        rc = op_vote(o);
        if (rc == 0) rc = perform(o);
    }
    pthread_mutex_lock(&o->comm->mu);
    int rejected = o->pipelined && o->got_reject;
    pthread_mutex_unlock(&o->comm->mu);
    o->rc = rejected ? op_rejected(o) : rc;
}
