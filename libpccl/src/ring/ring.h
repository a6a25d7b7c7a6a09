/*
 * ring.h - the pipelined ring all-reduce over one pair of sockets, and the ring all-gather, reduce-scatter and
 * broadcast over the same connections (internal).
 *
 * Algorithm: reduce-scatter then all-gather over world_size chunks
 * (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
 * workstations", JPDC 2009; PCCL technical report section 4.1). Both phases
 * are one continuous stream per direction: the k-th chunk sent is
 * (rank - k) mod N and the k-th received is (rank - k - 1) mod N; bytes of a
 * received chunk are forwarded as soon as they are reduced (reduce-scatter)
 * or stored (all-gather), so sending, receiving and reducing overlap with no
 * step barrier. A single poll loop drives both sockets and the abort fd, so
 * an abort costs no extra I/O on the data path.
 *
 * Determinism: each chunk is reduced in a fixed order along the ring and its
 * final bytes are copied unchanged to everyone, so all peers end bit-identical.
 */
#ifndef PCCL_RING_H
#define PCCL_RING_H

#include <stddef.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "pccl.h"
#include "sec/sec.h"

/* The ring's functions return 0 or -PERR_<NAME> (base/err.h): -PERR_IO (a socket failed or closed), -PERR_CANCELLED
 * (abort_fd/abort_flag: the operation's wait was cancelled), -PERR_TIMEOUT (no progress for timeout_ms),
 * -PERR_PROTOCOL (the predecessor is on another operation, or sent a malformed block); io->err says more. */

typedef struct ring_io {
    int tx_fd, rx_fd; /* non-blocking sockets to the successor / from the predecessor */
    int abort_fd;     /* readable = abort now (wakes a sleeping poll) */
    atomic_int *abort_flag; /* nonzero = abort now (checked without a syscall); may be NULL */
    int timeout_ms;   /* fail when no byte moves for this long */
    /* Before sleeping in poll, look at the sockets without sleeping (yielding the core between looks) for up to
     * this many microseconds; 0: sleep at once. Bytes from a peer on another core come sooner than a sleep and
     * its wake-up take. Only where the local peers have a core each (p2p_local_peers_fit). */
    int spin_us;
    uint8_t *staging; /* receive buffer for reduce-scatter */
    size_t staging_size;
    /* Optional, as large as buf: the ring copies each byte range of buf here just before it first
     * modifies it (so no separate pass over the whole buffer is needed before the ring starts, and
     * the copy is cache-hot for the reduce that follows). On 0 it holds all of buf's input; on
     * any failure the ring has already restored buf from it. NULL: buf is left partial on failure. */
    uint8_t *backup;
    /* Optional pipe {read end, write end} of the TX connection: the plain ring then sends the
     * caller's pages without copying them (vmsplice + splice), so the successor reads them when it
     * receives, not when they are sent. The ring itself only rewrites a sent range after the
     * successor has read it; the caller must not write src or buf before the successor has received
     * everything (allreduce.c waits for the group's COMPLETE), and must drop the connection (and
     * pipe) after a failure. NULL: send() copies. */
    const int *tx_pipe;
    /* Optional AEAD streams of an encrypted run (NULL: the sockets carry the bytes as they are);
     * tx_pipe must then be NULL: sealing reads every byte anyway, so there is nothing to splice. */
    sec_link_t *tx_link, *rx_link;
    /* Striping (ring_stripe.c): this ring moves only stripe `stripe` of `nstripes` contiguous
     * slices of every chunk (0 and 0 or 1: the whole chunks), so the chunks, their owners and the
     * order in which each element is reduced are those of the unstriped ring. */
    uint32_t stripe, nstripes;
    uint64_t tx_bytes, rx_bytes; /* out: payload bytes moved */
    char err[128];               /* out: reason on failure */
} ring_io_t;

/*
 * All-reduces count elements of dt into buf. In place (src NULL or == buf) buf
 * holds this peer's contribution on entry; on failure it holds partial data
 * (the caller restores it) unless io->backup is set (then it is restored). Out
 * of place src (count elements, not overlapping buf) is read and never
 * written, buf needs no initial content and is undefined on failure, and
 * io->backup is ignored: with the input intact a retry needs nothing restored,
 * which saves both the input copy and the backup. buf holds the result on
 * 0. pcclAvg divides by world_size at the end. op_seq is exchanged first
 * so a stale stream is detected.
 */
int ring_allreduce(ring_io_t *io, const void *src, void *buf, size_t count, pcclDataType_t dt, pcclRedOp_t op,
                   uint32_t rank, uint32_t world_size, uint64_t op_seq);

/*
 * Quantized all-reduce (ring_quant.c): as ring_allreduce, but chunks travel as
 * blocks of pccl_quant.h encoded with (algo, qdt); reduce-scatter reduces in
 * dt, each chunk's owner encodes the final values once and every peer (the
 * owner included) keeps the decoded values, so all end bit-identical. wire
 * must hold ring_quant_wire_bytes(count, qdt, world_size) bytes. pcclAvg is
 * divided by world_size at the owner. (dt, algo, qdt) must pass pccl_quant_check.
 */
int ring_allreduce_quant(ring_io_t *io, void *buf, size_t count, pcclDataType_t dt, pcclRedOp_t op,
                         pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt, uint8_t *wire, uint32_t rank,
                         uint32_t world_size, uint64_t op_seq);
size_t ring_quant_wire_bytes(size_t count, pcclDataType_t qdt, uint32_t world_size);
/* Copies io's stripe of every chunk of buf back from io->backup (a plain in-place stripe that
 * finished while a sibling failed). */
void ring_restore_stripe(const ring_io_t *io, void *buf, size_t count, size_t esz, uint32_t world_size);

/* One all-reduce's arguments, as the striped ring and recursive halving and doubling take them (algo
 * pcclQuantNone: plain, wire and qdt unused). */
typedef struct ring_ar_args {
    const void *src;
    void *buf;
    size_t count;
    pcclDataType_t dt, qdt;
    pcclRedOp_t op;
    pcclQuantizationAlgorithm_t algo;
    uint8_t *wire;
    uint32_t pos, world;
    uint64_t op_seq;
} ring_ar_args_t;

/*
 * One all-reduce over nstripes rings at once (ring_stripe.c): ios[s] drives the connection pair of
 * stripe s and moves slice s of every chunk (its stripe fields are set here); stripe 0 runs on the
 * calling thread, the others on threads of their own. A failing stripe shuts its siblings'
 * sockets down so they (and the neighbours' stripes) fail at once. With io->backup (in place,
 * plain ring) buf is restored on any failure, as with one ring. wire: as ring_allreduce_quant,
 * NULL for the plain ring. Returns the first failure's -PERR_<NAME> (its reason in ios[0].err)
 * or 0; tx_bytes/rx_bytes of ios[0] are the sums.
 */
int ring_allreduce_striped(ring_io_t *ios, uint32_t nstripes, const void *src, void *buf, size_t count,
                           pcclDataType_t dt, pcclRedOp_t op, pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt,
                           uint8_t *wire, uint32_t rank, uint32_t world_size, uint64_t op_seq);

/*
 * The collectives beyond the all-reduce (ring_gather.c, ring_rs.c, ring_rs_quant.c, ring_bcast.c over the one
 * streaming loop of ring_flow.c; pccl_coll.h says what each computes). Each runs over
 * nstripes connection pairs (ios[0..nstripes-1], as ring_allreduce_striped; 1: the calling thread only) and
 * returns 0 or -PERR_<NAME> (the first failure's reason in ios[0].err; tx_bytes/rx_bytes of ios[0] are the sums).
 * pos is this member's ring position, rank_of[p] the rank of ring position p (a permutation of 0..world_size-1;
 * NULL: the identity). op_seq is exchanged first on every stream, as the all-reduce does. On failure the output
 * is undefined: the caller restores it, except where the broadcast takes io->backup (below).
 */

/* All-gather of variable counts: counts[r] elements (of esz bytes) from rank r; buf receives every block packed
 * in rank order (block r at the sum of counts[0..r-1]). src holds this member's block (may be its place in buf:
 * then nothing is copied; src elsewhere inside buf, as the in-place first count elements, or NULL for those, is
 * moved to its place first). Ring all-gather (Patarasuk & Yuan 2009): block of ring position pos - k travels at step
 * k, forwarded as its bytes arrive. */
int ring_allgather(ring_io_t *ios, uint32_t nstripes, const void *src, void *buf, const uint64_t *counts, size_t esz,
                   const uint32_t *rank_of, uint32_t pos, uint32_t world_size, uint64_t op_seq);

/* Reduce-scatter of count elements of dt with op: src (count elements, never written) is this member's input;
 * out receives the block of rank rank_of[pos] (pccl_coll.h's split: block r at r*(count/W) + min(r, count%W), of
 * count/W + (r < count%W) elements), each element reduced in ring order from that block's first sender (one fixed
 * order, as the all-reduce's reduce-scatter). out may be that block's place in src. pcclAvg divides by
 * world_size at the end. Quantized when algo != pcclQuantNone (pccl_quant.h blocks of qdt on the wire, reduced in
 * dt at each hop; wire holds ring_quant_wire_bytes(count, qdt, world_size) bytes, else NULL). out either is that
 * block's place in src or does not overlap src. Memory: received bytes go through io->staging (at least one
 * element); the plain ring mallocs, for the operation, two slots per stripe (one for a world of 3, none for 2)
 * of a block's slice for the partial sums in flight; the quantized one keeps its partial sums in wire and
 * needs one block of PCCL_QBLOCK_ELEMS elements of dt per stripe (io->staging when large enough, else malloc). */
int ring_reduce_scatter(ring_io_t *ios, uint32_t nstripes, const void *src, void *out, size_t count,
                        pcclDataType_t dt, pcclRedOp_t op, pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt,
                        uint8_t *wire, const uint32_t *rank_of, uint32_t pos, uint32_t world_size, uint64_t op_seq);
/* The bytes of partial sums a plain reduce-scatter keeps in flight (0 for a world below 3 or a quantized one).
 * A caller that passes work (at least this many bytes, e.g. from its buffer pool) to ring_reduce_scatter_in
 * saves the allocation, and the page faults of fresh memory, on every operation. */
size_t ring_reduce_scatter_work_bytes(size_t count, pcclDataType_t dt, pcclQuantizationAlgorithm_t algo,
                                      uint32_t world_size, uint32_t nstripes);
/* ring_reduce_scatter with the partial sums in work (work_bytes of them; NULL or too small: allocated here). */
int ring_reduce_scatter_in(ring_io_t *ios, uint32_t nstripes, const void *src, void *out, size_t count,
                           pcclDataType_t dt, pcclRedOp_t op, pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt,
                           uint8_t *wire, const uint32_t *rank_of, uint32_t pos, uint32_t world_size,
                           uint64_t op_seq, uint8_t *work, size_t work_bytes);

/* Broadcast of bytes bytes, pipelined along the ring (a chain): holds[p] is 1 for the ring positions that hold
 * the data already (the root, and with shared sources every member equal to it). Each holder streams to the
 * members after it up to the next holder; a member that does not hold forwards every byte as it arrives. A
 * holder reads src (NULL: buf; copied to buf when src != buf); the others write buf. At least one position must
 * hold (else -PERR_INVALID). A member that does not hold, with ios[0].backup (bytes bytes), saves each range of buf
 * there just before it receives into it: on failure buf is restored, on 0 the backup holds all of buf's input. */
int ring_broadcast(ring_io_t *ios, uint32_t nstripes, const void *src, void *buf, size_t bytes,
                   const uint8_t *holds, uint32_t pos, uint32_t world_size, uint64_t op_seq);

/*
 * The all-reduce by recursive halving and doubling (ring_rhd_ar.c, ring_rhd_sched.c; docs/algorithms.md): the
 * latency-optimal choice for small payloads and many members, 2 log2 N exchanges (two more when N is not a power
 * of two) instead of the ring's 2 (N - 1) hops. Positions are ring positions; the partners are not ring
 * neighbours, so the caller's link connects io (tx_fd, rx_fd, tx_link, rx_link) to the member at ring position
 * peer before each step (the same peer may come twice: the link reuses the pair; a striped run passes io of
 * stripe io->stripe), returning 0 or -PERR_<NAME> with io->err set; shut (striped runs) shuts every connection
 * the link hands out down, so that a failing stripe ends its siblings and partners at once. Quantized when algo
 * != pcclQuantNone: blocks of pccl_quant.h encoded with (algo, qdt) travel, each block's owner encodes its
 * result once and every member (the owner too) keeps the decoded values, so all end bit-identical; wire holds
 * ring_rhd_quant_wire_bytes. Striped over nstripes connection pairs (ios[s] for stripe s; its stripe fields set
 * here): each moves its slice of every block (whole quantization blocks when quantized), so the result is that
 * of one stripe. In place (src NULL or == buf) buf is left partial on failure (the caller restores it;
 * io->backup is not used); out of place src is copied to buf first and never written. pcclAvg divides by
 * world at each block's owner. */
typedef int (*ring_rhd_link_fn)(void *ctx, ring_io_t *io, uint32_t peer);
typedef struct ring_rhd_ar {
    ring_rhd_link_fn link;
    void (*shut)(void *ctx);
    void *link_ctx;
    ring_ar_args_t ar;
} ring_rhd_ar_t;
int ring_allreduce_rhd(ring_io_t *ios, uint32_t nstripes, const ring_rhd_ar_t *a);
size_t ring_rhd_quant_wire_bytes(size_t count, pcclDataType_t qdt, uint32_t world);

/* The all-reduce by recursive doubling (ring_rd_ar.c; docs/algorithms.md): log2 p exchanges of the whole vector
 * (two more when N is not a power of two: rhd's fold and unfold, unencoded on the way back) with rhd's partners, for
 * the smallest payloads, where each of rhd's 2 log2 p latencies costs more than moving the vector log2 p times.
 * Arguments, striping, in place, failures and pcclAvg as ring_allreduce_rhd; out of place the first exchange reads
 * src (never written) and writes the partial result to buf, with no copy first. At each step both partners
 * compute op(lower virtual id's values, upper's), so every member ends bit-identical. Quantized, each member
 * encodes its values once per step and keeps the decoded ones; wire holds ring_rd_quant_wire_bytes. Each stripe's
 * io->staging holds at least one element (quantized: PCCL_QBLOCK_ELEMS of them). */
int ring_allreduce_rd(ring_io_t *ios, uint32_t nstripes, const ring_rhd_ar_t *a);
size_t ring_rd_quant_wire_bytes(size_t count, pcclDataType_t qdt);

/* The partners of one rhd reduce-scatter, all-gather or tree broadcast: link and shut as the all-reduce's (shut is
 * needed when striped), this member's ring position pos of world, the operation's op_seq. Each runs over
 * nstripes connection pairs (ios[s] for stripe s; its stripe fields set here; stripe 0 on the calling thread) and
 * stripe s moves slice s of every block (ring_slice), so the result has the bits of one stripe; 0 or -PERR_<NAME>
 * (the first failure's reason in ios[0].err; tx_bytes/rx_bytes of ios[0] are the sums). On failure the output is
 * undefined. */
typedef struct ring_rhd_net {
    ring_rhd_link_fn link;
    void (*shut)(void *ctx);
    void *ctx;
    uint32_t pos, world;
    uint64_t op_seq;
} ring_rhd_net_t;

/* The reduce-scatter of pccl_coll.h by recursive halving, for a world whose ranks are the ring positions: the
 * all-reduce's halving steps over its virtual blocks (a folded pair's two adjacent blocks are one), so position
 * pos ends with block pos of the count split (out, which may be that block's place in src; src is never written
 * otherwise). A world that is not a power of two folds as the all-reduce does: each even position of the first
 * 2r hands its whole input to the odd one after it, which reduces it into its own, halves for both and hands the
 * even member's block back at the end. Each element is reduced at one member along the schedule's fixed tree;
 * pcclAvg divides by world there. work holds the partial sums (ring_reduce_scatter_rhd_work_bytes: the whole
 * vector for a folding odd member, half of it for a member of a world of 4 or more, else 0). */
int ring_reduce_scatter_rhd(ring_io_t *ios, uint32_t nstripes, const ring_rhd_net_t *net, const void *src, void *out,
                            size_t count, pcclDataType_t dt, pcclRedOp_t op, uint8_t *work, size_t work_bytes);
size_t ring_reduce_scatter_rhd_work_bytes(size_t count, pcclDataType_t dt, uint32_t pos, uint32_t world);

/* The all-gather (of variable counts) of pccl_coll.h by recursive doubling, for a world whose ranks are the ring
 * positions: as ring_allgather (counts[r] elements of esz bytes from rank r, packed in rank order in buf; src this
 * member's block, its place in buf, elsewhere in buf, or NULL for buf's start), the all-reduce's doubling steps
 * over the virtual blocks. A world that is not a power of two folds as the all-reduce does: each even position of
 * the first 2r hands its block to the odd one after it, which doubles for both and hands every block back at the
 * end. */
int ring_allgather_rhd(ring_io_t *ios, uint32_t nstripes, const ring_rhd_net_t *net, const void *src, void *buf,
                       const uint64_t *counts, size_t esz);

/* The broadcast of bytes bytes from ring position root (the only member that holds the data) along a binomial
 * tree (the root sends to distances 1, 2, 4, ...; a member at distance d from the root receives from its parent
 * d - 2^floor(log2 d), then sends to d + 2^j for every 2^j above that bit): ceil(log2 world) hops instead of the
 * chain's world - 1, each a whole copy of the stripe's slice (no pipelining: for small payloads). The root reads
 * src (NULL: buf; copied to buf when src != buf), the others write buf. ring_bcast_tree_partners: the ring
 * positions position pos exchanges with, parent first, then its children in order (at most 33); their count. */
int ring_broadcast_tree(ring_io_t *ios, uint32_t nstripes, const ring_rhd_net_t *net, const void *src, void *buf,
                        size_t bytes, uint32_t root);
uint32_t ring_bcast_tree_partners(uint32_t root, uint32_t pos, uint32_t world, uint32_t *out);

/* Its schedule for ring position pos of world (p = 2^floor(log2 world) members halve and double, r = world - p
 * fold; vid: the virtual id 0..p-1, or RING_RHD_FOLDED for an even position below 2r, which hands its input to
 * pos + 1 and takes the result back). */
#define RING_RHD_FOLDED UINT32_MAX
typedef struct ring_rhd_sched {
    uint32_t world, pos, p, r, steps, vid;
} ring_rhd_sched_t;
void ring_rhd_schedule(uint32_t pos, uint32_t world, ring_rhd_sched_t *s);
/* The ring position of virtual id vid. */
uint32_t ring_rhd_pos_of(const ring_rhd_sched_t *s, uint32_t vid);
/* The fold partner (pos ^ 1 below 2r), or RING_RHD_FOLDED when this position does not fold. */
uint32_t ring_rhd_fold_partner(const ring_rhd_sched_t *s);
/* The ring position of the partner at reduce-scatter step k (0..steps-1; the all-gather meets them in reverse). */
uint32_t ring_rhd_partner(const ring_rhd_sched_t *s, uint32_t k);
/* At reduce-scatter step k, of the p blocks: the len blocks from keep this member keeps (reduced with what
 * the partner sends) and the len blocks from give it sends; in the all-gather's step for k it sends keep's and
 * receives give's. After the last step it keeps block vid. */
void ring_rhd_blocks(const ring_rhd_sched_t *s, uint32_t k, uint32_t *keep, uint32_t *give, uint32_t *len);

/* Shared by both rings. The send side of a ring stream: the 16-byte header, then element k
 * (chunk payloads in stream order) from byte off. */
#define RING_HDR 16
typedef struct ring_tx {
    uint8_t hdr[RING_HDR];
    size_t hdr_done;
    uint32_t k;
    size_t off;
    const int *pipe; /* non-NULL: element bytes go through this pipe by reference (see ring_tx_splice) */
    size_t piped;    /* bytes in the pipe not yet in the socket */
    int splice_failed;
} ring_tx_t;
void ring_tx_init(ring_tx_t *t, uint32_t magic, uint32_t world_size, uint64_t op_seq);
/* Sends what it can of the header, then of element k's bytes [off, ready) starting at elem
 * (elem_len bytes in all; k advances when they are sent); on an open link without a pipe the header
 * and ready bytes of element 0 go in one send. Returns the bytes sent (0 when the
 * socket is full) or -PERR_IO with io->err set. With tx_link, "sent" means sealed: the
 * stream is over only when ring_tx_flushed says so too. */
ssize_t ring_send_step(ring_io_t *io, ring_tx_t *t, const uint8_t *elem, size_t ready, size_t elem_len);
/* 1 when nothing sealed still waits for the TX socket. */
int ring_tx_flushed(const ring_io_t *io);
/* A non-blocking receive from the predecessor (through rx_link when set), as recv(2). */
ssize_t ring_recv(ring_io_t *io, void *buf, size_t len);
/* What ring_recv's return n means once its own failures are handled: n (> 0) bytes, 0 when none were ready, or
 * -PERR_IO (the predecessor closed the connection, or the receive failed; io->err says which). */
ssize_t ring_recv_outcome(ring_io_t *io, ssize_t n);
/* ring_io_t.spin_us where the local peers have a core each, whatever the operation's size: a small one waits about
 * one step's transfer on one host; a large one streams through bounded socket buffers, and a receiver that sleeps
 * in poll wakes once per buffer (on a virtual machine, an idle core's wake-up costs more than the poll). A wait
 * longer than this (a slow peer, a wide-area link) still sleeps (bench/analysis.md, "Spinning"). */
#define RING_SPIN_US 100
/* Sleeps in poll until a socket or the abort fd is ready (first polling without sleeping for io->spin_us).
 * @return 0 with *ready 1 (go on with p[].revents) or 0 (nothing happened: loop again), or -PERR_<NAME>
 * (io->err says why). */
int ring_wait(ring_io_t *io, struct pollfd *p, uint64_t last_progress, int *ready);
/* 0 if the predecessor's stream header matches; else -PERR_PROTOCOL with io->err set. */
int ring_check_header(ring_io_t *io, const uint8_t *hdr, uint32_t magic, uint32_t world_size, uint64_t op_seq);

/* One round of a ring loop's waiting: fails on the abort flag; when the last round moved nothing (*try_io 0)
 * sleeps in poll for the sockets (POLLOUT when want_send, POLLIN when want_recv) and the abort fd, else tries
 * the sockets at once. watch_tx: a hang-up of the TX connection (the successor closed it) fails the round.
 * @return 0 with *can_send / *can_recv (both 0: loop again), or -PERR_<NAME>. */
int ring_round(ring_io_t *io, int want_send, int want_recv, int watch_tx, int *try_io, uint64_t last_progress,
               int *can_send, int *can_recv);

/* Receives more of a stream's header (hdr, *done bytes of it so far) and checks it once complete.
 * @return as ring_recv_outcome, or -PERR_PROTOCOL when the header is another operation's. */
ssize_t ring_recv_header(ring_io_t *io, uint8_t *hdr, size_t *done, uint32_t magic, uint32_t world,
                         uint64_t op_seq);

/* Runs fn(arg) with SIGPIPE blocked in this thread and consumes a SIGPIPE it raised (splice() into a closed
 * socket raises it; a library must not change the process's handler). */
int ring_no_sigpipe(int (*fn)(void *), void *arg);

/* Copies with stores that bypass the cache: a backup is written once and read only after a failure, so it must
 * not evict the data the ring works on (and needs no read-for-ownership). */
void ring_copy_nt(uint8_t *dst, const uint8_t *src, size_t n);

#endif
