/* test_wire_golden.c - the wire bytes of protocol version 12, pinned: one populated instance of every
 * message type is encoded and compared with the frame recorded here (hex, length prefix included), and
 * each recorded frame decodes and encodes back to itself. A change of these bytes is a new protocol
 * version: move WIRE_VERSION deliberately and record the new frames (`test_wire_golden --print` prints
 * the current encoder's frames in this table's form). */
#include "tinytest.h"
#include "base/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(uint8_t *p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(seed + 37 * i);
}

static const wire_world_t WORLD = {0x01020304u, 0xA0B0C0D0u, 7, 0xFFFFFFFFu};
static const ccoip_inet_address_t IP4 = {.protocol = inetIPv4, .ipv4.data = {198, 51, 100, 7}};
static const ccoip_inet_address_t IP6 = {.protocol = inetIPv6, .ipv6.data = {0x20, 0x01, 0x0d, 0xb8, [14] = 0xab, 9}};

/* The arrays the instances point into. */
static wire_tensor_t tensors[2];
static wire_peer_t peers[3];
static uint8_t ring[3][16];
static uint32_t holders[2] = {3, 2};
static wire_ss_range_t ranges[3] = {{0, 0, 0, 4096}, {0, 1, 4096, 100}, {1, 1, 0, 7}};
static wire_bw_t bw[2];
static wire_coll_member_t members[3] = {{2, 7, 0}, {0, 0xFFFFFFFFFFull, 1}, {1, 0, 1}};
static wire_edge_t edges[2];
static wire_op_outcome_t ops[2] = {{0x1111222233334444ull, 0x55, 1}, {0xFFFFFFFFFFFFFFFFull, 0x0102030405060708ull, 0}};

static void make_arrays(void) {
    for (int i = 0; i < 2; i++) {
        memset(&tensors[i], 0, sizeof tensors[i]);
        snprintf(tensors[i].key, sizeof tensors[i].key, "layer.%d.weight", i);
        tensors[i].dtype = (uint8_t)(i * 3 + 1);
        tensors[i].allow_inequality = (uint8_t)(i & 1);
        tensors[i].count = 0x0123456789ull * (uint64_t)(i + 1);
        tensors[i].hash = 0xF00DFACECAFEBEEFull ^ ((uint64_t)i << 40);
    }
    for (int i = 0; i < 3; i++) {
        fill(peers[i].uuid, 16, (uint8_t)(0x30 + i));
        peers[i].ip = i == 1 ? IP6 : (ccoip_inet_address_t){.protocol = inetIPv4, .ipv4.data = {10, (uint8_t)i, 255, 9}};
        peers[i].port = (uint16_t)(40000 + 1111 * i);
        peers[i].has_obs = i != 0;
        peers[i].obs_ip = i == 2 ? IP6 : IP4;
        peers[i].obs_port = peers[i].has_obs ? (uint16_t)(61000 + i) : 0;
        peers[i].reach = (uint8_t)i; /* unknown, yes, no */
        fill(ring[i], 16, (uint8_t)(i * 17 + 1));
    }
    for (int i = 0; i < 2; i++) {
        fill(edges[i].uuid, 16, (uint8_t)(0x50 + i));
        edges[i].kind = (uint8_t)(i + 1);
    }
    for (int i = 0; i < 2; i++) {
        fill(bw[i].uuid, 16, (uint8_t)(0x70 + i));
        bw[i].mbps = i ? -1.0 : 12345.678;
        bw[i].rtt_us = i ? 0.0 : 40012.5;
    }
}

static void make_identity(wire_identity_t *id) {
    fill(id->pubkey, 32, 5);
    snprintf(id->name, sizeof id->name, "worker-7");
    fill(id->sig, WIRE_SIG_LEN, 77);
}

/* One populated instance of message type t (pointing into the arrays above). */
static wire_msg_t make(uint16_t t) {
    wire_msg_t m = {.type = t};
    union wire_payload *u = &m.u;
    switch (t) {
    case C2M_HELLO:
        u->hello.magic = WIRE_MAGIC;
        u->hello.version = WIRE_VERSION;
        u->hello.peer_group = 0xDEADBEEFu;
        u->hello.p2p_port = 48149;
        u->hello.pool_size = 0x01000001u;
        u->hello.has_adv = 1;
        u->hello.adv_ip = IP6;
        make_identity(&u->hello.id);
        break;
    case C2M_RESUME:
        u->resume.magic = WIRE_MAGIC;
        u->resume.version = WIRE_VERSION;
        u->resume.peer_group = 3;
        u->resume.p2p_port = 50001;
        u->resume.pool_size = 4;
        u->resume.has_adv = 1;
        u->resume.adv_ip = IP4;
        make_identity(&u->resume.id);
        fill(u->resume.uuid, 16, 0x99);
        u->resume.has_revision = 1;
        u->resume.revision = 0x0A0B0C0D0E0F1011ull;
        u->resume.nring = 3;
        u->resume.ring = ring;
        u->resume.n = 2;
        u->resume.tensors = tensors;
        u->resume.nops = 2;
        u->resume.ops = ops;
        break;
    case C2M_P2P_ESTABLISHED: case C2M_SS_DIST_DONE: case M2C_PEERS_PENDING: case M2C_SS_DONE: case M2C_OPTIMIZE_DONE:
        u->flag.value = (uint8_t)(0xA0 + t % 16);
        break;
    case C2M_SYNC_SHARED_STATE:
        u->sync.revision = 0xFFFFFFFFFFFFFFFEull;
        u->sync.strategy = 2;
        u->sync.n = 2;
        u->sync.tensors = tensors;
        break;
    case C2M_COLL_INIT:
        u->coll_init.tag = 0x1122334455667788ull;
        u->coll_init.count = 0x8877665544332211ull;
        u->coll_init.dtype = 9;
        u->coll_init.op = 4;
        u->coll_init.quant_algo = 2;
        u->coll_init.quant_dtype = 250;
        u->coll_init.kind = 4;
        u->coll_init.flags = 7;
        u->coll_init.rank_key = 0x0A0B0C0D0E0F1011ull;
        u->coll_init.capacity = 0x8000000000000001ull;
        u->coll_init.max_world = 4096;
        u->coll_init.hash = 0xFEDCBA9876543210ull;
        u->coll_init.algo = WIRE_ALGO_RHD;
        u->coll_init.grant_seq = 0x0102030405060708ull;
        break;
    case C2M_COLL_DONE: case M2C_COLL_ABORT: case M2C_COLL_COMPLETE: case M2C_COLL_REVOKE:
        u->coll.tag = 0xABCDEF0123456789ull + t;
        u->coll.op_seq = 0x0000000100000002ull * t;
        u->coll.ok = t == M2C_COLL_COMPLETE;
        u->coll.next_tag = 0x7000000000000007ull;
        u->coll.next_seq = 0x0000000300000004ull;
        u->coll.slots = 0x8000000000000003ull;
        break;
    case M2C_WELCOME: case C2M_PEER_UNREACHABLE:
        fill(u->welcome.uuid, 16, (uint8_t)t);
        break;
    case M2C_ESTABLISH_P2P:
        u->establish.world = WORLD;
        u->establish.n = 3;
        u->establish.peers = peers;
        break;
    case M2C_TOPOLOGY_DONE:
        u->topo_done.ok = 1;
        u->topo_done.world = WORLD;
        break;
    case M2C_SS_PLAN:
        u->ss_plan.status = SS_CONFLICT;
        u->ss_plan.revision = 0x0102030405060708ull;
        u->ss_plan.nsrc = 2;
        u->ss_plan.sources[0] = peers[1];
        u->ss_plan.sources[1] = peers[0];
        u->ss_plan.n = 2;
        u->ss_plan.fetch = tensors;
        u->ss_plan.holders = holders;
        u->ss_plan.nranges = 3;
        u->ss_plan.ranges = ranges;
        break;
    case M2C_COLL_COMMENCE:
        u->commence.tag = 42;
        u->commence.op_seq = 0x100000000ull;
        u->commence.slots = 0x8000000000000081ull;
        u->commence.world = WORLD;
        u->commence.n = 3;
        u->commence.ring = ring;
        u->commence.kind = 3;
        u->commence.root = 2;
        u->commence.members = members;
        u->commence.algo = WIRE_ALGO_RHD;
        break;
    case M2C_COLL_REJECT:
        u->reject.tag = 0x7FFFFFFFFFFFFFFFull;
        u->reject.reason = REJECT_CONFLICT;
        snprintf(u->reject.detail, sizeof u->reject.detail, "no member is the root");
        break;
    case M2C_KICK: case M2C_SHUTDOWN:
        snprintf(u->kick.reason, sizeof u->kick.reason, "%s: protocol mismatch", wire_type_name(t));
        break;
    case M2C_BENCH_REQUEST:
        u->bench_req.duration_ms = 1500;
        u->bench_req.n = 2;
        u->bench_req.peers = peers + 1;
        break;
    case C2M_BENCH_RESULT:
        u->bench_res.n = 2;
        u->bench_res.results = bw;
        break;
    case M2C_RESUMED:
        u->resumed.ok = 1;
        u->resumed.world = WORLD;
        u->resumed.revision = 77;
        break;
    case M2C_CHALLENGE:
        fill(u->challenge.nonce, 32, 0xC3);
        break;
    case C2M_RENDEZVOUS:
        u->rdv_req.req = 0x01020304u;
        fill(u->rdv_req.target, 16, 0x41);
        u->rdv_req.punch_failed = 1;
        break;
    case C2M_EDGES:
        u->edges.n = 2;
        u->edges.e = edges;
        break;
    case M2C_RENDEZVOUS:
        u->rdv.req = 0x0A0B0C0Du;
        fill(u->rdv.peer, 16, 0x42);
        u->rdv.mode = WIRE_RDV_PUNCH;
        u->rdv.role = WIRE_RDV_TARGET;
        u->rdv.has_ip = 1;
        u->rdv.ip = IP4;
        u->rdv.port = 61001;
        u->rdv.delay_ms = 200;
        fill(u->rdv.token, 32, 0x43);
        snprintf(u->rdv.reason, sizeof u->rdv.reason, "no relay");
        u->rdv.index = 3;
        break;
    default: /* the payload-less types */
        break;
    }
    return m;
}

/* Every message type of version 12 and its frame: u32 body length, u16 type, payload. */
static const struct golden {
    uint16_t type;
    const char *hex;
} GOLDEN[] = {
{1, /* HELLO */
 "0000008c00015043434c000cdeadbeefbc15010000010620010db800000000000000000000ab09052a4f7499bee3082d"
 "52779cc1e60b30557a9fc4e90e33587da2c7ec11365b8008776f726b65722d374d7297bce1062b50759abfe4092e5378"
 "9dc2e70c31567ba0c5ea0f34597ea3c8ed12375c81a6cbf0153a5f84a9cef3183d6287acd1f61b40658aafd4f91e4368"},
{2, /* UPDATE_TOPOLOGY */
 "000000020002"},
{3, /* P2P_ESTABLISHED */
 "000000030003a3"},
{4, /* PEERS_PENDING_VOTE */
 "000000020004"},
{5, /* SYNC_SHARED_STATE */
 "000000510005fffffffffffffffe02000000020e6c617965722e302e77656967687401000000000123456789f00dface"
 "cafebeef0e6c617965722e312e776569676874040100000002468acf12f00dfbcecafebeef"},
{6, /* SS_DIST_DONE */
 "000000030006a6"},
{7, /* COLL_INIT */
 "0000003d000711223344556677888877665544332211090402fa04070a0b0c0d0e0f1011800000000000000100001000"
 "fedcba9876543210020102030405060708"},
{8, /* COLL_DONE */
 "000000130008abcdef0123456791000000080000001000"},
{9, /* OPTIMIZE_TOPOLOGY */
 "000000020009"},
{10, /* HEARTBEAT */
 "00000002000a"},
{11, /* BENCH_RESULT */
 "00000046000b000000027095badf04294e7398bde2072c51769b40c81cd6c8b4395840e38990000000007196bbe0052a"
 "4f7499bee3082d52779cbff00000000000000000000000000000"},
{12, /* PEER_UNREACHABLE */
 "00000012000c0c31567ba0c5ea0f34597ea3c8ed1237"},
{13, /* RESUME */
 "00000145000d5043434c000c00000003c3510000000404c6336407000000000000000000000000052a4f7499bee3082d"
 "52779cc1e60b30557a9fc4e90e33587da2c7ec11365b8008776f726b65722d3799bee3082d52779cc1e60b30557a9fc4"
 "010a0b0c0d0e0f10110000000301264b7095badf04294e7398bde2072c12375c81a6cbf0153a5f84a9cef3183d23486d"
 "92b7dc01264b7095badf04294e000000020e6c617965722e302e77656967687401000000000123456789f00dfacecafe"
 "beef0e6c617965722e312e776569676874040100000002468acf12f00dfbcecafebeef00000002111122223333444400"
 "0000000000005501ffffffffffffffff0102030405060708004d7297bce1062b50759abfe4092e53789dc2e70c31567b"
 "a0c5ea0f34597ea3c8ed12375c81a6cbf0153a5f84a9cef3183d6287acd1f61b40658aafd4f91e4368"},
{14, /* LEAVE */
 "00000002000e"},
{15, /* RENDEZVOUS_REQUEST */
 "00000017000f0102030441668bb0d5fa1f44698eb3d8fd22476c01"},
{16, /* EDGES */
 "0000002800100000000250759abfe4092e53789dc2e70c31567b0151769bc0e50a2f54799ec3e80d32577c02"},
{101, /* WELCOME */
 "000000120065658aafd4f91e43688db2d7fc21466b90"},
{102, /* ESTABLISH_P2P */
 "000000bb006601020304a0b0c0d000000007ffffffff0000000330557a9fc4e90e33587da2c7ec11365b040a00ff0900"
 "00000000000000000000009c40000000000000000000000000000000000000000031567ba0c5ea0f34597ea3c8ed1237"
 "5c0620010db800000000000000000000ab09a09704c6336407000000000000000000000000ee490132577ca1c6eb1035"
 "5a7fa4c9ee13385d040a02ff09000000000000000000000000a4ee0620010db800000000000000000000ab09ee4a02"},
{103, /* TOPOLOGY_DONE */
 "0000001300670101020304a0b0c0d000000007ffffffff"},
{104, /* PEERS_PENDING */
 "000000030068a8"},
{105, /* SS_PLAN */
 "0000010b00690401020304050607080231567ba0c5ea0f34597ea3c8ed12375c0620010db800000000000000000000ab"
 "09a09704c6336407000000000000000000000000ee490130557a9fc4e90e33587da2c7ec11365b040a00ff0900000000"
 "00000000000000009c400000000000000000000000000000000000000000000000020e6c617965722e302e7765696768"
 "7401000000000123456789f00dfacecafebeef0e6c617965722e312e776569676874040100000002468acf12f00dfbce"
 "cafebeef0000000300000002000000030000000000000000000000000000000000000010000000000001000000000000"
 "10000000000000000064000000010100000000000000000000000000000007"},
{106, /* SS_DONE */
 "00000003006aaa"},
{107, /* COLL_COMMENCE */
 "0000008b006b000000000000002a0000000100000000800000000000008101020304a0b0c0d000000007ffffffff0000"
 "000301264b7095badf04294e7398bde2072c12375c81a6cbf0153a5f84a9cef3183d23486d92b7dc01264b7095badf04"
 "294e03000000020000000200000000000000070000000000000000ffffffffff010000000100000000000000000102"},
{108, /* COLL_ABORT */
 "00000013006cabcdef01234567f50000006c000000d800"},
{109, /* COLL_COMPLETE */
 "0000002b006dabcdef01234567f60000006d000000da01700000000000000700000003000000048000000000000003"},
{110, /* COLL_REJECT */
 "00000021006e7fffffffffffffff04156e6f206d656d6265722069732074686520726f6f74"},
{111, /* KICK */
 "0000001a006f174b49434b3a2070726f746f636f6c206d69736d61746368"},
{112, /* OPTIMIZE_DONE */
 "000000030070a0"},
{113, /* HEARTBEAT_ACK */
 "000000020071"},
{114, /* BENCH_REQUEST */
 "000000780072000005dc0000000231567ba0c5ea0f34597ea3c8ed12375c0620010db800000000000000000000ab09a0"
 "9704c6336407000000000000000000000000ee490132577ca1c6eb10355a7fa4c9ee13385d040a02ff09000000000000"
 "000000000000a4ee0620010db800000000000000000000ab09ee4a02"},
{115, /* RESUMED */
 "0000001b00730101020304a0b0c0d000000007ffffffff000000000000004d"},
{116, /* CHALLENGE */
 "000000220074c3e80d32577ca1c6eb10355a7fa4c9ee13385d82a7ccf1163b6085aacff4193e"},
{117, /* SHUTDOWN */
 "0000001e00751b53485554444f574e3a2070726f746f636f6c206d69736d61746368"},
{118, /* COLL_REVOKE */
 "0000001a0076abcdef01234567ff00000076000000ec8000000000000003"},
{119, /* RENDEZVOUS */
 "0000005900770a0b0c0d42678cb1d6fb20456a8fb4d9fe23486d010104c6336407000000000000000000000000ee4900"
 "0000c843688db2d7fc21466b90b5daff24496e93b8dd02274c7196bbe0052a4f7499be086e6f2072656c617903"},
};
#define NGOLDEN (sizeof GOLDEN / sizeof GOLDEN[0])

static char *to_hex(const uint8_t *p, size_t n) {
    char *s = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) snprintf(s + 2 * i, 3, "%02x", p[i]);
    s[2 * n] = 0;
    return s;
}

static uint8_t *from_hex(const char *s, size_t *n) {
    *n = strlen(s) / 2;
    uint8_t *p = malloc(*n ? *n : 1);
    for (size_t i = 0; i < *n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) v = 0x100;
        CHECK(v < 0x100);
        p[i] = (uint8_t)v;
    }
    return p;
}

/* The recorded list names every type the codec knows, once. */
static void test_every_type_recorded(void) {
    int seen[0x10000 / 8] = {0};
    for (size_t i = 0; i < NGOLDEN; i++) {
        uint16_t t = GOLDEN[i].type;
        CHECK(wire_type_is_c2m(t) || wire_type_is_m2c(t));
        CHECK(!(seen[t / 8] >> (t % 8) & 1));
        seen[t / 8] |= 1 << (t % 8);
    }
    size_t known = 0;
    for (uint32_t t = 0; t < 0x10000; t++)
        if (wire_type_is_c2m((uint16_t)t) || wire_type_is_m2c((uint16_t)t)) {
            known++;
            CHECK(seen[t / 8] >> (t % 8) & 1);
        }
    CHECK_EQ_U64(known, NGOLDEN);
}

/* The encoder writes the recorded bytes. */
static void test_encode_matches(void) {
    for (size_t i = 0; i < NGOLDEN; i++) {
        wire_msg_t m = make(GOLDEN[i].type);
        wbuf_t b = {0};
        CHECK(wire_encode(&m, &b) == 0);
        char *got = to_hex(b.data, b.len);
        int same = strcmp(got, GOLDEN[i].hex) == 0;
        CHECK(same);
        if (!same) fprintf(stderr, "  %s:\n    want %s\n    got  %s\n", wire_type_name(GOLDEN[i].type), GOLDEN[i].hex, got);
        free(got);
        wbuf_free(&b);
    }
}

/* The recorded bytes decode to the instance (compared through its encoding), and a HELLO's or
 * RESUME's digest covers the body before the signature. */
static void test_decode_roundtrip(void) {
    for (size_t i = 0; i < NGOLDEN; i++) {
        size_t n;
        uint8_t *frame = from_hex(GOLDEN[i].hex, &n);
        CHECK(n >= 6 && wire_get_u32(frame) == n - 4 && wire_get_u16(frame + 4) == GOLDEN[i].type);
        wire_msg_t o;
        char err[160] = "";
        int rc = wire_decode(frame + 4, n - 4, &o, err, sizeof err);
        CHECK(rc == 0);
        if (rc != 0) {
            fprintf(stderr, "  %s: %s\n", wire_type_name(GOLDEN[i].type), err);
            free(frame);
            continue;
        }
        CHECK_EQ_U64(o.type, GOLDEN[i].type);
        wbuf_t b = {0};
        CHECK(wire_encode(&o, &b) == 0);
        CHECK(b.len == n && memcmp(b.data, frame, n) == 0);
        wbuf_free(&b);
        if (o.type == C2M_HELLO || o.type == C2M_RESUME) {
            const wire_identity_t *id = o.type == C2M_HELLO ? &o.u.hello.id : &o.u.resume.id;
            uint8_t want[32];
            wire_body_digest(frame + 4, n - 4 - WIRE_SIG_LEN, want);
            CHECK(memcmp(id->digest, want, 32) == 0);
        }
        wire_msg_free(&o);
        wire_msg_free(&o); /* idempotent */
        free(frame);
    }
}

/* Prints the current encoder's frames as this file's table rows. */
static int print_table(void) {
    for (uint32_t t = 0; t < 0x10000; t++) {
        if (!wire_type_is_c2m((uint16_t)t) && !wire_type_is_m2c((uint16_t)t)) continue;
        wire_msg_t m = make((uint16_t)t);
        wbuf_t b = {0};
        if (wire_encode(&m, &b) != 0) return 1;
        char *hex = to_hex(b.data, b.len);
        printf("{%u, /* %s */\n \"", t, wire_type_name((uint16_t)t));
        for (size_t k = 0; hex[k]; k++) printf("%s%c", k && k % 96 == 0 ? "\"\n \"" : "", hex[k]);
        printf("\"},\n");
        free(hex);
        wbuf_free(&b);
    }
    return 0;
}

int main(int argc, char **argv) {
    make_arrays();
    if (argc > 1 && strcmp(argv[1], "--print") == 0) return print_table();
    RUN_TEST(test_every_type_recorded);
    RUN_TEST(test_encode_matches);
    RUN_TEST(test_decode_roundtrip);
    TEST_MAIN_END();
}
