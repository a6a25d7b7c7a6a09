/* wire.c - encoder and strict decoder of the control protocol (see wire.h). */
#include "base/wire.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- big-endian helpers ---- */
void wire_put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
void wire_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 3; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
void wire_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
uint16_t wire_get_u16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
uint32_t wire_get_u32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
uint64_t wire_get_u64(const uint8_t *p) { return ((uint64_t)wire_get_u32(p) << 32) | wire_get_u32(p + 4); }

/* ---- writer ---- */
void wbuf_free(wbuf_t *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

static uint8_t *wb_grow(wbuf_t *b, size_t n) {
    if (b->oom) return NULL;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) {
            b->oom = 1;
            return NULL;
        }
        b->data = d;
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    b->len += n;
    return p;
}
static void wb_u8(wbuf_t *b, uint8_t v) { uint8_t *p = wb_grow(b, 1); if (p) *p = v; }
static void wb_u16(wbuf_t *b, uint16_t v) { uint8_t *p = wb_grow(b, 2); if (p) wire_put_u16(p, v); }
static void wb_u32(wbuf_t *b, uint32_t v) { uint8_t *p = wb_grow(b, 4); if (p) wire_put_u32(p, v); }
static void wb_u64(wbuf_t *b, uint64_t v) { uint8_t *p = wb_grow(b, 8); if (p) wire_put_u64(p, v); }
static void wb_bytes(wbuf_t *b, const void *d, size_t n) { uint8_t *p = wb_grow(b, n); if (p && n) memcpy(p, d, n); }
static void wb_str(wbuf_t *b, const char *s) {
    size_t n = strnlen(s, WIRE_MAX_KEY);
    wb_u8(b, (uint8_t)n);
    wb_bytes(b, s, n);
}
static void wb_world(wbuf_t *b, const wire_world_t *w) {
    wb_u32(b, w->global_world_size);
    wb_u32(b, w->group_world_size);
    wb_u32(b, w->num_groups);
    wb_u32(b, w->largest_group);
}
static void wb_ip(wbuf_t *b, int present, const ccoip_inet_address_t *ip) {
    uint8_t raw[16] = {0};
    if (present && ip->protocol == inetIPv6) memcpy(raw, ip->ipv6.data, 16);
    else if (present) memcpy(raw, ip->ipv4.data, 4);
    wb_u8(b, !present ? 0 : ip->protocol == inetIPv6 ? 6 : 4);
    wb_bytes(b, raw, 16);
}
static void wb_peer(wbuf_t *b, const wire_peer_t *p) {
    wb_bytes(b, p->uuid, 16);
    wb_ip(b, 1, &p->ip);
    wb_u16(b, p->port);
}
static void wb_tensor(wbuf_t *b, const wire_tensor_t *t) {
    wb_str(b, t->key);
    wb_u8(b, t->dtype);
    wb_u8(b, t->allow_inequality);
    wb_u64(b, t->count);
    wb_u64(b, t->hash);
}

int wire_encode(const wire_msg_t *m, wbuf_t *out) {
    size_t start = out->len;
    if (!wb_grow(out, 4)) return -1;
    wb_u16(out, m->type);
    const __typeof__(m->u) *u = &m->u;
    switch (m->type) {
    case C2M_HELLO:
        wb_u32(out, u->hello.magic);
        wb_u16(out, u->hello.version);
        wb_u32(out, u->hello.peer_group);
        wb_u16(out, u->hello.p2p_port);
        wb_u32(out, u->hello.pool_size);
        wb_ip(out, u->hello.has_adv, &u->hello.adv_ip);
        wb_bytes(out, u->hello.id.pubkey, 32);
        wb_str(out, u->hello.id.name);
        wb_bytes(out, u->hello.id.sig, WIRE_SIG_LEN);
        break;
    case C2M_UPDATE_TOPOLOGY: case C2M_PEERS_PENDING: case C2M_OPTIMIZE_TOPOLOGY: case C2M_HEARTBEAT:
    case C2M_LEAVE: case M2C_HEARTBEAT:
        break;
    case C2M_P2P_ESTABLISHED: case C2M_SS_DIST_DONE: case M2C_PEERS_PENDING: case M2C_SS_DONE:
    case M2C_OPTIMIZE_DONE:
        wb_u8(out, u->flag.value);
        break;
    case C2M_SYNC_SHARED_STATE:
        if (u->sync.n > WIRE_MAX_TENSORS) goto bad;
        wb_u64(out, u->sync.revision);
        wb_u8(out, u->sync.strategy);
        wb_u32(out, u->sync.n);
        for (uint32_t i = 0; i < u->sync.n; i++) wb_tensor(out, &u->sync.tensors[i]);
        break;
    case C2M_COLL_INIT:
        wb_u64(out, u->coll_init.tag);
        wb_u64(out, u->coll_init.count);
        wb_u8(out, u->coll_init.dtype);
        wb_u8(out, u->coll_init.op);
        wb_u8(out, u->coll_init.quant_algo);
        wb_u8(out, u->coll_init.quant_dtype);
        break;
    case C2M_COLL_DONE: case M2C_COLL_ABORT: case M2C_COLL_COMPLETE:
        wb_u64(out, u->coll.tag);
        wb_u64(out, u->coll.op_seq);
        wb_u8(out, u->coll.ok);
        break;
    case M2C_WELCOME: case C2M_PEER_UNREACHABLE:
        wb_bytes(out, u->welcome.uuid, 16);
        break;
    case M2C_ESTABLISH_P2P:
        if (u->establish.n > WIRE_MAX_PEERS) goto bad;
        wb_world(out, &u->establish.world);
        wb_u32(out, u->establish.n);
        for (uint32_t i = 0; i < u->establish.n; i++) wb_peer(out, &u->establish.peers[i]);
        break;
    case M2C_TOPOLOGY_DONE:
        wb_u8(out, u->topo_done.ok);
        wb_world(out, &u->topo_done.world);
        break;
    case M2C_SS_PLAN:
        if (u->ss_plan.n > WIRE_MAX_TENSORS || u->ss_plan.nsrc > WIRE_MAX_SS_SOURCES ||
            u->ss_plan.nranges > WIRE_MAX_SS_RANGES)
            goto bad;
        wb_u8(out, u->ss_plan.status);
        wb_u64(out, u->ss_plan.revision);
        wb_u8(out, u->ss_plan.nsrc);
        for (uint32_t i = 0; i < u->ss_plan.nsrc; i++) wb_peer(out, &u->ss_plan.sources[i]);
        wb_u32(out, u->ss_plan.n);
        for (uint32_t i = 0; i < u->ss_plan.n; i++) wb_tensor(out, &u->ss_plan.fetch[i]);
        for (uint32_t i = 0; i < u->ss_plan.n; i++) wb_u32(out, u->ss_plan.holders ? u->ss_plan.holders[i] : 0);
        wb_u32(out, u->ss_plan.nranges);
        for (uint32_t i = 0; i < u->ss_plan.nranges; i++) {
            const wire_ss_range_t *g = &u->ss_plan.ranges[i];
            wb_u32(out, g->tensor);
            wb_u8(out, g->source);
            wb_u64(out, g->offset);
            wb_u64(out, g->length);
        }
        break;
    case M2C_COLL_COMMENCE:
        if (u->commence.n > WIRE_MAX_PEERS) goto bad;
        wb_u64(out, u->commence.tag);
        wb_u64(out, u->commence.op_seq);
        if (!u->commence.slots) goto bad;
        wb_u64(out, u->commence.slots);
        wb_world(out, &u->commence.world);
        wb_u32(out, u->commence.n);
        for (uint32_t i = 0; i < u->commence.n; i++) wb_bytes(out, u->commence.ring[i], 16);
        break;
    case M2C_COLL_REJECT:
        wb_u64(out, u->reject.tag);
        wb_u8(out, u->reject.reason);
        break;
    case M2C_KICK:
    case M2C_SHUTDOWN:
        wb_str(out, u->kick.reason);
        break;
    case M2C_BENCH_REQUEST:
        if (u->bench_req.n > WIRE_MAX_PEERS) goto bad;
        wb_u32(out, u->bench_req.duration_ms);
        wb_u32(out, u->bench_req.n);
        for (uint32_t i = 0; i < u->bench_req.n; i++) wb_peer(out, &u->bench_req.peers[i]);
        break;
    case C2M_RESUME:
        if (u->resume.nring > WIRE_MAX_PEERS || u->resume.n > WIRE_MAX_TENSORS || u->resume.nops > WIRE_MAX_OPS)
            goto bad;
        wb_u32(out, u->resume.magic);
        wb_u16(out, u->resume.version);
        wb_u32(out, u->resume.peer_group);
        wb_u16(out, u->resume.p2p_port);
        wb_u32(out, u->resume.pool_size);
        wb_ip(out, u->resume.has_adv, &u->resume.adv_ip);
        wb_bytes(out, u->resume.id.pubkey, 32);
        wb_str(out, u->resume.id.name);
        wb_bytes(out, u->resume.uuid, 16);
        wb_u8(out, u->resume.has_revision);
        wb_u64(out, u->resume.revision);
        wb_u32(out, u->resume.nring);
        for (uint32_t i = 0; i < u->resume.nring; i++) wb_bytes(out, u->resume.ring[i], 16);
        wb_u32(out, u->resume.n);
        for (uint32_t i = 0; i < u->resume.n; i++) wb_tensor(out, &u->resume.tensors[i]);
        wb_u32(out, u->resume.nops);
        for (uint32_t i = 0; i < u->resume.nops; i++) {
            wb_u64(out, u->resume.ops[i].tag);
            wb_u64(out, u->resume.ops[i].op_seq);
            wb_u8(out, u->resume.ops[i].finished);
        }
        wb_bytes(out, u->resume.id.sig, WIRE_SIG_LEN);
        break;
    case M2C_RESUMED:
        wb_u8(out, u->resumed.ok);
        wb_world(out, &u->resumed.world);
        wb_u64(out, u->resumed.revision);
        break;
    case M2C_CHALLENGE:
        wb_bytes(out, u->challenge.nonce, 32);
        break;
    case C2M_BENCH_RESULT:
        if (u->bench_res.n > WIRE_MAX_PEERS) goto bad;
        wb_u32(out, u->bench_res.n);
        for (uint32_t i = 0; i < u->bench_res.n; i++) {
            uint64_t bits;
            memcpy(&bits, &u->bench_res.results[i].mbps, 8);
            wb_bytes(out, u->bench_res.results[i].uuid, 16);
            wb_u64(out, bits);
        }
        break;
    default:
        goto bad;
    }
    if (out->oom) return -1;
    size_t body = out->len - start - 4;
    if (body > WIRE_MAX_BODY) goto bad;
    wire_put_u32(out->data + start, (uint32_t)body);
    return 0;
bad:
    out->len = start;
    return -1;
}

/* ---- reader ---- */
typedef struct rd {
    const uint8_t *p;
    size_t left;
    int err;
    const char *what;
} rd_t;

static const uint8_t *rd_take(rd_t *r, size_t n, const char *what) {
    if (r->err) return NULL;
    if (r->left < n) {
        r->err = 1;
        r->what = what;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}
static uint8_t rd_u8(rd_t *r, const char *w) { const uint8_t *p = rd_take(r, 1, w); return p ? *p : 0; }
static uint16_t rd_u16(rd_t *r, const char *w) { const uint8_t *p = rd_take(r, 2, w); return p ? wire_get_u16(p) : 0; }
static uint32_t rd_u32(rd_t *r, const char *w) { const uint8_t *p = rd_take(r, 4, w); return p ? wire_get_u32(p) : 0; }
static uint64_t rd_u64(rd_t *r, const char *w) { const uint8_t *p = rd_take(r, 8, w); return p ? wire_get_u64(p) : 0; }
static void rd_bytes(rd_t *r, void *dst, size_t n, const char *w) {
    const uint8_t *p = rd_take(r, n, w);
    if (p) memcpy(dst, p, n);
}
static void rd_str(rd_t *r, char *dst, const char *w) {
    uint8_t n = rd_u8(r, w);
    const uint8_t *p = rd_take(r, n, w);
    if (!p) {
        dst[0] = 0;
        return;
    }
    memcpy(dst, p, n);
    dst[n] = 0;
    if (memchr(dst, 0, n)) {
        r->err = 1;
        r->what = "NUL inside string";
    }
}
static void rd_world(rd_t *r, wire_world_t *w) {
    w->global_world_size = rd_u32(r, "world");
    w->group_world_size = rd_u32(r, "world");
    w->num_groups = rd_u32(r, "world");
    w->largest_group = rd_u32(r, "world");
}
/* Family 4 or 6 (or 0 where optional: *present is then 0); an IPv4 address must have zero padding. */
static void rd_ip(rd_t *r, uint8_t *present, ccoip_inet_address_t *ip, const char *w) {
    static const uint8_t zero[12];
    uint8_t fam = rd_u8(r, w);
    const uint8_t *raw = rd_take(r, 16, w);
    memset(ip, 0, sizeof *ip);
    if (!raw) return;
    if (fam == 0 && present && memcmp(raw, zero, 12) == 0 && memcmp(raw + 12, zero, 4) == 0) {
        *present = 0;
        return;
    }
    if (fam == 4 && memcmp(raw + 4, zero, 12) == 0) {
        ip->protocol = inetIPv4;
        memcpy(ip->ipv4.data, raw, 4);
    } else if (fam == 6) {
        ip->protocol = inetIPv6;
        memcpy(ip->ipv6.data, raw, 16);
    } else {
        r->err = 1;
        r->what = "bad address family or padding";
        return;
    }
    if (present) *present = 1;
}
static void rd_peer(rd_t *r, wire_peer_t *p) {
    rd_bytes(r, p->uuid, 16, "peer uuid");
    rd_ip(r, NULL, &p->ip, "peer ip");
    p->port = rd_u16(r, "peer port");
}
/* A HELLO or RESUME of another version is read up to its version, so that the master can say which versions
 * differ instead of calling it malformed. */
static int rd_other_version(rd_t *r, uint16_t version) {
    if (version == WIRE_VERSION || r->err) return 0;
    r->p += r->left;
    r->left = 0;
    return 1;
}
static void rd_tensor(rd_t *r, wire_tensor_t *t) {
    rd_str(r, t->key, "tensor key");
    t->dtype = rd_u8(r, "tensor dtype");
    t->allow_inequality = rd_u8(r, "tensor flag");
    t->count = rd_u64(r, "tensor count");
    t->hash = rd_u64(r, "tensor hash");
}

/* A peer's public key and name (printable, at most WIRE_NAME_MAX bytes). */
static void rd_identity_head(rd_t *r, wire_identity_t *id) {
    rd_bytes(r, id->pubkey, 32, "public key");
    uint8_t n = rd_u8(r, "name");
    const uint8_t *p = rd_take(r, n, "name");
    if (!p) return;
    if (n > WIRE_NAME_MAX) {
        r->err = 1;
        r->what = "name longer than 63 bytes";
        return;
    }
    for (uint8_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] > 0x7e) {
            r->err = 1;
            r->what = "name with a non-printable byte";
            return;
        }
    memcpy(id->name, p, n);
    id->name[n] = 0;
}
/* The signature ends the body; the digest covers everything before it. */
static void rd_identity_sig(rd_t *r, const uint8_t *body, wire_identity_t *id) {
    const uint8_t *sig = rd_take(r, WIRE_SIG_LEN, "signature");
    if (!sig) return;
    memcpy(id->sig, sig, WIRE_SIG_LEN);
    wire_body_digest(body, (size_t)(sig - body), id->digest);
}

void wire_body_digest(const uint8_t *body, size_t len, uint8_t out[32]) {
    crypto_generichash(out, 32, body, len, NULL, 0);
}

/* Bounds an element count by the bytes present, so a lying count cannot make us allocate. */
static int rd_count(rd_t *r, uint32_t n, size_t min_elem, uint32_t max, const char *what) {
    if (r->err) return -1;
    if (n > max || (size_t)n * min_elem > r->left) {
        r->err = 1;
        r->what = what;
        return -1;
    }
    return 0;
}

int wire_decode(const uint8_t *body, size_t len, wire_msg_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    rd_t r = {body, len, 0, NULL};
    if (len > WIRE_MAX_BODY) {
        snprintf(err, errlen, "packet of %zu bytes exceeds the limit of %u", len, WIRE_MAX_BODY);
        return -1;
    }
    out->type = rd_u16(&r, "type");
    __typeof__(out->u) *u = &out->u;
    switch (out->type) {
    case C2M_HELLO:
        u->hello.magic = rd_u32(&r, "magic");
        u->hello.version = rd_u16(&r, "version");
        if (rd_other_version(&r, u->hello.version)) break;
        u->hello.peer_group = rd_u32(&r, "peer group");
        u->hello.p2p_port = rd_u16(&r, "p2p port");
        u->hello.pool_size = rd_u32(&r, "pool size");
        rd_ip(&r, &u->hello.has_adv, &u->hello.adv_ip, "advertised address");
        rd_identity_head(&r, &u->hello.id);
        rd_identity_sig(&r, body, &u->hello.id);
        break;
    case C2M_UPDATE_TOPOLOGY: case C2M_PEERS_PENDING: case C2M_OPTIMIZE_TOPOLOGY: case C2M_HEARTBEAT:
    case C2M_LEAVE: case M2C_HEARTBEAT:
        break;
    case C2M_P2P_ESTABLISHED: case C2M_SS_DIST_DONE: case M2C_PEERS_PENDING: case M2C_SS_DONE:
    case M2C_OPTIMIZE_DONE:
        u->flag.value = rd_u8(&r, "flag");
        break;
    case C2M_SYNC_SHARED_STATE:
        u->sync.revision = rd_u64(&r, "revision");
        u->sync.strategy = rd_u8(&r, "strategy");
        u->sync.n = rd_u32(&r, "tensor count");
        if (rd_count(&r, u->sync.n, 19, WIRE_MAX_TENSORS, "too many tensors") == 0 && u->sync.n) {
            u->sync.tensors = calloc(u->sync.n, sizeof(wire_tensor_t));
            if (!u->sync.tensors) { r.err = 1; r.what = "out of memory"; break; }
            for (uint32_t i = 0; i < u->sync.n && !r.err; i++) rd_tensor(&r, &u->sync.tensors[i]);
        }
        break;
    case C2M_COLL_INIT:
        u->coll_init.tag = rd_u64(&r, "tag");
        u->coll_init.count = rd_u64(&r, "count");
        u->coll_init.dtype = rd_u8(&r, "dtype");
        u->coll_init.op = rd_u8(&r, "op");
        u->coll_init.quant_algo = rd_u8(&r, "quantization");
        u->coll_init.quant_dtype = rd_u8(&r, "quantized dtype");
        break;
    case C2M_COLL_DONE: case M2C_COLL_ABORT: case M2C_COLL_COMPLETE:
        u->coll.tag = rd_u64(&r, "tag");
        u->coll.op_seq = rd_u64(&r, "op seq");
        u->coll.ok = rd_u8(&r, "ok");
        break;
    case M2C_WELCOME: case C2M_PEER_UNREACHABLE:
        rd_bytes(&r, u->welcome.uuid, 16, "uuid");
        break;
    case M2C_ESTABLISH_P2P:
        rd_world(&r, &u->establish.world);
        u->establish.n = rd_u32(&r, "peer count");
        if (rd_count(&r, u->establish.n, 16 + WIRE_IP_LEN + 2, WIRE_MAX_PEERS, "too many peers") == 0 && u->establish.n) {
            u->establish.peers = calloc(u->establish.n, sizeof(wire_peer_t));
            if (!u->establish.peers) { r.err = 1; r.what = "out of memory"; break; }
            for (uint32_t i = 0; i < u->establish.n && !r.err; i++) rd_peer(&r, &u->establish.peers[i]);
        }
        break;
    case M2C_TOPOLOGY_DONE:
        u->topo_done.ok = rd_u8(&r, "ok");
        rd_world(&r, &u->topo_done.world);
        break;
    case M2C_SS_PLAN:
        u->ss_plan.status = rd_u8(&r, "status");
        u->ss_plan.revision = rd_u64(&r, "revision");
        u->ss_plan.nsrc = rd_u8(&r, "source count");
        if (rd_count(&r, u->ss_plan.nsrc, 16 + WIRE_IP_LEN + 2, WIRE_MAX_SS_SOURCES, "too many sources") != 0) break;
        for (uint32_t i = 0; i < u->ss_plan.nsrc; i++) rd_peer(&r, &u->ss_plan.sources[i]);
        u->ss_plan.n = rd_u32(&r, "fetch count");
        if (rd_count(&r, u->ss_plan.n, 23, WIRE_MAX_TENSORS, "too many tensors") == 0 && u->ss_plan.n) {
            u->ss_plan.fetch = calloc(u->ss_plan.n, sizeof(wire_tensor_t));
            u->ss_plan.holders = calloc(u->ss_plan.n, sizeof(uint32_t));
            if (!u->ss_plan.fetch || !u->ss_plan.holders) { r.err = 1; r.what = "out of memory"; break; }
            for (uint32_t i = 0; i < u->ss_plan.n && !r.err; i++) rd_tensor(&r, &u->ss_plan.fetch[i]);
            uint32_t known = u->ss_plan.nsrc == 32 ? ~0u : (1u << u->ss_plan.nsrc) - 1;
            for (uint32_t i = 0; i < u->ss_plan.n && !r.err; i++) {
                u->ss_plan.holders[i] = rd_u32(&r, "holders");
                if (u->ss_plan.holders[i] & ~known) { r.err = 1; r.what = "holder is not a source"; }
            }
        }
        u->ss_plan.nranges = rd_u32(&r, "range count");
        if (rd_count(&r, u->ss_plan.nranges, 21, WIRE_MAX_SS_RANGES, "too many ranges") == 0 && u->ss_plan.nranges) {
            u->ss_plan.ranges = calloc(u->ss_plan.nranges, sizeof(wire_ss_range_t));
            if (!u->ss_plan.ranges) { r.err = 1; r.what = "out of memory"; break; }
            for (uint32_t i = 0; i < u->ss_plan.nranges && !r.err; i++) {
                wire_ss_range_t *g = &u->ss_plan.ranges[i];
                g->tensor = rd_u32(&r, "range tensor");
                g->source = rd_u8(&r, "range source");
                g->offset = rd_u64(&r, "range offset");
                g->length = rd_u64(&r, "range length");
                if (!r.err && (g->tensor >= u->ss_plan.n || !(u->ss_plan.holders[g->tensor] >> g->source & 1) ||
                               !g->length || g->offset + g->length < g->offset)) {
                    r.err = 1;
                    r.what = "range outside the plan";
                }
            }
        }
        break;
    case M2C_COLL_COMMENCE:
        u->commence.tag = rd_u64(&r, "tag");
        u->commence.op_seq = rd_u64(&r, "op seq");
        u->commence.slots = rd_u64(&r, "slots");
        if (!r.err && !u->commence.slots) { r.err = 1; r.what = "no connection slot"; break; }
        rd_world(&r, &u->commence.world);
        u->commence.n = rd_u32(&r, "ring size");
        if (rd_count(&r, u->commence.n, 16, WIRE_MAX_PEERS, "ring too large") == 0 && u->commence.n) {
            u->commence.ring = calloc(u->commence.n, 16);
            if (!u->commence.ring) { r.err = 1; r.what = "out of memory"; break; }
            for (uint32_t i = 0; i < u->commence.n && !r.err; i++) rd_bytes(&r, u->commence.ring[i], 16, "ring");
        }
        break;
    case M2C_COLL_REJECT:
        u->reject.tag = rd_u64(&r, "tag");
        u->reject.reason = rd_u8(&r, "reason");
        break;
    case M2C_KICK:
    case M2C_SHUTDOWN:
        rd_str(&r, u->kick.reason, "reason");
        break;
    case M2C_BENCH_REQUEST:
        u->bench_req.duration_ms = rd_u32(&r, "duration");
        u->bench_req.n = rd_u32(&r, "peer count");
        if (rd_count(&r, u->bench_req.n, 16 + WIRE_IP_LEN + 2, WIRE_MAX_PEERS, "too many peers") == 0 && u->bench_req.n) {
            u->bench_req.peers = calloc(u->bench_req.n, sizeof(wire_peer_t));
            if (!u->bench_req.peers) { r.err = 1; r.what = "out of memory"; break; }
            for (uint32_t i = 0; i < u->bench_req.n && !r.err; i++) rd_peer(&r, &u->bench_req.peers[i]);
        }
        break;
    case C2M_RESUME:
        u->resume.magic = rd_u32(&r, "magic");
        u->resume.version = rd_u16(&r, "version");
        if (rd_other_version(&r, u->resume.version)) break;
        u->resume.peer_group = rd_u32(&r, "peer group");
        u->resume.p2p_port = rd_u16(&r, "p2p port");
        u->resume.pool_size = rd_u32(&r, "pool size");
        rd_ip(&r, &u->resume.has_adv, &u->resume.adv_ip, "advertised address");
        rd_identity_head(&r, &u->resume.id);
        rd_bytes(&r, u->resume.uuid, 16, "uuid");
        u->resume.has_revision = rd_u8(&r, "revision flag");
        u->resume.revision = rd_u64(&r, "revision");
        u->resume.nring = rd_u32(&r, "ring size");
        if (rd_count(&r, u->resume.nring, 16, WIRE_MAX_PEERS, "ring too large") == 0 && u->resume.nring) {
            u->resume.ring = calloc(u->resume.nring, 16);
            if (!u->resume.ring) { r.err = 1; r.what = "out of memory"; break; }
            for (uint32_t i = 0; i < u->resume.nring && !r.err; i++) rd_bytes(&r, u->resume.ring[i], 16, "ring");
        }
        u->resume.n = rd_u32(&r, "tensor count");
        if (rd_count(&r, u->resume.n, 19, WIRE_MAX_TENSORS, "too many tensors") == 0 && u->resume.n) {
            u->resume.tensors = calloc(u->resume.n, sizeof(wire_tensor_t));
            if (!u->resume.tensors) { r.err = 1; r.what = "out of memory"; break; }
            for (uint32_t i = 0; i < u->resume.n && !r.err; i++) rd_tensor(&r, &u->resume.tensors[i]);
        }
        u->resume.nops = rd_u32(&r, "op count");
        if (rd_count(&r, u->resume.nops, 17, WIRE_MAX_OPS, "too many ops") == 0 && u->resume.nops) {
            u->resume.ops = calloc(u->resume.nops, sizeof *u->resume.ops);
            if (!u->resume.ops) { r.err = 1; r.what = "out of memory"; break; }
            for (uint32_t i = 0; i < u->resume.nops && !r.err; i++) {
                u->resume.ops[i].tag = rd_u64(&r, "op tag");
                u->resume.ops[i].op_seq = rd_u64(&r, "op sequence");
                u->resume.ops[i].finished = rd_u8(&r, "op outcome");
            }
        }
        rd_identity_sig(&r, body, &u->resume.id);
        break;
    case M2C_RESUMED:
        u->resumed.ok = rd_u8(&r, "ok");
        rd_world(&r, &u->resumed.world);
        u->resumed.revision = rd_u64(&r, "revision");
        break;
    case M2C_CHALLENGE:
        rd_bytes(&r, u->challenge.nonce, 32, "nonce");
        break;
    case C2M_BENCH_RESULT:
        u->bench_res.n = rd_u32(&r, "result count");
        if (rd_count(&r, u->bench_res.n, 24, WIRE_MAX_PEERS, "too many results") == 0 && u->bench_res.n) {
            u->bench_res.results = calloc(u->bench_res.n, sizeof(wire_bw_t));
            if (!u->bench_res.results) { r.err = 1; r.what = "out of memory"; break; }
            for (uint32_t i = 0; i < u->bench_res.n && !r.err; i++) {
                rd_bytes(&r, u->bench_res.results[i].uuid, 16, "result uuid");
                uint64_t bits = rd_u64(&r, "result value");
                memcpy(&u->bench_res.results[i].mbps, &bits, 8);
            }
        }
        break;
    default:
        snprintf(err, errlen, "unknown message type %u", out->type);
        memset(out, 0, sizeof *out);
        return -1;
    }
    if (!r.err && r.left != 0) {
        r.err = 1;
        r.what = "trailing bytes";
    }
    if (r.err) {
        snprintf(err, errlen, "malformed %s: %s", wire_type_name(out->type), r.what ? r.what : "truncated");
        wire_msg_free(out);
        return -1;
    }
    return 0;
}

void wire_msg_free(wire_msg_t *m) {
    switch (m->type) {
    case C2M_SYNC_SHARED_STATE: free(m->u.sync.tensors); break;
    case M2C_ESTABLISH_P2P: free(m->u.establish.peers); break;
    case M2C_SS_PLAN:
        free(m->u.ss_plan.fetch);
        free(m->u.ss_plan.holders);
        free(m->u.ss_plan.ranges);
        break;
    case M2C_COLL_COMMENCE: free(m->u.commence.ring); break;
    case M2C_BENCH_REQUEST: free(m->u.bench_req.peers); break;
    case C2M_BENCH_RESULT: free(m->u.bench_res.results); break;
    case C2M_RESUME:
        free(m->u.resume.ring);
        free(m->u.resume.tensors);
        free(m->u.resume.ops);
        break;
    default: break;
    }
    memset(m, 0, sizeof *m);
}

const char *wire_type_name(uint16_t type) {
    switch (type) {
    case C2M_HELLO: return "HELLO";
    case C2M_UPDATE_TOPOLOGY: return "UPDATE_TOPOLOGY";
    case C2M_P2P_ESTABLISHED: return "P2P_ESTABLISHED";
    case C2M_PEERS_PENDING: return "PEERS_PENDING_VOTE";
    case C2M_SYNC_SHARED_STATE: return "SYNC_SHARED_STATE";
    case C2M_SS_DIST_DONE: return "SS_DIST_DONE";
    case C2M_COLL_INIT: return "COLL_INIT";
    case C2M_COLL_DONE: return "COLL_DONE";
    case C2M_OPTIMIZE_TOPOLOGY: return "OPTIMIZE_TOPOLOGY";
    case C2M_HEARTBEAT: return "HEARTBEAT";
    case M2C_WELCOME: return "WELCOME";
    case M2C_ESTABLISH_P2P: return "ESTABLISH_P2P";
    case M2C_TOPOLOGY_DONE: return "TOPOLOGY_DONE";
    case M2C_PEERS_PENDING: return "PEERS_PENDING";
    case M2C_SS_PLAN: return "SS_PLAN";
    case M2C_SS_DONE: return "SS_DONE";
    case M2C_COLL_COMMENCE: return "COLL_COMMENCE";
    case M2C_COLL_ABORT: return "COLL_ABORT";
    case M2C_COLL_COMPLETE: return "COLL_COMPLETE";
    case M2C_COLL_REJECT: return "COLL_REJECT";
    case M2C_KICK: return "KICK";
    case M2C_OPTIMIZE_DONE: return "OPTIMIZE_DONE";
    case M2C_HEARTBEAT: return "HEARTBEAT_ACK";
    case M2C_BENCH_REQUEST: return "BENCH_REQUEST";
    case C2M_BENCH_RESULT: return "BENCH_RESULT";
    case C2M_PEER_UNREACHABLE: return "PEER_UNREACHABLE";
    case C2M_RESUME: return "RESUME";
    case C2M_LEAVE: return "LEAVE";
    case M2C_RESUMED: return "RESUMED";
    case M2C_CHALLENGE: return "CHALLENGE";
    case M2C_SHUTDOWN: return "SHUTDOWN";
    default: return "UNKNOWN";
    }
}

int wire_type_is_c2m(uint16_t type) { return type >= C2M_HELLO && type < C2M_MAX_; }
/* By name: the master-to-peer numbers need not be contiguous. */
int wire_type_is_m2c(uint16_t type) {
    return type >= M2C_WELCOME && type < M2C_MAX_ && strcmp(wire_type_name(type), "UNKNOWN") != 0;
}

void wire_p2p_hello_encode(uint8_t out[WIRE_P2P_HELLO_LEN], uint8_t kind, const uint8_t uuid[16], uint32_t slot) {
    wire_put_u32(out, WIRE_MAGIC);
    wire_put_u16(out + 4, WIRE_VERSION);
    out[6] = kind;
    memcpy(out + 7, uuid, 16);
    wire_put_u32(out + 23, slot);
}

int wire_p2p_hello_decode(const uint8_t in[WIRE_P2P_HELLO_LEN], uint8_t *kind, uint8_t uuid[16], uint32_t *slot) {
    if (wire_get_u32(in) != WIRE_MAGIC || wire_get_u16(in + 4) != WIRE_VERSION) return -1;
    *kind = in[6];
    if (*kind < P2P_KIND_RING || *kind > P2P_KIND_BENCH) return -1;
    memcpy(uuid, in + 7, 16);
    *slot = wire_get_u32(in + 23);
    return 0;
}
