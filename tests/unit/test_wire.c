/* test_wire.c - the control protocol codec (wire.c): round trips of every
 * message type with non-trivial values, the exact byte layout of the framing,
 * and hostile input (truncation at every length, trailing bytes, unknown
 * types, lying array counts, bad strings, bad body lengths). A failed decode
 * must return -1 with a non-empty reason and leave nothing to free. Also the
 * 27-byte p2p handshake. */
#include "tinytest.h"
#include "base/addr.h"
#include "base/wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation probe: the largest calloc request while armed ----
 * The decoder allocates its arrays with calloc; a count that lies must be
 * refused before any allocation of its size. The probe forwards to glibc and
 * is left out under sanitizers, which own the allocator. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOC_PROBE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define ALLOC_PROBE 0
#endif
#endif
#ifndef ALLOC_PROBE
#define ALLOC_PROBE 1
#endif

static int probe_armed;
static size_t probe_max;
#if ALLOC_PROBE
extern void *__libc_calloc(size_t n, size_t size);
void *calloc(size_t n, size_t size) {
    if (probe_armed && (size == 0 || n <= SIZE_MAX / size) && n * size > probe_max) probe_max = n * size;
    return __libc_calloc(n, size);
}
#endif

/* ---- helpers ---- */

static wire_msg_t zero_msg;

/* Encodes m; checks the frame header against the body; returns the body (malloc'd) and its length. */
static uint8_t *encode_body(const wire_msg_t *m, size_t *len) {
    wbuf_t b = {0};
    int rc = wire_encode(m, &b);
    CHECK(rc == 0);
    if (rc != 0) {
        wbuf_free(&b);
        *len = 0;
        return NULL;
    }
    CHECK(b.len >= 6);
    CHECK_EQ_U64(wire_get_u32(b.data), b.len - 4);
    CHECK_EQ_U64(wire_get_u16(b.data + 4), m->type);
    *len = b.len - 4;
    uint8_t *body = malloc(*len);
    memcpy(body, b.data + 4, *len);
    wbuf_free(&b);
    return body;
}

/* Decode must fail: -1, a reason, and a zeroed message (nothing to free). */
static void expect_reject(const uint8_t *body, size_t len, const char *what) {
    wire_msg_t out;
    memset(&out, 0xAB, sizeof out);
    char err[160] = "";
    int rc = wire_decode(body, len, &out, err, sizeof err);
    CHECK(rc == -1);
    CHECK(err[0] != 0);
    CHECK(memcmp(&out, &zero_msg, sizeof out) == 0);
    if (rc != -1 || !err[0]) fprintf(stderr, "  case: %s (len %zu) err='%s'\n", what, len, err);
    if (rc == 0) wire_msg_free(&out);
}

/* Every strict prefix and the body plus one trailing byte are rejected. */
static void expect_strict(const uint8_t *body, size_t len, const char *what) {
    for (size_t k = 0; k < len; k++) expect_reject(body, k, what);
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, body, len);
    longer[len] = 0;
    expect_reject(longer, len + 1, what);
    free(longer);
}

/* Encode, check the body length, decode, re-encode to the same bytes, run the strictness checks. */
static void roundtrip(const wire_msg_t *m, size_t expect_body, wire_msg_t *out) {
    size_t len;
    uint8_t *body = encode_body(m, &len);
    if (!body) return;
    CHECK_EQ_U64(len, expect_body);
    char err[160] = "";
    int rc = wire_decode(body, len, out, err, sizeof err);
    CHECK(rc == 0);
    if (rc != 0) fprintf(stderr, "  decode of %s failed: %s\n", wire_type_name(m->type), err);
    CHECK_EQ_U64(out->type, m->type);
    size_t len2;
    uint8_t *body2 = encode_body(out, &len2);
    CHECK(body2 && len2 == len && memcmp(body, body2, len) == 0);
    free(body2);
    expect_strict(body, len, wire_type_name(m->type));
    free(body);
}

static void fill(uint8_t *p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(seed + 37 * i);
}

static int tensor_eq(const wire_tensor_t *a, const wire_tensor_t *b) {
    return strcmp(a->key, b->key) == 0 && a->dtype == b->dtype && a->allow_inequality == b->allow_inequality &&
           a->count == b->count && a->hash == b->hash;
}
static int peer_eq(const wire_peer_t *a, const wire_peer_t *b) {
    return memcmp(a->uuid, b->uuid, 16) == 0 && addr_ip_equal(&a->ip, &b->ip) && a->port == b->port &&
           a->has_obs == b->has_obs && (!a->has_obs || addr_ip_equal(&a->obs_ip, &b->obs_ip)) &&
           a->obs_port == b->obs_port && a->reach == b->reach;
}
static int world_eq(const wire_world_t *a, const wire_world_t *b) {
    return a->global_world_size == b->global_world_size && a->group_world_size == b->group_world_size &&
           a->num_groups == b->num_groups && a->largest_group == b->largest_group;
}

static const wire_world_t WORLD = {0x01020304u, 0xA0B0C0D0u, 7, 0xFFFFFFFFu};

/* ---- round trips ---- */

static void test_helpers(void) {
    uint8_t b[8];
    wire_put_u16(b, 0xBEEF);
    CHECK(b[0] == 0xBE && b[1] == 0xEF);
    CHECK_EQ_U64(wire_get_u16(b), 0xBEEF);
    wire_put_u32(b, 0x01020304u);
    CHECK(b[0] == 1 && b[1] == 2 && b[2] == 3 && b[3] == 4);
    CHECK_EQ_U64(wire_get_u32(b), 0x01020304u);
    wire_put_u64(b, 0x8877665544332211ull);
    CHECK(b[0] == 0x88 && b[7] == 0x11);
    CHECK_EQ_U64(wire_get_u64(b), 0x8877665544332211ull);
    for (uint16_t t = C2M_HELLO; t < C2M_MAX_; t++) {
        CHECK(wire_type_is_c2m(t) && !wire_type_is_m2c(t));
        CHECK(strcmp(wire_type_name(t), "UNKNOWN") != 0);
    }
    /* Master-to-peer numbers may have gaps: a number is a message exactly when it has a name. */
    for (uint16_t t = M2C_WELCOME; t < M2C_MAX_; t++) {
        CHECK(wire_type_is_m2c(t) == (strcmp(wire_type_name(t), "UNKNOWN") != 0) && !wire_type_is_c2m(t));
        CHECK(t > M2C_RESUMED || wire_type_is_m2c(t));
    }
    uint16_t odd[] = {0, C2M_MAX_, 100, M2C_MAX_, 0xFFFF};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        CHECK(!wire_type_is_c2m(odd[i]) && !wire_type_is_m2c(odd[i]));
        CHECK(strcmp(wire_type_name(odd[i]), "UNKNOWN") == 0);
    }
}

static void test_hello(void) {
    wire_msg_t m = {.type = C2M_HELLO}, o;
    m.u.hello.magic = WIRE_MAGIC;
    m.u.hello.version = WIRE_VERSION;
    m.u.hello.peer_group = 0xDEADBEEFu;
    m.u.hello.p2p_port = 65535;
    m.u.hello.pool_size = 0x01000001u;
    fill(m.u.hello.id.pubkey, 32, 5);
    snprintf(m.u.hello.id.name, sizeof m.u.hello.id.name, "worker-7");
    fill(m.u.hello.id.sig, WIRE_SIG_LEN, 77);
    const size_t hello_len = 2 + 4 + 2 + 4 + 2 + 4 + WIRE_IP_LEN + 32 + 1 + 8 + WIRE_SIG_LEN;
    roundtrip(&m, hello_len, &o);
    CHECK(o.u.hello.magic == WIRE_MAGIC && o.u.hello.version == WIRE_VERSION && o.u.hello.peer_group == 0xDEADBEEFu &&
          o.u.hello.p2p_port == 65535 && o.u.hello.pool_size == 0x01000001u && !o.u.hello.has_adv);
    CHECK(memcmp(o.u.hello.id.pubkey, m.u.hello.id.pubkey, 32) == 0 && strcmp(o.u.hello.id.name, "worker-7") == 0 &&
          memcmp(o.u.hello.id.sig, m.u.hello.id.sig, WIRE_SIG_LEN) == 0);
    {
        /* the digest the signature covers: the body up to the signature, type included */
        size_t blen;
        uint8_t *b = encode_body(&m, &blen), want[32];
        wire_body_digest(b, blen - WIRE_SIG_LEN, want);
        CHECK(memcmp(o.u.hello.id.digest, want, 32) == 0);
        free(b);
    }
    wire_msg_free(&o);
    /* a name may be empty, never longer than 63 bytes or non-printable */
    m.u.hello.id.name[0] = 0;
    roundtrip(&m, hello_len - 8, &o);
    CHECK(o.u.hello.id.name[0] == 0);
    wire_msg_free(&o);
    {
        size_t blen;
        snprintf(m.u.hello.id.name, sizeof m.u.hello.id.name, "a b");
        uint8_t *b = encode_body(&m, &blen);
        const size_t at = 2 + 4 + 2 + 4 + 2 + 4 + WIRE_IP_LEN + 32 + 1; /* the name's first byte */
        CHECK(b[at - 1] == 3 && b[at] == 'a');
        b[at + 1] = '\n';
        expect_reject(b, blen, "name with a newline");
        b[at + 1] = 0x80;
        expect_reject(b, blen, "name with a byte past ASCII");
        free(b);
        uint8_t long_name[2 + 33 + 32 + 1 + 64 + WIRE_SIG_LEN];
        memset(long_name, 'x', sizeof long_name);
        wire_put_u16(long_name, C2M_HELLO);
        wire_put_u32(long_name + 2, WIRE_MAGIC);
        wire_put_u16(long_name + 6, WIRE_VERSION);
        wire_put_u16(long_name + 12, 40000);
        memset(long_name + 18, 0, WIRE_IP_LEN);
        long_name[18 + WIRE_IP_LEN + 32] = 64;
        expect_reject(long_name, sizeof long_name, "name of 64 bytes");
        long_name[18 + WIRE_IP_LEN + 32] = 63;
        wire_msg_t ok;
        char e[160];
        CHECK(wire_decode(long_name, sizeof long_name - 1, &ok, e, sizeof e) == 0 && strlen(ok.u.hello.id.name) == 63);
    }
    snprintf(m.u.hello.id.name, sizeof m.u.hello.id.name, "worker-7");
    /* an advertised address of either family */
    const ccoip_inet_address_t adv[2] = {{.protocol = inetIPv4, .ipv4.data = {198, 51, 100, 7}},
                                         {.protocol = inetIPv6, .ipv6.data = {0x20, 0x01, 0x0d, 0xb8, [15] = 9}}};
    for (int i = 0; i < 2; i++) {
        m.u.hello.has_adv = 1;
        m.u.hello.adv_ip = adv[i];
        roundtrip(&m, hello_len, &o);
        CHECK(o.u.hello.has_adv == 1 && addr_ip_equal(&o.u.hello.adv_ip, &adv[i]));
        wire_msg_free(&o);
    }
    /* exact layout: type, magic "PCCL", version, ..., family byte and 16 address bytes */
    size_t len;
    uint8_t *body = encode_body(&m, &len);
    CHECK(body[0] == 0 && body[1] == C2M_HELLO && memcmp(body + 2, "PCCL", 4) == 0 && body[6] == 0 &&
          body[7] == WIRE_VERSION && body[18] == 6 && body[19] == 0x20 && body[34] == 9);
    /* a family that is neither 4 nor 6, or an IPv4 address with bytes after its 4, is refused */
    body[18] = 5;
    expect_reject(body, len, "address family 5");
    body[18] = 4;
    expect_reject(body, len, "IPv4 address with padding");
    body[18] = 0;
    expect_reject(body, len, "no address but address bytes");
    free(body);
    /* another version is read up to its version whatever follows, so the master can name both versions */
    m.u.hello.version = 0xFEDC;
    body = encode_body(&m, &len);
    char err[160];
    CHECK(wire_decode(body, 8, &o, err, sizeof err) == 0 && o.u.hello.version == 0xFEDC &&
          o.u.hello.magic == WIRE_MAGIC);
    CHECK(wire_decode(body, len, &o, err, sizeof err) == 0 && o.u.hello.version == 0xFEDC);
    free(body);
}

static void test_empty_and_flag_types(void) {
    uint16_t empty[] = {C2M_UPDATE_TOPOLOGY, C2M_PEERS_PENDING, C2M_OPTIMIZE_TOPOLOGY, C2M_HEARTBEAT, M2C_HEARTBEAT};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        wire_msg_t m = {.type = empty[i]}, o;
        roundtrip(&m, 2, &o);
        wire_msg_free(&o);
    }
    uint16_t flags[] = {C2M_P2P_ESTABLISHED, C2M_SS_DIST_DONE, M2C_PEERS_PENDING, M2C_SS_DONE, M2C_OPTIMIZE_DONE};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        uint8_t vals[] = {0, 1, 0xA5};
        for (size_t v = 0; v < 3; v++) {
            wire_msg_t m = {.type = flags[i]}, o;
            m.u.flag.value = vals[v];
            roundtrip(&m, 3, &o);
            CHECK_EQ_U64(o.u.flag.value, vals[v]);
            wire_msg_free(&o);
        }
    }
}

/* LEAVE: an empty body, peer -> master; a payload byte after the type is refused. */
static void test_leave(void) {
    wire_msg_t m = {.type = C2M_LEAVE}, o;
    roundtrip(&m, 2, &o);
    CHECK_EQ_U64(o.type, C2M_LEAVE);
    wire_msg_free(&o);
    CHECK(wire_type_is_c2m(C2M_LEAVE) && !wire_type_is_m2c(C2M_LEAVE));
    CHECK(strcmp(wire_type_name(C2M_LEAVE), "LEAVE") == 0);
    uint8_t body[3];
    wire_put_u16(body, C2M_LEAVE);
    body[2] = 0;
    char err[128];
    CHECK(wire_decode(body, sizeof body, &o, err, sizeof err) != 0);
    CHECK(wire_decode(body, 2, &o, err, sizeof err) == 0 && o.type == C2M_LEAVE);
}

/* SHUTDOWN (117): the run is over; a reason as KICK's, strict as every string. */
static void test_shutdown(void) {
    CHECK_EQ_U64(M2C_SHUTDOWN, 117);
    CHECK(wire_type_is_m2c(M2C_SHUTDOWN) && !wire_type_is_c2m(M2C_SHUTDOWN));
    CHECK(strcmp(wire_type_name(M2C_SHUTDOWN), "SHUTDOWN") == 0);
    wire_msg_t m = {.type = M2C_SHUTDOWN}, o;
    snprintf(m.u.kick.reason, sizeof m.u.kick.reason, "shutdown requested on the admin port");
    roundtrip(&m, 2 + 1 + strlen(m.u.kick.reason), &o);
    CHECK(strcmp(o.u.kick.reason, m.u.kick.reason) == 0);
    wire_msg_free(&o);
    m.u.kick.reason[0] = 0; /* an empty reason is one length byte */
    roundtrip(&m, 2 + 1, &o);
    CHECK(o.u.kick.reason[0] == 0);
    wire_msg_free(&o);
    uint8_t none[2] = {0, M2C_SHUTDOWN};
    expect_reject(none, sizeof none, "shutdown without its reason");
    uint8_t past[2 + 1 + 2] = {0, M2C_SHUTDOWN, 3, 'a', 'b'};
    expect_reject(past, sizeof past, "shutdown reason past the end");
    uint8_t nul[2 + 1 + 2] = {0, M2C_SHUTDOWN, 2, 'a', 0};
    expect_reject(nul, sizeof nul, "shutdown reason with a NUL");
    uint8_t extra[2 + 1 + 1 + 1] = {0, M2C_SHUTDOWN, 1, 'a', 'b'};
    expect_reject(extra, sizeof extra, "shutdown with trailing bytes");
}

static void make_tensors(wire_tensor_t *t, uint32_t n) {
    memset(t, 0, n * sizeof *t);
    for (uint32_t i = 0; i < n; i++) {
        snprintf(t[i].key, sizeof t[i].key, "layer.%u.weight", i);
        t[i].dtype = (uint8_t)(i * 3 + 1);
        t[i].allow_inequality = (uint8_t)(i & 1);
        t[i].count = 0x0123456789ull * (i + 1);
        t[i].hash = 0xF00DFACECAFEBEEFull ^ ((uint64_t)i << 40);
    }
}

static size_t tensors_bytes(const wire_tensor_t *t, uint32_t n) {
    size_t s = 0;
    for (uint32_t i = 0; i < n; i++) s += 1 + strlen(t[i].key) + 1 + 1 + 8 + 8;
    return s;
}

static void test_sync(void) {
    enum { N = 4 };
    wire_tensor_t t[N];
    make_tensors(t, N);
    memset(t[2].key, 'k', WIRE_MAX_KEY); /* longest key */
    t[2].key[WIRE_MAX_KEY] = 0;
    t[3].key[0] = 0; /* empty key is encodable */
    wire_msg_t m = {.type = C2M_SYNC_SHARED_STATE}, o;
    m.u.sync.revision = 0xFFFFFFFFFFFFFFFEull;
    m.u.sync.strategy = 2;
    m.u.sync.n = N;
    m.u.sync.tensors = t;
    roundtrip(&m, 2 + 8 + 1 + 4 + tensors_bytes(t, N), &o);
    CHECK(o.u.sync.revision == m.u.sync.revision && o.u.sync.strategy == 2 && o.u.sync.n == N);
    CHECK(o.u.sync.tensors != NULL);
    for (int i = 0; i < N && o.u.sync.tensors; i++) CHECK(tensor_eq(&o.u.sync.tensors[i], &t[i]));
    wire_msg_free(&o);
    CHECK(o.type == 0 && o.u.sync.tensors == NULL);

    wire_msg_t z = {.type = C2M_SYNC_SHARED_STATE};
    z.u.sync.revision = 9;
    roundtrip(&z, 15, &o);
    CHECK(o.u.sync.n == 0 && o.u.sync.tensors == NULL);
    wire_msg_free(&o);
}

static void test_coll_msgs(void) {
    wire_msg_t m = {.type = C2M_COLL_INIT}, o;
    m.u.coll_init.tag = 0x1122334455667788ull;
    m.u.coll_init.count = 0x8877665544332211ull;
    m.u.coll_init.dtype = 9;
    m.u.coll_init.op = 4;
    m.u.coll_init.quant_algo = 2;
    m.u.coll_init.quant_dtype = 250;
    m.u.coll_init.kind = 3;
    m.u.coll_init.flags = 6;
    m.u.coll_init.rank_key = 0xFFFFFFFFFFFFFFF0ull;
    m.u.coll_init.capacity = 0x0102030405060708ull;
    m.u.coll_init.max_world = 0x80000001u;
    m.u.coll_init.hash = 0xA5A5A5A55A5A5A5Aull;
    m.u.coll_init.grant_seq = 0x0F0E0D0C0B0A0908ull;
    roundtrip(&m, 2 + 8 + 8 + 4 + 2 + 8 + 8 + 4 + 8 + 1 + 8, &o);
    CHECK(o.u.coll_init.tag == m.u.coll_init.tag && o.u.coll_init.count == m.u.coll_init.count &&
          o.u.coll_init.dtype == 9 && o.u.coll_init.op == 4 && o.u.coll_init.quant_algo == 2 &&
          o.u.coll_init.quant_dtype == 250);
    CHECK(o.u.coll_init.kind == 3 && o.u.coll_init.flags == 6 && o.u.coll_init.rank_key == m.u.coll_init.rank_key &&
          o.u.coll_init.capacity == m.u.coll_init.capacity && o.u.coll_init.max_world == 0x80000001u &&
          o.u.coll_init.hash == m.u.coll_init.hash && o.u.coll_init.grant_seq == m.u.coll_init.grant_seq);
    wire_msg_free(&o);

    uint16_t types[] = {C2M_COLL_DONE, M2C_COLL_ABORT, M2C_COLL_COMPLETE};
    for (int i = 0; i < 3; i++) {
        wire_msg_t c = {.type = types[i]};
        c.u.coll.tag = 0xABCDEF0123456789ull + (uint64_t)i;
        c.u.coll.op_seq = 0x0000000100000002ull * (uint64_t)(i + 1);
        c.u.coll.ok = (uint8_t)(i == 2);
        if (i == 2) c.u.coll.next_tag = 7, c.u.coll.next_seq = 0x11, c.u.coll.slots = 0x30;
        roundtrip(&c, 2 + 8 + 8 + 1 + (i == 2 ? 24 : 0), &o);
        CHECK(o.u.coll.tag == c.u.coll.tag && o.u.coll.op_seq == c.u.coll.op_seq && o.u.coll.ok == c.u.coll.ok);
        CHECK(o.u.coll.next_tag == c.u.coll.next_tag && o.u.coll.next_seq == c.u.coll.next_seq &&
              o.u.coll.slots == c.u.coll.slots);
        wire_msg_free(&o);
    }
    wire_msg_t rv = {.type = M2C_COLL_REVOKE};
    rv.u.coll.tag = 5, rv.u.coll.op_seq = 9, rv.u.coll.slots = 0x3;
    roundtrip(&rv, 2 + 8 + 8 + 8, &o);
    CHECK(o.u.coll.tag == 5 && o.u.coll.op_seq == 9 && o.u.coll.slots == 0x3);
    wire_msg_free(&o);

    wire_msg_t r = {.type = M2C_COLL_REJECT};
    r.u.reject.tag = 0x7FFFFFFFFFFFFFFFull;
    r.u.reject.reason = REJECT_TAG_IN_USE;
    snprintf(r.u.reject.detail, sizeof r.u.reject.detail, "two roots: a and b");
    roundtrip(&r, 2 + 8 + 1 + 1 + 18, &o);
    CHECK(o.u.reject.tag == r.u.reject.tag && o.u.reject.reason == REJECT_TAG_IN_USE);
    CHECK(strcmp(o.u.reject.detail, "two roots: a and b") == 0);
    wire_msg_free(&o);

    enum { N = 5 };
    uint8_t ring[N][16];
    for (int i = 0; i < N; i++) fill(ring[i], 16, (uint8_t)(i * 17 + 1));
    wire_msg_t c = {.type = M2C_COLL_COMMENCE};
    c.u.commence.tag = 42;
    c.u.commence.op_seq = 0x100000000ull;
    c.u.commence.slots = 0x8000000000000081ull;
    c.u.commence.world = WORLD;
    c.u.commence.n = N;
    c.u.commence.ring = ring;
    c.u.commence.kind = 1;
    c.u.commence.root = 4;
    wire_coll_member_t members[N];
    for (int i = 0; i < N; i++) members[i] = (wire_coll_member_t){(uint32_t)(N - 1 - i), 1000u + (uint64_t)i, (uint8_t)(i & 1)};
    c.u.commence.members = members;
    roundtrip(&c, 2 + 8 + 8 + 8 + 16 + 4 + 16 * N + 1 + 4 + 13 * N + 1, &o);
    CHECK(o.u.commence.kind == 1 && o.u.commence.root == 4 && o.u.commence.members != NULL);
    for (int i = 0; i < N && o.u.commence.members; i++)
        CHECK(o.u.commence.members[i].rank == members[i].rank && o.u.commence.members[i].count == members[i].count &&
              o.u.commence.members[i].holds == members[i].holds);
    CHECK(o.u.commence.tag == 42 && o.u.commence.op_seq == 0x100000000ull &&
          o.u.commence.slots == 0x8000000000000081ull);
    CHECK(world_eq(&o.u.commence.world, &WORLD));
    CHECK(o.u.commence.n == N && o.u.commence.ring != NULL);
    for (int i = 0; i < N && o.u.commence.ring; i++) CHECK(memcmp(o.u.commence.ring[i], ring[i], 16) == 0);
    wire_msg_free(&o);
    /* an op without a connection slot is refused both ways */
    size_t len = 0;
    uint8_t *body = encode_body(&c, &len);
    if (body) {
        memset(body + 2 + 16, 0, 8);
        expect_reject(body, len, "commence without slots");
        free(body);
    }
    wbuf_t b = {0};
    c.u.commence.slots = 0;
    CHECK(wire_encode(&c, &b) != 0);
    wbuf_free(&b);
}

static void test_master_msgs(void) {
    wire_msg_t w = {.type = M2C_WELCOME}, o;
    fill(w.u.welcome.uuid, 16, 0x5A);
    roundtrip(&w, 18, &o);
    CHECK(memcmp(o.u.welcome.uuid, w.u.welcome.uuid, 16) == 0);
    wire_msg_free(&o);

    enum { N = 3 };
    wire_peer_t peers[N];
    for (int i = 0; i < N; i++) {
        peers[i] = (wire_peer_t){0};
        fill(peers[i].uuid, 16, (uint8_t)(0x30 + i));
        /* peer 1 is an IPv6 peer, the others IPv4 */
        peers[i].ip = (ccoip_inet_address_t){.protocol = inetIPv4, .ipv4.data = {10, (uint8_t)i, 255, (uint8_t)(200 + i)}};
        if (i == 1) peers[i].ip = (ccoip_inet_address_t){.protocol = inetIPv6, .ipv6.data = {0xfd, 1, [14] = 2, 3}};
        peers[i].port = (uint16_t)(40000 + 1111 * i);
    }
    /* peer 2 behind a NAT: the master saw it elsewhere and could not dial it */
    peers[2].has_obs = 1;
    peers[2].obs_ip = (ccoip_inet_address_t){.protocol = inetIPv4, .ipv4.data = {198, 51, 100, 7}};
    peers[2].obs_port = 61000;
    peers[2].reach = WIRE_REACH_NO;
    wire_msg_t e = {.type = M2C_ESTABLISH_P2P};
    e.u.establish.world = WORLD;
    e.u.establish.n = N;
    e.u.establish.peers = peers;
    roundtrip(&e, 2 + 16 + 4 + (16 + WIRE_IP_LEN + 2 + WIRE_IP_LEN + 2 + 1) * N, &o);
    CHECK(world_eq(&o.u.establish.world, &WORLD) && o.u.establish.n == N && o.u.establish.peers);
    for (int i = 0; i < N && o.u.establish.peers; i++) CHECK(peer_eq(&o.u.establish.peers[i], &peers[i]));
    wire_msg_free(&o);

    wire_msg_t d = {.type = M2C_TOPOLOGY_DONE};
    d.u.topo_done.ok = 1;
    d.u.topo_done.world = WORLD;
    roundtrip(&d, 2 + 1 + 16, &o);
    CHECK(o.u.topo_done.ok == 1 && world_eq(&o.u.topo_done.world, &WORLD));
    wire_msg_free(&o);

    wire_tensor_t t[2];
    make_tensors(t, 2);
    wire_msg_t p = {.type = M2C_SS_PLAN};
    p.u.ss_plan.status = SS_CONFLICT;
    p.u.ss_plan.revision = 0x0102030405060708ull;
    p.u.ss_plan.nsrc = 2;
    p.u.ss_plan.sources[0] = peers[1];
    p.u.ss_plan.sources[1] = peers[0];
    p.u.ss_plan.n = 2;
    p.u.ss_plan.fetch = t;
    uint32_t holders[2] = {3, 2};
    wire_ss_range_t rg[3] = {{0, 0, 0, 4096}, {0, 1, 4096, 100}, {1, 1, 0, 7}};
    p.u.ss_plan.holders = holders;
    p.u.ss_plan.nranges = 3;
    p.u.ss_plan.ranges = rg;
    roundtrip(&p, 2 + 1 + 8 + 1 + 2 * (16 + WIRE_IP_LEN + 2 + WIRE_IP_LEN + 2 + 1) + 4 + tensors_bytes(t, 2) + 2 * 4 + 4 + 3 * 21, &o);
    CHECK(o.u.ss_plan.status == SS_CONFLICT && o.u.ss_plan.revision == p.u.ss_plan.revision);
    CHECK(o.u.ss_plan.nsrc == 2 && peer_eq(&o.u.ss_plan.sources[0], &peers[1]) &&
          peer_eq(&o.u.ss_plan.sources[1], &peers[0]) && o.u.ss_plan.n == 2 && o.u.ss_plan.fetch);
    for (int i = 0; i < 2 && o.u.ss_plan.fetch; i++) CHECK(tensor_eq(&o.u.ss_plan.fetch[i], &t[i]));
    CHECK(o.u.ss_plan.holders && o.u.ss_plan.holders[0] == 3 && o.u.ss_plan.holders[1] == 2);
    CHECK(o.u.ss_plan.nranges == 3 && o.u.ss_plan.ranges);
    for (int i = 0; i < 3 && o.u.ss_plan.ranges; i++)
        CHECK(o.u.ss_plan.ranges[i].tensor == rg[i].tensor && o.u.ss_plan.ranges[i].source == rg[i].source &&
              o.u.ss_plan.ranges[i].offset == rg[i].offset && o.u.ss_plan.ranges[i].length == rg[i].length);
    wire_msg_free(&o);

    /* a range from a source that does not hold its tensor, or of length 0, or past 2^64, is refused */
    size_t plen;
    rg[2].source = 0;
    uint8_t *pb = encode_body(&p, &plen);
    expect_reject(pb, plen, "range from a non-holder");
    free(pb);
    rg[2] = (wire_ss_range_t){1, 1, 0, 0};
    pb = encode_body(&p, &plen);
    expect_reject(pb, plen, "empty range");
    free(pb);
    rg[2] = (wire_ss_range_t){1, 1, UINT64_MAX, 2};
    pb = encode_body(&p, &plen);
    expect_reject(pb, plen, "range wrapping around");
    free(pb);
    rg[2] = (wire_ss_range_t){2, 1, 0, 7};
    pb = encode_body(&p, &plen);
    expect_reject(pb, plen, "range of no fetch entry");
    free(pb);
    rg[2] = (wire_ss_range_t){1, 33, 0, 7}; /* a source past the 32 a plan can list (bit 33 % 32 is a holder) */
    pb = encode_body(&p, &plen);
    expect_reject(pb, plen, "range from source 33");
    free(pb);
    rg[2] = (wire_ss_range_t){1, 1, 0, 7};
    holders[1] = 4 | 2; /* a holder bit beyond the sources */
    pb = encode_body(&p, &plen);
    expect_reject(pb, plen, "holder that is not a source");
    free(pb);

    wire_msg_t k = {.type = M2C_KICK};
    snprintf(k.u.kick.reason, sizeof k.u.kick.reason, "protocol mismatch: version 7");
    roundtrip(&k, 2 + 1 + strlen(k.u.kick.reason), &o);
    CHECK(strcmp(o.u.kick.reason, k.u.kick.reason) == 0);
    wire_msg_free(&o);
    memset(k.u.kick.reason, 'r', 255);
    k.u.kick.reason[255] = 0;
    roundtrip(&k, 2 + 1 + 255, &o);
    CHECK(strlen(o.u.kick.reason) == 255);
    wire_msg_free(&o);
}

/* Two messages appended to one buffer frame independently. */
static void test_append_and_encode_errors(void) {
    wbuf_t b = {0};
    wire_msg_t a = {.type = C2M_HEARTBEAT}, c = {.type = M2C_SS_DONE};
    c.u.flag.value = 1;
    CHECK(wire_encode(&a, &b) == 0);
    CHECK(wire_encode(&c, &b) == 0);
    CHECK_EQ_U64(b.len, 6 + 7);
    CHECK_EQ_U64(wire_get_u32(b.data), 2);
    CHECK_EQ_U64(wire_get_u32(b.data + 6), 3);
    CHECK_EQ_U64(wire_get_u16(b.data + 10), M2C_SS_DONE);

    /* unknown types and over-limit counts are refused and leave the buffer as it was */
    size_t before = b.len;
    uint16_t bad[] = {0, C2M_MAX_, 100, M2C_MAX_, 0xFFFF};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wire_msg_t u = {.type = bad[i]};
        CHECK(wire_encode(&u, &b) == -1);
        CHECK_EQ_U64(b.len, before);
    }
    wire_msg_t s = {.type = C2M_SYNC_SHARED_STATE};
    s.u.sync.n = WIRE_MAX_TENSORS + 1;
    CHECK(wire_encode(&s, &b) == -1);
    wire_msg_t e = {.type = M2C_ESTABLISH_P2P};
    e.u.establish.n = WIRE_MAX_PEERS + 1;
    CHECK(wire_encode(&e, &b) == -1);
    wire_msg_t cm = {.type = M2C_COLL_COMMENCE};
    cm.u.commence.n = WIRE_MAX_PEERS + 1;
    CHECK(wire_encode(&cm, &b) == -1);
    wire_msg_t pl = {.type = M2C_SS_PLAN};
    pl.u.ss_plan.n = WIRE_MAX_TENSORS + 1;
    CHECK(wire_encode(&pl, &b) == -1);
    CHECK_EQ_U64(b.len, before);

    /* a body over WIRE_MAX_BODY is refused by the encoder: 65536 tensors with 255-byte keys ~ 18 MB */
    wire_tensor_t *big = calloc(WIRE_MAX_TENSORS, sizeof *big);
    for (uint32_t i = 0; i < WIRE_MAX_TENSORS; i++) memset(big[i].key, 'x', WIRE_MAX_KEY);
    s.u.sync.n = WIRE_MAX_TENSORS;
    s.u.sync.tensors = big;
    CHECK(wire_encode(&s, &b) == -1);
    CHECK_EQ_U64(b.len, before);
    free(big);
    wbuf_free(&b);
}

/* ---- hostile input ---- */

static void put_hdr(uint8_t *p, uint16_t type) { wire_put_u16(p, type); }

static void test_bad_lengths_and_types(void) {
    uint8_t b[4] = {0, C2M_HELLO, 0, 0};
    expect_reject(b, 0, "empty body");
    expect_reject(b, 1, "one byte body");
    uint16_t unknown[] = {0, C2M_MAX_, 11, 50, 100, M2C_MAX_, 0x7FFF, 0xFFFF};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        uint8_t u[8] = {0};
        put_hdr(u, unknown[i]);
        expect_reject(u, 2, "unknown type");
        expect_reject(u, 8, "unknown type with payload");
    }
    /* oversized body: one byte past the limit is refused before anything is parsed */
    uint8_t *huge = calloc(WIRE_MAX_BODY + 1, 1);
    put_hdr(huge, C2M_HEARTBEAT);
    expect_reject(huge, (size_t)WIRE_MAX_BODY + 1, "oversized");
    free(huge);
}

/* SYNC header with a claimed tensor count followed by `extra` zero bytes. */
static uint8_t *sync_with_count(uint32_t n, size_t extra, size_t *len) {
    *len = 2 + 8 + 1 + 4 + extra;
    uint8_t *b = calloc(*len, 1);
    put_hdr(b, C2M_SYNC_SHARED_STATE);
    wire_put_u64(b + 2, 5);
    b[10] = 0;
    wire_put_u32(b + 11, n);
    return b;
}

static void decode_probe(const uint8_t *b, size_t len, int expect_ok, size_t alloc_limit, const char *what) {
    wire_msg_t o;
    char err[160] = "";
    probe_armed = 1;
    probe_max = 0;
    int rc = wire_decode(b, len, &o, err, sizeof err);
    probe_armed = 0;
    if (expect_ok) {
        CHECK(rc == 0);
        if (rc) fprintf(stderr, "  case %s: %s\n", what, err);
    } else {
        CHECK(rc == -1 && err[0]);
        CHECK(memcmp(&o, &zero_msg, sizeof o) == 0);
    }
    if (ALLOC_PROBE) {
        CHECK(probe_max <= alloc_limit);
        if (probe_max > alloc_limit) fprintf(stderr, "  case %s allocated %zu bytes\n", what, probe_max);
    }
    if (rc == 0) wire_msg_free(&o);
}

static void test_resume(void) {
    enum { N = 2, R = 3 };
    wire_tensor_t t[N];
    make_tensors(t, N);
    uint8_t ring[R][16];
    fill(&ring[0][0], sizeof ring, 9);
    wire_msg_t m = {.type = C2M_RESUME}, o;
    m.u.resume.magic = WIRE_MAGIC;
    m.u.resume.version = WIRE_VERSION;
    m.u.resume.peer_group = 0xDEADBEEFu;
    m.u.resume.p2p_port = 4242;
    m.u.resume.pool_size = 8;
    fill(m.u.resume.uuid, 16, 3);
    m.u.resume.has_revision = 1;
    m.u.resume.revision = 0x0102030405060708ull;
    m.u.resume.nring = R;
    m.u.resume.ring = ring;
    m.u.resume.n = N;
    m.u.resume.tensors = t;
    m.u.resume.has_adv = 1;
    m.u.resume.adv_ip = (ccoip_inet_address_t){.protocol = inetIPv4, .ipv4.data = {203, 0, 113, 1}};
    wire_op_outcome_t ops[2] = {{.tag = 11, .op_seq = 0x1122334455667788ull, .finished = 1}, {.tag = 12, .op_seq = 3}};
    m.u.resume.nops = 2;
    m.u.resume.ops = ops;
    fill(m.u.resume.id.pubkey, 32, 8);
    snprintf(m.u.resume.id.name, sizeof m.u.resume.id.name, "pod-3");
    fill(m.u.resume.id.sig, WIRE_SIG_LEN, 99);
    roundtrip(&m, 2 + 4 + 2 + 4 + 2 + 4 + WIRE_IP_LEN + 32 + 1 + 5 + 16 + 1 + 8 + 4 + 16 * R + 4 + tensors_bytes(t, N) +
                      4 + 2 * 17 + WIRE_SIG_LEN,
              &o);
    CHECK(strcmp(o.u.resume.id.name, "pod-3") == 0 && memcmp(o.u.resume.id.pubkey, m.u.resume.id.pubkey, 32) == 0 &&
          memcmp(o.u.resume.id.sig, m.u.resume.id.sig, WIRE_SIG_LEN) == 0);
    CHECK(o.u.resume.has_adv == 1 && addr_ip_equal(&o.u.resume.adv_ip, &m.u.resume.adv_ip));
    CHECK(o.u.resume.nops == 2 && o.u.resume.ops && o.u.resume.ops[0].tag == 11 &&
          o.u.resume.ops[0].op_seq == ops[0].op_seq && o.u.resume.ops[0].finished == 1 &&
          o.u.resume.ops[1].tag == 12 && o.u.resume.ops[1].op_seq == 3 && o.u.resume.ops[1].finished == 0);
    CHECK(o.u.resume.peer_group == 0xDEADBEEFu && o.u.resume.p2p_port == 4242 && o.u.resume.pool_size == 8);
    CHECK(memcmp(o.u.resume.uuid, m.u.resume.uuid, 16) == 0 && o.u.resume.revision == m.u.resume.revision);
    CHECK(o.u.resume.nring == R && o.u.resume.ring && memcmp(o.u.resume.ring, ring, sizeof ring) == 0);
    for (int i = 0; i < N && o.u.resume.tensors; i++) CHECK(tensor_eq(&o.u.resume.tensors[i], &t[i]));
    wire_msg_free(&o);
    CHECK(o.u.resume.ring == NULL && o.u.resume.tensors == NULL && o.u.resume.ops == NULL);

    wire_msg_t d = {.type = M2C_RESUMED};
    d.u.resumed.ok = 1;
    d.u.resumed.world = WORLD;
    d.u.resumed.revision = 77;
    roundtrip(&d, 2 + 1 + 16 + 8, &o);
    CHECK(o.u.resumed.ok == 1 && world_eq(&o.u.resumed.world, &WORLD) && o.u.resumed.revision == 77);
    CHECK(strcmp(wire_type_name(C2M_RESUME), "RESUME") == 0 && wire_type_is_c2m(C2M_RESUME));
    CHECK(strcmp(wire_type_name(M2C_RESUMED), "RESUMED") == 0 && wire_type_is_m2c(M2C_RESUMED));

    wire_msg_t ch = {.type = M2C_CHALLENGE};
    fill(ch.u.challenge.nonce, 32, 42);
    roundtrip(&ch, 2 + 32, &o);
    CHECK(memcmp(o.u.challenge.nonce, ch.u.challenge.nonce, 32) == 0);
    CHECK(strcmp(wire_type_name(M2C_CHALLENGE), "CHALLENGE") == 0 && wire_type_is_m2c(M2C_CHALLENGE));

    /* A ring count that lies about the bytes present is refused before any allocation. */
    uint8_t lie[2 + 4 + 2 + 4 + 2 + 4 + WIRE_IP_LEN + 32 + 1 + 16 + 1 + 8 + 4];
    memset(lie, 0, sizeof lie);
    wire_put_u16(lie, C2M_RESUME);
    wire_put_u16(lie + 6, WIRE_VERSION);
    wire_put_u32(lie + sizeof lie - 4, 4096);
    char err[160];
    CHECK(wire_decode(lie, sizeof lie, &o, err, sizeof err) != 0 && strstr(err, "ring"));
    /* So does an op count past WIRE_MAX_OPS or past the bytes present (after empty ring and tensors). */
    uint8_t lie2[sizeof lie + 4 + 4 + 17];
    memset(lie2, 0, sizeof lie2);
    wire_put_u16(lie2, C2M_RESUME);
    wire_put_u16(lie2 + 6, WIRE_VERSION);
    wire_put_u32(lie2 + sizeof lie + 4, WIRE_MAX_OPS + 1);
    CHECK(wire_decode(lie2, sizeof lie2, &o, err, sizeof err) != 0 && strstr(err, "ops"));
    wire_put_u32(lie2 + sizeof lie + 4, 2);
    CHECK(wire_decode(lie2, sizeof lie2, &o, err, sizeof err) != 0);
}

static void test_lying_counts(void) {
    size_t len;
    uint8_t *b;
    /* 65536 tensors claimed, 10 bytes present */
    b = sync_with_count(65536, 10, &len);
    decode_probe(b, len, 0, 0, "sync 65536/10 bytes");
    free(b);
    /* 0xFFFFFFFF tensors claimed, nothing present */
    b = sync_with_count(0xFFFFFFFFu, 0, &len);
    decode_probe(b, len, 0, 0, "sync 2^32-1");
    free(b);
    /* one more tensor than the limit, with enough bytes for all: refused by the limit */
    b = sync_with_count(WIRE_MAX_TENSORS + 1, (size_t)(WIRE_MAX_TENSORS + 1) * 19, &len);
    decode_probe(b, len, 0, 0, "sync over the limit");
    free(b);
    /* exactly the limit with minimal (empty-key) tensors is fine */
    b = sync_with_count(WIRE_MAX_TENSORS, (size_t)WIRE_MAX_TENSORS * 19, &len);
    decode_probe(b, len, 1, (size_t)WIRE_MAX_TENSORS * sizeof(wire_tensor_t), "sync at the limit");
    free(b);
    /* a count that fits the minimal size but whose keys run past the end */
    b = sync_with_count(2, 2 * 19, &len);
    b[15] = 30; /* first key claims 30 bytes: tensor 0 eats into tensor 1 and runs out */
    decode_probe(b, len, 0, 2 * sizeof(wire_tensor_t), "sync keys past the end");
    free(b);

    /* ESTABLISH_P2P: peer count lies */
    enum { PEER = 16 + WIRE_IP_LEN + 2 + WIRE_IP_LEN + 2 + 1 };
    uint8_t e[2 + 16 + 4 + PEER];
    memset(e, 0, sizeof e);
    e[2 + 16 + 4 + 16] = 4;
    put_hdr(e, M2C_ESTABLISH_P2P);
    wire_put_u32(e + 18, 4096);
    decode_probe(e, sizeof e, 0, 0, "establish 4096 peers / 1 present");
    wire_put_u32(e + 18, 0xFFFFFFFFu);
    decode_probe(e, sizeof e, 0, 0, "establish 2^32-1");
    size_t elen = 2 + 16 + 4 + PEER * (size_t)(WIRE_MAX_PEERS + 1);
    uint8_t *eb = calloc(elen, 1);
    for (size_t i = 0; i <= WIRE_MAX_PEERS; i++) eb[2 + 16 + 4 + PEER * i + 16] = 4; /* IPv4 0.0.0.0 */
    put_hdr(eb, M2C_ESTABLISH_P2P);
    wire_put_u32(eb + 18, WIRE_MAX_PEERS + 1);
    decode_probe(eb, elen, 0, 0, "establish over the limit");
    wire_put_u32(eb + 18, WIRE_MAX_PEERS);
    decode_probe(eb, elen - PEER, 1, (size_t)WIRE_MAX_PEERS * sizeof(wire_peer_t), "establish at the limit");
    free(eb);

    /* COMMENCE: ring size lies */
    uint8_t c[2 + 8 + 8 + 4 + 16 + 4 + 16];
    memset(c, 0, sizeof c);
    put_hdr(c, M2C_COLL_COMMENCE);
    wire_put_u32(c + 38, 2);
    decode_probe(c, sizeof c, 0, 0, "commence 2 / 1 present");
    wire_put_u32(c + 38, 0x80000000u);
    decode_probe(c, sizeof c, 0, 0, "commence 2^31");

    /* SS_PLAN: fetch count lies */
    uint8_t p[2 + 1 + 8 + PEER + 4 + 10];
    memset(p, 0, sizeof p);
    put_hdr(p, M2C_SS_PLAN);
    p[2 + 1 + 8 + 16] = 4;
    wire_put_u32(p + 2 + 1 + 8 + PEER, 65536);
    decode_probe(p, sizeof p, 0, 0, "plan 65536 / 10 bytes");
}

static void test_bad_strings(void) {
    /* KICK whose reason claims more bytes than present */
    uint8_t k[2 + 1 + 3] = {0, M2C_KICK, 10, 'a', 'b', 'c'};
    expect_reject(k, sizeof k, "kick string past the end");
    k[2] = 255;
    expect_reject(k, sizeof k, "kick 255 past the end");
    /* NUL inside the reason */
    uint8_t kn[2 + 1 + 4] = {0, M2C_KICK, 4, 'a', 0, 'b', 'c'};
    expect_reject(kn, sizeof kn, "kick NUL");

    /* a tensor key with a NUL inside */
    wire_tensor_t t;
    make_tensors(&t, 1);
    snprintf(t.key, sizeof t.key, "abXcd");
    wire_msg_t m = {.type = C2M_SYNC_SHARED_STATE};
    m.u.sync.n = 1;
    m.u.sync.tensors = &t;
    size_t len;
    uint8_t *body = encode_body(&m, &len);
    CHECK(body[2 + 8 + 1 + 4] == 5 && body[2 + 8 + 1 + 4 + 3] == 'X');
    body[2 + 8 + 1 + 4 + 3] = 0;
    expect_reject(body, len, "key with NUL");
    body[2 + 8 + 1 + 4 + 1] = 0; /* NUL as first byte too */
    expect_reject(body, len, "key starting with NUL");
    free(body);

    /* a key length that runs past the end of a plan's fetch list */
    wire_msg_t p = {.type = M2C_SS_PLAN};
    p.u.ss_plan.n = 1;
    p.u.ss_plan.fetch = &t;
    snprintf(t.key, sizeof t.key, "abcd");
    body = encode_body(&p, &len);
    body[2 + 1 + 8 + 1 + 4] = 200;
    expect_reject(body, len, "plan key past the end");
    free(body);
}

/* ---- p2p handshake ---- */

static void test_p2p_hello(void) {
    uint8_t uuid[16], got[16], h[WIRE_P2P_HELLO_LEN];
    fill(uuid, 16, 0x77);
    uint8_t kinds[] = {P2P_KIND_RING, P2P_KIND_SHARED_STATE, P2P_KIND_BENCH};
    for (int i = 0; i < 3; i++) {
        wire_p2p_hello_encode(h, kinds[i], uuid, 0xA1B2C3D4u);
        CHECK(memcmp(h, "PCCL", 4) == 0 && wire_get_u16(h + 4) == WIRE_VERSION && h[6] == kinds[i]);
        CHECK(memcmp(h + 7, uuid, 16) == 0 && wire_get_u32(h + 23) == 0xA1B2C3D4u);
        uint8_t kind = 0;
        uint32_t slot = 0;
        memset(got, 0, 16);
        CHECK(wire_p2p_hello_decode(h, &kind, got, &slot) == 0);
        CHECK(kind == kinds[i] && slot == 0xA1B2C3D4u && memcmp(got, uuid, 16) == 0);
    }
    uint8_t kind;
    uint32_t slot;
    wire_p2p_hello_encode(h, P2P_KIND_RING, uuid, 3);
    h[0] ^= 0x20; /* "pCCL" */
    CHECK(wire_p2p_hello_decode(h, &kind, got, &slot) == -1);
    wire_p2p_hello_encode(h, P2P_KIND_RING, uuid, 3);
    wire_put_u16(h + 4, WIRE_VERSION + 1);
    CHECK(wire_p2p_hello_decode(h, &kind, got, &slot) == -1);
    wire_put_u16(h + 4, 0);
    CHECK(wire_p2p_hello_decode(h, &kind, got, &slot) == -1);
    uint8_t bad_kinds[] = {0, P2P_KIND_BENCH + 1, 0xFF};
    for (int i = 0; i < 3; i++) {
        wire_p2p_hello_encode(h, bad_kinds[i], uuid, 3);
        CHECK(wire_p2p_hello_decode(h, &kind, got, &slot) == -1);
    }
}

int main(void) {
    memset(&zero_msg, 0, sizeof zero_msg);
    RUN_TEST(test_helpers);
    RUN_TEST(test_hello);
    RUN_TEST(test_empty_and_flag_types);
    RUN_TEST(test_sync);
    RUN_TEST(test_coll_msgs);
    RUN_TEST(test_master_msgs);
    RUN_TEST(test_append_and_encode_errors);
    RUN_TEST(test_bad_lengths_and_types);
    RUN_TEST(test_resume);
    RUN_TEST(test_leave);
    RUN_TEST(test_shutdown);
    RUN_TEST(test_lying_counts);
    RUN_TEST(test_bad_strings);
    RUN_TEST(test_p2p_hello);
    TEST_MAIN_END();
}
