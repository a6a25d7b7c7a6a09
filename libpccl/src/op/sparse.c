/*
 * sparse.c - pcclExtSparseAllReduce (pccl_sparse.h, docs/sparse.md): the member's pack (kernels/pccl_topk.h),
 * two collectives of the call's tag (an all-gather of every member's settings, then the all-gather of variable
 * counts of the packs) and the sum of the packs in rank order.
 *
 * Nothing the caller sees changes before both collectives succeeded: the new residual is built in the residual's
 * spare buffer and swapped in at the end, and recvbuf is written only then, so an abort leaves both as they were.
 */
#include "op/sparse.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "op/op_record.h"
#include "pccl_kernels.h"
#include "pccl_topk.h"

#define HDR_BYTES 48u
#define HDR_MAGIC 0x4b505350u /* "PSPK" */
#define HDR_VERSION 1u

/* A pack's header: the settings every member must share, this member's body bytes and non-finite values. */
typedef struct hdr {
    uint32_t magic, chunk;
    uint8_t version, bits, dtype, op;
    uint64_t fraction_bits, count, nonfinite, body_bytes;
} hdr_t;

static void hdr_put(uint8_t *p, const hdr_t *h) {
    memset(p, 0, HDR_BYTES);
    wire_put_u32(p, h->magic);
    p[4] = h->version, p[5] = h->bits, p[6] = h->dtype, p[7] = h->op;
    wire_put_u64(p + 8, h->fraction_bits);
    wire_put_u64(p + 16, h->count);
    wire_put_u64(p + 24, h->nonfinite);
    wire_put_u64(p + 32, h->body_bytes);
    wire_put_u32(p + 40, h->chunk);
}

static hdr_t hdr_get(const uint8_t *p) {
    return (hdr_t){.magic = wire_get_u32(p), .version = p[4], .bits = p[5], .dtype = p[6], .op = p[7],
                   .fraction_bits = wire_get_u64(p + 8), .count = wire_get_u64(p + 16),
                   .nonfinite = wire_get_u64(p + 24), .body_bytes = wire_get_u64(p + 32),
                   .chunk = wire_get_u32(p + 40)};
}

static int same_settings(const hdr_t *a, const hdr_t *b) {
    return a->magic == b->magic && a->version == b->version && a->bits == b->bits && a->dtype == b->dtype &&
           a->op == b->op && a->fraction_bits == b->fraction_bits && a->count == b->count && a->chunk == b->chunk;
}

static double hdr_fraction(const hdr_t *h) {
    double f;
    memcpy(&f, &h->fraction_bits, sizeof f);
    return f;
}

/* One call's state: its settings, this member's pack and the new residual (acc). */
typedef struct sparse_call {
    pcclComm_t *c;
    uint64_t tag;
    pccl_topk_cfg_t cfg;
    hdr_t h;
    void *acc;
    uint8_t *pack;
    size_t body_max, pack_bytes;
    uint64_t kept;
    pcclExtSparseInfo_t info;
} sparse_call_t;

/* Runs one collective of d on the calling thread, adding its bytes to the call's info. */
static int run_coll(sparse_call_t *s, const pcclExtCollDescriptor_t *d, pcclExtCollInfo_t *ci) {
    pccl_op_t *o;
    int rc = op_launch(s->c, d, 0, &o);
    if (rc != 0) return rc;
    op_run(o);
    *ci = (pcclExtCollInfo_t){0};
    rc = op_finish(s->c, o, ci);
    s->info.tx_bytes += ci->tx_bytes;
    s->info.rx_bytes += ci->rx_bytes;
    return rc;
}

/* The bytes of a pack whose header is h; 0 when h claims more than its settings allow. */
static size_t pack_size(const sparse_call_t *s, const hdr_t *h) {
    if (h->nonfinite > s->cfg.count || h->body_bytes > s->body_max) return 0;
    return HDR_BYTES + (size_t)h->body_bytes + (size_t)h->nonfinite * pccl_topk_exc_bytes(&s->cfg);
}

/* Builds this member's pack and the residual it leaves (acc). */
static int build_pack(sparse_call_t *s, const void *in, pcclExtSparseResidual_t *res) {
    size_t esz = pccl_dtype_size(res->datatype);
    s->kept = pccl_topk_kept(&s->cfg);
    s->body_max = pccl_topk_body_max(&s->cfg);
    s->acc = res->spare;
    res->spare = NULL;
    if (!s->acc && !(s->acc = malloc((size_t)s->cfg.count * esz))) return -PERR_NOMEM;
    s->h.nonfinite = pccl_topk_accumulate(&s->cfg, s->acc, in, res->data);
    size_t exc_bytes = (size_t)s->h.nonfinite * pccl_topk_exc_bytes(&s->cfg);
    if (!(s->pack = malloc(HDR_BYTES + s->body_max + exc_bytes))) return -PERR_NOMEM;
    /* the exceptions wait behind the largest body, then move up behind the body written */
    uint8_t *exc = s->pack + HDR_BYTES + s->body_max;
    if (s->h.nonfinite) pccl_topk_take_nonfinite(&s->cfg, s->acc, exc);
    s->h.body_bytes = pccl_topk_encode(&s->cfg, s->acc, s->pack + HDR_BYTES);
    memmove(s->pack + HDR_BYTES + s->h.body_bytes, exc, exc_bytes);
    s->pack_bytes = pack_size(s, &s->h);
    hdr_put(s->pack, &s->h);
    return 0;
}

static void log_mismatch(const sparse_call_t *s, const hdr_t *a, uint32_t ra, const hdr_t *b, uint32_t rb) {
    PLOG_ERROR(s->c->log_name, "sparse all-reduce tag %llu: settings differ between members (parameter "
               "mismatch): rank %u has count %llu dtype %d op %d fraction %g bits %u (format %u), rank %u has count "
               "%llu dtype %d op %d fraction %g bits %u (format %u)", (unsigned long long)s->tag, ra,
               (unsigned long long)a->count, a->dtype, a->op, hdr_fraction(a), a->bits, a->version, rb,
               (unsigned long long)b->count, b->dtype, b->op, hdr_fraction(b), b->bits, b->version);
}

/* The settings check: every member's header gathered; the same verdict on every member, since each compares
 * the same headers. The packs' sizes (by rank) go to sizes. */
static int check_settings(sparse_call_t *s, uint64_t **sizes, uint32_t *world) {
    size_t cap = (size_t)WIRE_MAX_PEERS * HDR_BYTES;
    uint8_t *all = malloc(cap);
    if (!all) return -PERR_NOMEM;
    pcclExtCollDescriptor_t d = {.kind = pcclExtCollAllGather, .tag = s->tag, .sendbuf = s->pack, .recvbuf = all,
                                 .count = HDR_BYTES, .recv_capacity = cap, .datatype = pcclUint8};
    pcclExtCollInfo_t ci;
    int rc = run_coll(s, &d, &ci);
    uint32_t w = ci.world_size;
    if (rc == 0 && !(*sizes = malloc(w * sizeof **sizes))) rc = -PERR_NOMEM;
    /* every header's settings first: a size is judged by this member's settings, so a member with another
     * fraction must read as a mismatch on every member, whatever its rank */
    for (uint32_t r = 0; rc == 0 && r < w; r++) {
        hdr_t h0 = hdr_get(all), hr = hdr_get(all + (size_t)r * HDR_BYTES);
        if (!same_settings(&h0, &hr)) {
            log_mismatch(s, &h0, 0, &hr, r);
            rc = -PERR_MISMATCH;
        }
    }
    for (uint32_t r = 0; rc == 0 && r < w; r++) {
        hdr_t hr = hdr_get(all + (size_t)r * HDR_BYTES);
        if (!((*sizes)[r] = pack_size(s, &hr))) {
            PLOG_ERROR(s->c->log_name, "sparse all-reduce tag %llu: rank %u's header claims more than its settings "
                       "allow", (unsigned long long)s->tag, r);
            rc = -PERR_PROTOCOL;
        }
    }
    *world = w;
    free(all);
    return rc;
}

/* Every pack of the gathered output checked against the settings and its own size before anything is added. */
static int check_packs(const sparse_call_t *s, const uint8_t *all, const uint64_t *counts, uint32_t w) {
    const uint8_t *p = all;
    for (uint32_t r = 0; r < w; p += counts[r], r++) {
        hdr_t h = hdr_get(p);
        int rc = counts[r] >= HDR_BYTES && same_settings(&h, &s->h) && pack_size(s, &h) &&
                 counts[r] == pack_size(s, &h) ? 0 : -PERR_PROTOCOL;
        if (rc == 0)
            rc = pccl_topk_check(&s->cfg, p + HDR_BYTES, h.body_bytes, p + HDR_BYTES + h.body_bytes, h.nonfinite);
        if (rc != 0) {
            PLOG_ERROR(s->c->log_name, "sparse all-reduce tag %llu: rank %u's pack is malformed",
                       (unsigned long long)s->tag, r);
            return rc;
        }
    }
    return 0;
}

/* recvbuf = the packs summed in rank order (each rank's chunks, then its non-finite values); avg divides. */
static void sum_packs(const sparse_call_t *s, const uint8_t *all, const uint64_t *counts, uint32_t w, void *out,
                      pcclRedOp_t op, pcclDataType_t dt) {
    memset(out, 0, (size_t)s->cfg.count * pccl_dtype_size(dt));
    const uint8_t *p = all;
    for (uint32_t r = 0; r < w; p += counts[r], r++) {
        hdr_t h = hdr_get(p);
        pccl_topk_decode_add(&s->cfg, p + HDR_BYTES, out);
        pccl_topk_exc_add(&s->cfg, p + HDR_BYTES + h.body_bytes, h.nonfinite, out);
    }
    if (op == pcclAvg) pccl_reduce_finalize_avg(out, (size_t)s->cfg.count, dt, w);
}

/* The exchange: settings, then packs; on success recvbuf holds the sum and the residual is swapped in. */
static int exchange(sparse_call_t *s, void *recvbuf, pcclRedOp_t op, pcclExtSparseResidual_t *res) {
    uint64_t *sizes = NULL, *counts = NULL, total = 0;
    uint8_t *all = NULL;
    uint32_t w = 0;
    int rc = check_settings(s, &sizes, &w);
    for (uint32_t r = 0; rc == 0 && r < w; r++) total += sizes[r];
    if (rc == 0 && (!(all = malloc(total)) || !(counts = malloc(w * sizeof *counts)))) rc = -PERR_NOMEM;
    pcclExtCollInfo_t ci = {0};
    if (rc == 0) {
        pcclExtCollDescriptor_t d = {.kind = pcclExtCollAllGatherV, .tag = s->tag, .sendbuf = s->pack,
                                     .recvbuf = all, .count = s->pack_bytes, .recv_capacity = total,
                                     .datatype = pcclUint8, .counts = counts, .counts_capacity = w};
        rc = run_coll(s, &d, &ci);
    }
    if (rc == 0) rc = check_packs(s, all, counts, ci.world_size);
    if (rc == 0) {
        sum_packs(s, all, counts, ci.world_size, recvbuf, op, res->datatype);
        void *old = res->data;
        res->data = s->acc;
        s->acc = old;
        s->info.rank = ci.rank;
        s->info.world_size = ci.world_size;
    }
    free(sizes);
    free(counts);
    free(all);
    return rc;
}

static int check_call(const pcclComm_t *c, const void *sendbuf, const void *recvbuf, uint64_t count,
                      pcclDataType_t dt, pcclRedOp_t op, double fraction, int bits,
                      const pcclExtSparseResidual_t *res, uint64_t tag) {
    const char *why = !c ? "no communicator" : !res ? "no residual" : !recvbuf ? "no receive buffer"
                      : !sparse_dtype_ok(dt) ? "the dtype is neither float nor double"
                      : op != pcclSum && op != pcclAvg ? "the op is neither sum nor avg"
                      : count != res->count || dt != res->datatype ? "count or dtype differ from the residual's"
                      : NULL;
    size_t bytes = res ? (size_t)res->count * pccl_dtype_size(res->datatype) : 0;
    const uint8_t *s = sendbuf, *r = recvbuf;
    if (!why && s && s != r && s < r + bytes && r < s + bytes) why = "the send and receive buffers overlap";
    if (why) {
        PLOG_ERROR("pccl", "sparse all-reduce tag %llu: %s", (unsigned long long)tag, why);
        return -PERR_INVALID;
    }
    return sparse_check_settings(fraction, bits, "sparse all-reduce");
}

pcclResult_t pcclExtSparseAllReduce(const void *sendbuf, void *recvbuf, uint64_t count, pcclDataType_t datatype,
                                    pcclRedOp_t op, double fraction, int bits, pcclExtSparseResidual_t *residual,
                                    uint64_t tag, const pcclComm_t *communicator, pcclExtSparseInfo_t *info) {
    pcclComm_t *c = (pcclComm_t *)communicator;
    int rc = check_call(c, sendbuf, recvbuf, count, datatype, op, fraction, bits, residual, tag);
    if (rc != 0) return perr_result(rc);
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    sparse_call_t s = {.c = c, .tag = tag,
                       .cfg = {.count = count, .is_double = datatype == pcclDouble, .bits = bits, .fraction = fraction},
                       .h = {.magic = HDR_MAGIC, .chunk = PCCL_TOPK_CHUNK, .version = HDR_VERSION, .bits = (uint8_t)bits,
                             .dtype = (uint8_t)datatype, .op = (uint8_t)op, .count = count}};
    memcpy(&s.h.fraction_bits, &fraction, sizeof fraction);
    rc = build_pack(&s, sendbuf ? sendbuf : recvbuf, residual);
    if (rc == 0) rc = exchange(&s, recvbuf, op, residual);
    s.info.kept = s.kept;
    s.info.nonfinite = s.h.nonfinite;
    s.info.pack_bytes = s.pack_bytes;
    if (info) *info = s.info;
    residual->spare = s.acc; /* the old residual after a success, else the unused buffer */
    free(s.pack);
    return op_result(c, rc);
}
