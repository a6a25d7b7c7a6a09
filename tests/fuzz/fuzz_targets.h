/*
 * fuzz_targets.h - the bodies of the fuzz harnesses, shared by the libFuzzer
 * entry points (tests/fuzz/fuzz_*.c, built by scripts/fuzz.sh with clang) and
 * by the regression replay test (tests/unit/test_fuzz_regressions.c, built by
 * the regular gcc build). Header-only (static functions) so that both builds
 * compile exactly the same code paths.
 *
 * A violated invariant calls abort(), which libFuzzer reports as a crash and
 * the replay test as a failed ctest.
 */
#ifndef PCCL_FUZZ_TARGETS_H
#define PCCL_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sec/identity.h"
#include "base/log.h"
#include "sm/master_sm.h"
#include "sm/msm_admin.h"
#include "pccl_compress.h"
#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "sec/sec_frame.h"
#include "sec/sec_hs.h"
#include "sec/sec_key.h"
#include "base/wire.h"

#define FUZZ_CHECK(cond)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

static inline void fuzz_quiet_logs(void) {
    static int done;
    if (!done) {
        pccl_log_set_level(PCCL_LOG_ERROR);
        done = 1;
    }
}

/* ---------- wire_decode: decode, re-encode, decode again ---------- */

/* Decodes body; on success the framed re-encoding must carry exactly the same body (the
 * decoder is strict and canonical), and decoding that must succeed and re-encode identically. */
static inline int fuzz_wire_decode_one(const uint8_t *data, size_t size) {
    wire_msg_t m1, m2;
    char err[256];
    if (wire_decode(data, size, &m1, err, sizeof err) != 0) {
        FUZZ_CHECK(err[0] != 0); /* a failure always has a reason */
        return 0;
    }
    FUZZ_CHECK(size >= 2);
    FUZZ_CHECK(wire_type_is_c2m(m1.type) || wire_type_is_m2c(m1.type));
    FUZZ_CHECK(wire_type_name(m1.type) != NULL);
    /* A HELLO or RESUME of another version is read only up to its version (the master answers with both
     * versions): nothing after it was decoded, so there is nothing canonical to re-encode. */
    if ((m1.type == C2M_HELLO && m1.u.hello.version != WIRE_VERSION) ||
        (m1.type == C2M_RESUME && m1.u.resume.version != WIRE_VERSION)) {
        wire_msg_free(&m1);
        return 0;
    }
    wbuf_t b1 = {0}, b2 = {0};
    FUZZ_CHECK(wire_encode(&m1, &b1) == 0);
    FUZZ_CHECK(b1.len == size + 4);
    FUZZ_CHECK(wire_get_u32(b1.data) == size);
    FUZZ_CHECK(memcmp(b1.data + 4, data, size) == 0);
    FUZZ_CHECK(wire_decode(b1.data + 4, b1.len - 4, &m2, err, sizeof err) == 0);
    FUZZ_CHECK(m2.type == m1.type);
    FUZZ_CHECK(wire_encode(&m2, &b2) == 0);
    FUZZ_CHECK(b2.len == b1.len && memcmp(b1.data, b2.data, b1.len) == 0);
    wire_msg_free(&m1);
    wire_msg_free(&m2);
    wire_msg_free(&m2); /* must be idempotent on a freed message */
    wbuf_free(&b1);
    wbuf_free(&b2);
    return 0;
}

/* ---------- p2p hello ---------- */

static inline int fuzz_p2p_hello_one(const uint8_t *data, size_t size) {
    uint8_t in[WIRE_P2P_HELLO_LEN] = {0};
    memcpy(in, data, size < sizeof in ? size : sizeof in);
    uint8_t kind = 0, uuid[16], out[WIRE_P2P_HELLO_LEN];
    uint32_t slot = 0;
    memset(uuid, 0xAA, sizeof uuid);
    if (wire_p2p_hello_decode(in, &kind, uuid, &slot) != 0) return 0;
    FUZZ_CHECK(kind == P2P_KIND_RING || kind == P2P_KIND_SHARED_STATE || kind == P2P_KIND_BENCH);
    wire_p2p_hello_encode(out, kind, uuid, slot);
    FUZZ_CHECK(memcmp(out, in, sizeof out) == 0);
    return 0;
}

/* ---------- keyed-run handshake and AEAD frames ---------- */

/*
 * Input: one selector byte (bit 0: play the responder, else the initiator; bit 1: control, else
 * p2p; bit 2: the responder announces encryption; bits 3-7: how many bytes each feed call gets,
 * 1 to 32, so messages also arrive in pieces), then what the other side sends. Without the key
 * nothing can be proven, so the handshake must never complete; the feed takes only what its
 * message still needs and only ever answers whole messages. The same bytes as a frame must
 * never open, and a frame's announced size must be in range.
 */
static inline int fuzz_sec_handshake_one(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char key[] = "fuzz-run-key-0123456789abcdef0123456789";
    sec_cfg_t cfg;
    char err[160];
    memset(&cfg, 0, sizeof cfg);
    FUZZ_CHECK(sec_key_from_bytes(key, sizeof key - 1, &cfg, err, sizeof err) == 0);
    uint8_t sel = data[0];
    sec_hs_params_t p;
    memset(&p, 0, sizeof p);
    p.role = sel & 1 ? SEC_RESPONDER : SEC_INITIATOR;
    p.purpose = sel & 2 ? SEC_PURPOSE_CONTROL : SEC_PURPOSE_P2P;
    p.flags = p.role == SEC_RESPONDER ? (sel & 4 ? SEC_FLAG_ENCRYPT : 0) : -1;
    size_t step = 1 + (size_t)(sel >> 3);
    sec_hs_t hs;
    FUZZ_CHECK(sec_hs_start(&hs, &cfg, &p) == 0);
    FUZZ_CHECK(hs.out_len == (p.role == SEC_INITIATOR ? (size_t)SEC_HS_MSG1 : 0));
    hs.out_len = 0;
    int r = 0;
    for (size_t off = 1; off < size && r == 0 && !sec_hs_done(&hs);) {
        size_t n = size - off < step ? size - off : step, want = sec_hs_want(&hs), used = 0;
        r = sec_hs_feed(&hs, data + off, n, &used);
        FUZZ_CHECK(used <= n && used <= want);
        FUZZ_CHECK(r == -PERR_PROTOCOL || r == -PERR_REFUSED || (r == 0 && used == (n < want ? n : want)));
        FUZZ_CHECK(hs.out_len == 0 || hs.out_len == SEC_HS_MSG2 || hs.out_len == SEC_HS_MSG3);
        FUZZ_CHECK(!sec_hs_done(&hs)); /* no proof of the key without the key */
        if (r != 0) FUZZ_CHECK(hs.err[0] != 0);
        hs.out_len = 0;
        off += used ? used : n;
    }
    sec_hs_wipe(&hs);
    if (size - 1 >= SEC_FRAME_HDR) {
        size_t fs = sec_frame_size(data + 1);
        FUZZ_CHECK(fs == 0 || (fs > SEC_FRAME_OVERHEAD && fs <= SEC_FRAME_MAX + SEC_FRAME_OVERHEAD));
        if (fs && fs <= size - 1) {
            uint8_t *frame = malloc(fs);
            FUZZ_CHECK(frame != NULL);
            memcpy(frame, data + 1, fs);
            /* Without the session key no frame opens, under either cipher. */
            for (int c = SEC_CIPHER_AES256GCM; c <= SEC_CIPHER_CHACHA20POLY1305; c++) {
                sec_session_t s;
                sec_aead_t a;
                memset(&s, 0, sizeof s);
                s.cipher = c;
                memcpy(s.rx_key, cfg.psk, sizeof s.rx_key);
                memcpy(s.tx_key, cfg.psk, sizeof s.tx_key);
                FUZZ_CHECK(sec_aead_init(&a, &s) == 0);
                FUZZ_CHECK(sec_frame_open(&a, frame, fs) != 0 && a.rx_seq == 0);
                sec_aead_free(&a);
                memcpy(frame, data + 1, fs);
            }
            free(frame);
        }
    }
    return 0;
}

/* ---------- quantized block (what a ring predecessor sends in a quantized all-reduce) ---------- */

/* Decodes the block at wire (len bytes, copied from src to an exact-size buffer so that ASan sees any read past
 * it) both ways and checks that it is rejected exactly when bad, deterministically, and by the reduce as by the
 * plain decode, with nothing written on rejection. */
static inline void fuzz_decode_block(const uint8_t *src, size_t len, size_t n, pcclDataType_t qdt, pcclDataType_t dt,
                                     pcclRedOp_t op, int bad) {
    const size_t esz = pccl_dtype_size(dt);
    uint8_t *wire = malloc(len), *a = malloc(n * esz), *b = malloc(n * esz);
    FUZZ_CHECK(wire && a && b);
    memcpy(wire, src, len);
    memset(a, 0x5A, n * esz);
    memset(b, 0x5A, n * esz);
    int r1 = pccl_dequant_block(wire, n, qdt, a, dt);
    FUZZ_CHECK(r1 == (bad ? -PERR_PROTOCOL : 0));
    if (r1 == 0) {
        FUZZ_CHECK(pccl_dequant_block(wire, n, qdt, b, dt) == 0);
        FUZZ_CHECK(memcmp(a, b, n * esz) == 0); /* every peer decodes the same bits */
        FUZZ_CHECK(pccl_dequant_reduce_block(wire, n, qdt, b, dt, op) == 0);
    } else {
        FUZZ_CHECK(pccl_dequant_reduce_block(wire, n, qdt, b, dt, op) == -PERR_PROTOCOL);
        FUZZ_CHECK(memcmp(a, b, n * esz) == 0); /* nothing written */
    }
    free(wire);
    free(a);
    free(b);
}

/*
 * Input: one selector byte (source dtype, quantized dtype, reduce op), then a block as it would
 * arrive on the wire (header + codes; the element count follows from the length). Decoding must
 * reject exactly the headers with unknown flags, non-zero reserved bytes or an offset code above
 * 65535, never read past the
 * block, be deterministic, and the reduce variant must accept whatever the plain decode accepts.
 */
static inline int fuzz_quant_block_one(const uint8_t *data, size_t size) {
    static const pcclDataType_t srcs[4] = {pcclFloat, pcclDouble, pcclFloat16, pcclBFloat16};
    static const pcclDataType_t qdts[4] = {pcclUint8, pcclInt8, pcclUint16, pcclFloat16};
    if (size < 1 + PCCL_QHDR_BYTES) return 0;
    pcclDataType_t dt = srcs[data[0] & 3], qdt = qdts[(data[0] >> 2) & 3];
    pcclRedOp_t op = (pcclRedOp_t)((data[0] >> 4) % 5);
    size_t csz = qdt == pcclUint8 || qdt == pcclInt8 ? 1 : 2;
    size_t n = (size - 1 - PCCL_QHDR_BYTES) / csz;
    if (n == 0 || n > PCCL_QBLOCK_ELEMS) return 0;
    const uint8_t *w = data + 1;
    uint32_t off = (uint32_t)w[16] | (uint32_t)w[17] << 8 | (uint32_t)w[18] << 16 | (uint32_t)w[19] << 24;
    int bad_hdr = (w[20] & ~PCCL_QFLAG_SPECIALS) || w[21] || w[22] || w[23] || off > 65535u;
    fuzz_decode_block(w, PCCL_QHDR_BYTES + n * csz, n, qdt, dt, op, bad_hdr);
    return 0;
}

/*
 * fuzz_quant_low: a 4- or 2-bit block as the decoder receives it (pccl_quant.h, kernels/quant_low.c).
 * Input: a selector byte (bits 0-1 source dtype, bit 2 the width: 4 or 2, bits 4-7 reduce op), a u16 (LE)
 * giving the element count (1 + value % 8192), then the block (the rest of the input beyond its size is
 * ignored). Decoding must reject exactly the blocks whose prefix or group headers are malformed (checked
 * here independently), never read past the block, be deterministic, and the reduce variant must accept
 * whatever the plain decode accepts.
 */
static inline int fuzz_quant_low_bad(const uint8_t *w, size_t n, unsigned bits) {
    if ((w[0] != pcclQuantMinMax && w[0] != pcclQuantZeroPointScale) || w[1] != bits || w[2] || w[3]) return 1;
    const size_t stride = 8 + PCCL_QLOW_GROUP * bits / 8;
    for (size_t s = 0, g = 4; s < n; s += PCCL_QLOW_GROUP, g += stride) {
        uint32_t b, st;
        memcpy(&b, w + g, 4);
        memcpy(&st, w + g + 4, 4);
        const int specials = st >> 31;
        if ((b & 0x7F800000u) == 0x7F800000u || (st & 0x7F800000u) == 0x7F800000u) return 1; /* NaN or Inf */
        if (w[0] == pcclQuantZeroPointScale && b != 0 && !(bits == 2 && specials)) return 1;
        const size_t m = n - s < PCCL_QLOW_GROUP ? n - s : PCCL_QLOW_GROUP, tail = m * bits % 8;
        if (tail && (w[g + 8 + (m * bits + 7) / 8 - 1] >> tail)) return 1;
    }
    return 0;
}

static inline int fuzz_quant_low_one(const uint8_t *data, size_t size) {
    static const pcclDataType_t srcs[4] = {pcclFloat, pcclDouble, pcclFloat16, pcclBFloat16};
    if (size < 3) return 0;
    const pcclDataType_t dt = srcs[data[0] & 3], qdt = data[0] & 4 ? pcclExtUint2 : pcclExtUint4;
    const unsigned bits = data[0] & 4 ? 2 : 4;
    const pcclRedOp_t op = (pcclRedOp_t)((data[0] >> 4) % 5);
    const size_t n = 1 + ((size_t)data[1] | (size_t)data[2] << 8) % PCCL_QBLOCK_ELEMS;
    const size_t len = pccl_quant_wire_bytes(n, qdt);
    if (size - 3 < len) return 0;
    fuzz_decode_block(data + 3, len, n, qdt, dt, op, fuzz_quant_low_bad(data + 3, n, bits));
    return 0;
}

/* ---------- master state machine ---------- */

#define FUZZ_MSM_CONNS 8

typedef struct fuzz_msm_ctx {
    int live[FUZZ_MSM_CONNS]; /* connected and not closed by the state machine */
    uint8_t nonce[FUZZ_MSM_CONNS][32]; /* each connection's CHALLENGE */
    uint64_t sends, closes;
} fuzz_msm_ctx_t;

/* The 8 peer identities of the master scripts (fixed seeds), made once. */
static inline const ident_t *fuzz_identity(int who) {
    static ident_t ids[8];
    static int made;
    if (!made) {
        for (int k = 0; k < 8; k++) {
            uint8_t seed[32];
            memset(seed, 0xa0 + k, sizeof seed);
            FUZZ_CHECK(ident_from_seed(&ids[k], seed) == 0);
        }
        made = 1;
    }
    return &ids[who & 7];
}

/* Signs HELLO or RESUME m as identity who over nonce, and decodes it as the master's server would. */
static inline int fuzz_signed(const ident_t *id, const uint8_t nonce[32], wire_msg_t *m, wire_msg_t *out) {
    wire_identity_t *wi = m->type == C2M_HELLO ? &m->u.hello.id : &m->u.resume.id;
    memcpy(wi->pubkey, id->pk, 32);
    wbuf_t b = {0};
    char err[256];
    FUZZ_CHECK(ident_encode_signed(id, nonce, m, &b) == 0);
    int rc = wire_decode(b.data + 4, b.len - 4, out, err, sizeof err);
    wbuf_free(&b);
    return rc;
}

static inline void fuzz_msm_send(void *ctx, uint64_t conn, const wire_msg_t *msg) {
    fuzz_msm_ctx_t *c = ctx;
    FUZZ_CHECK(conn >= 1 && conn <= FUZZ_MSM_CONNS);
    FUZZ_CHECK(c->live[conn - 1]);        /* never to a connection that is gone */
    FUZZ_CHECK(wire_type_is_m2c(msg->type)); /* only master-to-peer messages */
    wbuf_t b = {0};
    FUZZ_CHECK(wire_encode(msg, &b) == 0); /* everything the master sends must encode */
    wire_msg_t back;
    char err[256];
    FUZZ_CHECK(wire_decode(b.data + 4, b.len - 4, &back, err, sizeof err) == 0);
    wire_msg_free(&back);
    wbuf_free(&b);
    c->sends++;
}

static inline void fuzz_msm_close(void *ctx, uint64_t conn, const char *reason) {
    fuzz_msm_ctx_t *c = ctx;
    FUZZ_CHECK(conn >= 1 && conn <= FUZZ_MSM_CONNS);
    FUZZ_CHECK(c->live[conn - 1]); /* closed once */
    FUZZ_CHECK(reason != NULL);
    c->live[conn - 1] = 0;
    c->closes++;
}

/*
 * Input: a sequence of records (time starts at 1 s and only moves by the tick records). Each starts with an op byte; its low 3 bits pick
 * the connection (1..8), the high bits the action:
 *   0x00-0x1f connect (if not live)      0x20-0x3f disconnect (if live)
 *   0x40-0x5f a signed HELLO or RESUME: 5 more bytes, peer group (1 byte, mod 4), p2p port (2), pool (1),
 *             who (1): bits 0-2 the identity (one of 8 key pairs), bit 3 RESUME instead of HELLO (revision 5,
 *             ring: identities 0..bits 4-6), bit 7 a signature over the wrong nonce (a replay)
 *   0x60-0x6f time passes: 1 more byte, times 50 ms (the low 3 bits are ignored), then a tick
 *             (msm_on_tick kicks the peers silent for longer than the peer timeout, 10 s)
 *   0x70-0xff a packet: u16 big-endian length, then that many body bytes; decoded with
 *             wire_decode and, when it is a peer-to-master message, fed to msm_on_packet
 *             (a decode failure disconnects the connection, as the master server does).
 * Packets and disconnects on connections that are not live are skipped (the server never
 * reports them). At the end every live connection disconnects and the state machine is
 * destroyed: ASan/LSan catch leaks and bad accesses, FUZZ_CHECK the io invariants.
 */
static inline int fuzz_master_sm_one(const uint8_t *data, size_t size) {
    fuzz_quiet_logs();
    fuzz_msm_ctx_t ctx;
    memset(&ctx, 0, sizeof ctx);
    msm_io_t io = {.ctx = &ctx, .send = fuzz_msm_send, .close = fuzz_msm_close};
    msm_t *m = msm_create(io);
    FUZZ_CHECK(m != NULL);
    uint64_t now = 1000;
    msm_set_time(m, now);
    size_t i = 0;
    int events = 0;
    while (i < size && events < 4096) {
        uint8_t op = data[i++];
        uint64_t conn = (uint64_t)(op & 7) + 1;
        int *live = &ctx.live[conn - 1];
        events++;
        if (op < 0x20) {
            if (*live) continue;
            ccoip_inet_address_t ip = {.protocol = inetIPv4, .ipv4.data = {127, 0, 0, (uint8_t)conn}};
            uint8_t *nonce = ctx.nonce[conn - 1];
            for (int k = 0; k < 32; k++) nonce[k] = (uint8_t)(conn * 31 + (uint64_t)k + (uint64_t)events);
            *live = 1;
            const ccoip_inet_address_t local = {.protocol = inetIPv4, .ipv4.data = {127, 0, 0, 1}};
            msm_on_connect(m, conn, &ip, &local, nonce);
        } else if (op < 0x40) {
            if (!*live) continue;
            *live = 0;
            msm_on_disconnect(m, conn);
        } else if (op < 0x60) {
            if (i + 5 > size) break;
            uint8_t who = data[i + 4];
            const ident_t *id = fuzz_identity(who & 7);
            wire_msg_t h, d;
            uint8_t ring[8][16];
            memset(&h, 0, sizeof h);
            h.type = (who & 8) ? C2M_RESUME : C2M_HELLO;
            if (h.type == C2M_HELLO) {
                h.u.hello.magic = WIRE_MAGIC;
                h.u.hello.version = WIRE_VERSION;
                h.u.hello.peer_group = data[i] % 4;
                h.u.hello.p2p_port = wire_get_u16(data + i + 1);
                h.u.hello.pool_size = data[i + 3];
            } else {
                h.u.resume.magic = WIRE_MAGIC;
                h.u.resume.version = WIRE_VERSION;
                h.u.resume.peer_group = data[i] % 4;
                h.u.resume.p2p_port = wire_get_u16(data + i + 1);
                h.u.resume.pool_size = data[i + 3];
                ident_uuid(id->pk, h.u.resume.uuid);
                h.u.resume.has_revision = 1;
                h.u.resume.revision = 5;
                h.u.resume.nring = (uint32_t)((who >> 4) & 7) + 1;
                for (uint32_t k = 0; k < h.u.resume.nring; k++) ident_uuid(fuzz_identity((int)k)->pk, ring[k]);
                h.u.resume.ring = ring;
            }
            i += 5;
            uint8_t stale[32];
            memset(stale, 0x5a, sizeof stale);
            if (*live && fuzz_signed(id, (who & 0x80) ? stale : ctx.nonce[conn - 1], &h, &d) == 0) {
                msm_on_packet(m, conn, &d);
                wire_msg_free(&d);
            }
        } else if (op < 0x70) {
            if (i + 1 > size) break;
            now += (uint64_t)data[i++] * 50;
            msm_set_time(m, now);
            msm_on_tick(m);
        } else {
            if (i + 2 > size) break;
            size_t len = wire_get_u16(data + i);
            i += 2;
            if (len > size - i) len = size - i;
            const uint8_t *body = data + i;
            i += len;
            if (!*live) continue;
            wire_msg_t msg;
            char err[256];
            int bad = wire_decode(body, len, &msg, err, sizeof err) != 0;
            if (!bad && !wire_type_is_c2m(msg.type)) {
                wire_msg_free(&msg);
                bad = 1;
            }
            if (bad) {
                *live = 0;
                msm_on_disconnect(m, conn);
                continue;
            }
            msm_on_packet(m, conn, &msg);
            wire_msg_free(&msg);
        }
        /* the read-only views must stay consistent */
        int n = msm_peer_count(m);
        FUZZ_CHECK(n >= 0 && n <= FUZZ_MSM_CONNS);
        for (int k = 0; k < n; k++) {
            msm_peer_view_t v;
            FUZZ_CHECK(msm_peer_view(m, k, &v) == 0);
            FUZZ_CHECK(v.conn >= 1 && v.conn <= FUZZ_MSM_CONNS && ctx.live[v.conn - 1]);
            FUZZ_CHECK(v.state != NULL);
        }
        /* every operation in flight has only live members (a departure leaves every record at once) */
        int nops = msm_op_views(m, NULL, 0);
        for (int k = 0; k < nops; k++) {
            uint64_t mc[FUZZ_MSM_CONNS + 1];
            int nm = msm_op_view_members(m, k, mc, FUZZ_MSM_CONNS + 1);
            FUZZ_CHECK(nm >= 0 && nm <= FUZZ_MSM_CONNS);
            for (int j = 0; j < nm; j++) FUZZ_CHECK(mc[j] >= 1 && mc[j] <= FUZZ_MSM_CONNS && ctx.live[mc[j] - 1]);
        }
        msm_stats_t st;
        msm_get_stats(m, &st);
        FUZZ_CHECK(st.accepted + st.registered <= (uint32_t)n); /* registered = not yet accepted */
        uint64_t ring[FUZZ_MSM_CONNS + 1];
        for (uint32_t g = 0; g < 4; g++) {
            int rl = msm_group_ring(m, g, ring, FUZZ_MSM_CONNS + 1);
            FUZZ_CHECK(rl >= 0 && rl <= FUZZ_MSM_CONNS);
            for (int k = 0; k < rl; k++) FUZZ_CHECK(ring[k] >= 1 && ring[k] <= FUZZ_MSM_CONNS && ctx.live[ring[k] - 1]);
        }
    }
    for (uint64_t c = 1; c <= FUZZ_MSM_CONNS; c++) {
        if (!ctx.live[c - 1]) continue;
        ctx.live[c - 1] = 0;
        msm_on_disconnect(m, c);
    }
    FUZZ_CHECK(msm_peer_count(m) == 0);
    msm_destroy(m);
    return 0;
}

#endif /* PCCL_FUZZ_TARGETS_H */
