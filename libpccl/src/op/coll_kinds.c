/* coll_kinds.c - the data-movement step of the collectives beyond the all-reduce: broadcast, all-gather,
 * all-gather of variable counts, reduce-scatter and barrier (pccl_coll.h says what each computes; op_record.h
 * what a kind provides). */
#include "op/op_record.h"

#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "p2p/p2p.h"
#include "pccl_kernels.h"

#define FLAGS_ALL (PCCL_EXT_COLL_ROOT | PCCL_EXT_COLL_RANKED | PCCL_EXT_COLL_SHARED_SOURCES)

static int invalid(const pcclExtCollDescriptor_t *d, const char *kind, const char *why) {
    PLOG_ERROR("pccl", "%s tag %llu: %s", kind, (unsigned long long)d->tag, why);
    return -PERR_INVALID;
}

/* What every kind with data checks: known flags (the root's only on a broadcast), a receive buffer that holds at
 * least min_recv elements, the buffers (op_check_buffers; send_elems from sendbuf out of place). */
static int check_data(const pcclExtCollDescriptor_t *d, const char *kind, uint64_t send_elems, uint64_t min_recv) {
    if (d->flags & ~FLAGS_ALL) return invalid(d, kind, "unknown flags");
    if (d->kind != pcclExtCollBroadcast && (d->flags & (PCCL_EXT_COLL_ROOT | PCCL_EXT_COLL_SHARED_SOURCES)))
        return invalid(d, kind, "the root and shared-sources flags belong to a broadcast");
    if (!d->recvbuf) return invalid(d, kind, "no receive buffer");
    if (d->recv_capacity < min_recv) return invalid(d, kind, "the receive buffer is smaller than the input");
    return op_check_buffers(d, d->sendbuf == d->recvbuf ? 0 : send_elems, d->recv_capacity);
}

/* The output fits in recvbuf (the master checked it for every member; a COMMENCE that disagrees is refused). */
static int fits(pccl_op_t *o, uint64_t elems) {
    if (elems <= o->d.recv_capacity) return 0;
    PLOG_ERROR(o->comm->log_name, "%s tag %llu: the output of %llu elements does not fit in %llu", o->kind->name,
               (unsigned long long)o->tag, (unsigned long long)elems, (unsigned long long)o->d.recv_capacity);
    return -PERR_PROTOCOL;
}

static size_t esz_of(const pccl_op_t *o) { return pccl_dtype_size(o->d.datatype); }


/* ---- broadcast: the root's input (sendbuf, in place recvbuf) reaches every member's recvbuf; a member that
 * holds the data already (shared sources) sends from its recvbuf and writes nothing. */
static int bc_validate(const pcclExtCollDescriptor_t *d) {
    if (d->count == 0) return invalid(d, "broadcast", "count 0");
    return check_data(d, "broadcast", d->flags & PCCL_EXT_COLL_ROOT ? d->count : 0, d->count);
}

static int bc_plan(pccl_op_t *o) {
    size_t bytes = o->d.count * esz_of(o);
    uint32_t root = o->commence.u.commence.root;
    if (root >= o->world || !o->holds[root] || !(o->d.flags & PCCL_EXT_COLL_ROOT) != (root != o->pos)) {
        PLOG_ERROR(o->comm->log_name, "broadcast tag %llu: the master's root %u is not the member that holds the "
                   "data", (unsigned long long)o->tag, root);
        return -PERR_PROTOCOL;
    }
    o->info.root = o->rank_of[root];
    o->info.count = o->d.count;
    o->move_bytes = bytes;
    o->splices = op_algo_rhd(o) ? P2P_SPLICE_NEVER : P2P_SPLICE_ONE_WAY;
    if (op_in_place(o) && !o->holds[o->pos]) {
        /* The ring saves each range of recvbuf just before it receives into it (ring_io_t.backup), so the copy
         * runs on the receiver's otherwise idle core while the bytes arrive; the tree takes it up front. */
        o->bk_len = bytes;
        o->ring_backs_up = !op_algo_rhd(o);
    }
    return 0;
}

static int bc_run(pccl_op_t *o, ring_io_t *ios, uint32_t k) {
    const void *src = o->d.flags & PCCL_EXT_COLL_ROOT ? o->d.sendbuf : o->d.recvbuf;
    if (op_algo_rhd(o)) return op_rhd_broadcast(o, ios, k, src); /* the binomial tree (op_rhd.c) */
    return ring_broadcast(ios, k, src, o->d.recvbuf, o->move_bytes, o->holds, o->pos, o->world, o->op_seq);
}

/* ---- all-gather and all-gather of variable counts: in place this member's block is the first count elements
 * of recvbuf. The backup keeps the rest of the output (what the other blocks overwrite), then the block moves to
 * its rank's place (op_run.c), from where the ring sends it; a failure moves it back (no copy of it is kept: the
 * ring never writes its own block). The backup is taken before the ring starts: every member sends and receives
 * all along, so a copy during the transfer has no idle core to run on. */
static int ag_validate(const pcclExtCollDescriptor_t *d) {
    if (d->count == 0) return invalid(d, "all_gather", "count 0");
    return check_data(d, "all_gather", d->count, d->count);
}

static int agv_validate(const pcclExtCollDescriptor_t *d) {
    if (!d->counts || d->counts_capacity == 0) return invalid(d, "all_gather_v", "no counts array");
    return check_data(d, "all_gather_v", d->count, d->count);
}

/* The plan of both all-gathers once counts (by rank) is known: total elements, backup, output size. */
static int gather_plan(pccl_op_t *o) {
    uint64_t total = 0;
    for (uint32_t r = 0; r < o->world; r++) {
        if (o->counts[r] > UINT64_MAX - total) return fits(o, UINT64_MAX);
        total += o->counts[r];
    }
    if (o->counts[o->info.rank] != o->d.count) {
        PLOG_ERROR(o->comm->log_name, "%s tag %llu: the master's count of this member differs from its own",
                   o->kind->name, (unsigned long long)o->tag);
        return -PERR_PROTOCOL;
    }
    int rc = fits(o, total);
    if (rc != 0) return rc;
    o->info.count = total;
    o->move_bytes = total * esz_of(o);
    o->splices = op_algo_rhd(o) ? P2P_SPLICE_NEVER : P2P_SPLICE_ONE_WAY;
    if (op_in_place(o)) {
        uint64_t before = 0; /* elements of the ranks before this one */
        for (uint32_t r = 0; r < o->info.rank; r++) before += o->counts[r];
        o->own_len = o->d.count * esz_of(o);
        o->own_off = before * esz_of(o);
        o->bk_off = o->own_len;
        o->bk_len = o->move_bytes - o->own_len;
    }
    return 0;
}

static int agv_plan(pccl_op_t *o) {
    if (o->world > o->d.counts_capacity) {
        PLOG_ERROR(o->comm->log_name, "all_gather_v tag %llu: %u members do not fit in %u counts",
                   (unsigned long long)o->tag, o->world, o->d.counts_capacity);
        return -PERR_PROTOCOL;
    }
    int rc = gather_plan(o);
    if (rc == 0) memcpy(o->d.counts, o->counts, o->world * sizeof *o->counts);
    return rc;
}

static int ag_run(pccl_op_t *o, ring_io_t *ios, uint32_t k) {
    const void *src = !op_in_place(o) ? o->d.sendbuf : (const uint8_t *)o->d.recvbuf + o->own_off;
    if (op_algo_rhd(o)) return op_rhd_all_gather(o, ios, k, src); /* recursive doubling (op_rhd.c) */
    return ring_allgather(ios, k, src, o->d.recvbuf, o->counts, esz_of(o), o->rank_of, o->pos, o->world,
                          o->op_seq);
}

/* ---- reduce-scatter: rank r keeps block r of the reduced input (pccl_coll.h's split); in place the block is
 * written at its own offset in recvbuf, which is all the backup keeps. */
static int rs_validate(const pcclExtCollDescriptor_t *d) {
    if (d->count == 0) return invalid(d, "reduce_scatter", "count 0");
    int rc = check_data(d, "reduce_scatter", d->count, d->sendbuf == d->recvbuf ? d->count : 0);
    return rc ? rc : op_check_reduce(d);
}

static int rs_plan(pccl_op_t *o) {
    uint64_t n = o->d.count, w = o->world, r = o->info.rank;
    uint64_t off = r * (n / w) + (r < n % w ? r : n % w), len = n / w + (r < n % w);
    int rc = op_in_place(o) ? 0 : fits(o, len);
    if (rc != 0) return rc;
    o->info.offset = off;
    o->info.count = len;
    o->move_bytes = n * esz_of(o);
    if (op_in_place(o)) {
        o->bk_off = off * esz_of(o);
        o->bk_len = len * esz_of(o);
    }
    return 0;
}

static int rs_run(pccl_op_t *o, ring_io_t *ios, uint32_t k) {
    const pcclExtCollDescriptor_t *d = &o->d;
    const pcclQuantizationOptions_t *qo = &d->quantization_options;
    uint8_t *out = (uint8_t *)d->recvbuf + (op_in_place(o) ? o->bk_off : 0), *wire = NULL;
    size_t cap = 0;
    if (op_algo_rhd(o)) return op_rhd_reduce_scatter(o, ios, k, out); /* recursive halving (op_rhd.c) */
    if (qo->algorithm != pcclQuantNone) {
        size_t need = ring_quant_wire_bytes(d->count, qo->quantized_datatype, o->world);
        if (!(wire = bufpool_get(&o->comm->buffers, need, &cap))) {
            snprintf(ios->err, sizeof ios->err, "out of memory for %zu bytes of quantized blocks", need);
            return -PERR_IO;
        }
    }
    /* The partial sums in flight come from the pool too: fresh memory would fault in on every operation. */
    size_t work_need = ring_reduce_scatter_work_bytes(d->count, d->datatype, qo->algorithm, o->world, k), work_cap = 0;
    uint8_t *work = work_need ? bufpool_get(&o->comm->buffers, work_need, &work_cap) : NULL;
    int rc = ring_reduce_scatter_in(ios, k, d->sendbuf, out, d->count, d->datatype, d->op, qo->algorithm,
                                    qo->quantized_datatype, wire, o->rank_of, o->pos, o->world, o->op_seq, work,
                                    work_cap);
    bufpool_put(&o->comm->buffers, work, work_cap);
    bufpool_put(&o->comm->buffers, wire, cap);
    return rc;
}

/* ---- barrier: the vote and the COMMENCE are all of it (the master ends it there: one round trip). */
static int bar_validate(const pcclExtCollDescriptor_t *d) {
    if (d->flags & ~PCCL_EXT_COLL_RANKED) return invalid(d, "barrier", "flags other than the rank key's");
    return 0;
}

static int bar_plan(pccl_op_t *o) {
    (void)o;
    return 0;
}

const op_kind_t op_kind_broadcast = {"broadcast", 1, bc_validate, bc_plan, bc_run};
const op_kind_t op_kind_all_gather = {"all_gather", 1, ag_validate, gather_plan, ag_run};
const op_kind_t op_kind_all_gather_v = {"all_gather_v", 1, agv_validate, agv_plan, ag_run};
const op_kind_t op_kind_reduce_scatter = {"reduce_scatter", 1, rs_validate, rs_plan, rs_run};
const op_kind_t op_kind_barrier = {"barrier", 0, bar_validate, bar_plan, NULL};
