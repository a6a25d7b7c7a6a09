/* test_msm_identity.c - who a peer is (master/sm/msm_identity.c, docs/protocol.md "Identity"): every connection
 * gets a CHALLENGE; a HELLO or RESUME must sign it with the key its uuid is derived from. A forged signature,
 * a HELLO replayed from another connection, a body changed after signing and a RESUME claiming another key's
 * uuid are refused; a proven peer replaces its own stale connection; an attacker cannot take a member's uuid
 * at a master restart; the allow-list admits only listed keys and kicks a removed one. */
#include "msm_harness.h"

TT_FIXTURE(setup, teardown);

static const int RING2[] = {1, 2};

/* HELLO fields of conn (group 0, its port, pool 1); the identity is added when it is signed. */
static wire_msg_t hello_of(uint64_t conn) {
    wire_msg_t h = {.type = C2M_HELLO};
    h.u.hello.magic = WIRE_MAGIC;
    h.u.hello.version = WIRE_VERSION;
    h.u.hello.p2p_port = port_of(conn);
    h.u.hello.pool_size = 1;
    return h;
}

/* RESUME of peer `who` (its uuid, revision 5, ring of peers ring[0..nr)). */
static wire_msg_t resume_of(uint64_t who, uint8_t (*ring)[16], const int *peers, int nr) {
    wire_msg_t m = {.type = C2M_RESUME};
    m.u.resume.magic = WIRE_MAGIC;
    m.u.resume.version = WIRE_VERSION;
    m.u.resume.p2p_port = port_of(who);
    m.u.resume.pool_size = 1;
    uuid_of(who, m.u.resume.uuid);
    m.u.resume.has_revision = 1;
    m.u.resume.revision = 5;
    for (int i = 0; i < nr; i++) uuid_of((uint64_t)peers[i], ring[i]);
    m.u.resume.nring = (uint32_t)nr;
    m.u.resume.ring = ring;
    return m;
}

static int kick_says(uint64_t conn, const char *what) { return kicked(conn) && strstr(kick_reason(conn), what); }

static void test_valid_hello(void) {
    connect_(1);
    const wire_msg_t *c = last_to(1, M2C_CHALLENGE);
    uint8_t n[32];
    nonce_of(1, n);
    CHECK(c && memcmp(c->u.challenge.nonce, n, 32) == 0);
    next_name = "gpu-node-1";
    wire_msg_t h = hello_of(1);
    deliver_signed(1, &h);
    const wire_msg_t *w = last_to(1, M2C_WELCOME);
    CHECK(w && is_uuid_of(w->u.welcome.uuid, 1)); /* the uuid of its public key */
    msm_peer_view_t v;
    CHECK(view_of(1, &v) == 0 && strcmp(v.name, "gpu-node-1") == 0 && is_uuid_of(v.uuid, 1));
    CHECK(!closed_in_log(1));
}

static void test_forged_signature(void) {
    connect_(1);
    /* peer 2's public key, signed with peer 1's secret key */
    wire_msg_t h = hello_of(1);
    memcpy(h.u.hello.id.pubkey, key_of(2)->pk, 32);
    uint8_t n[32];
    nonce_of(1, n);
    wbuf_t b = {0};
    wire_msg_t d;
    char err[160];
    CHECK(ident_encode_signed(key_of(1), n, &h, &b) == 0);
    CHECK(wire_decode(b.data + 4, b.len - 4, &d, err, sizeof err) == 0);
    msm_on_packet(M, 1, &d);
    wire_msg_free(&d);
    CHECK(kick_says(1, "signature"));
    CHECK_EQ_U64(count_type(M2C_WELCOME), 0);
    /* a body changed after it was signed (another p2p port) */
    connect_(3);
    h = hello_of(3);
    memcpy(h.u.hello.id.pubkey, key_of(3)->pk, 32);
    nonce_of(3, n);
    wbuf_free(&b);
    CHECK(ident_encode_signed(key_of(3), n, &h, &b) == 0);
    uint8_t tampered[512]; /* the body with another p2p port (type, magic, version, group: 12 bytes before it) */
    CHECK(b.len - 4 <= sizeof tampered);
    memcpy(tampered, b.data + 4, b.len - 4);
    wire_put_u16(tampered + 12, (uint16_t)(port_of(3) + 1));
    CHECK(wire_decode(tampered, b.len - 4, &d, err, sizeof err) == 0 && d.u.hello.p2p_port == port_of(3) + 1);
    msm_on_packet(M, 3, &d);
    wire_msg_free(&d);
    wbuf_free(&b);
    CHECK(kick_says(3, "signature"));
    CHECK_EQ_U64(count_type(M2C_WELCOME), 0);
}

static void test_replayed_hello(void) {
    connect_(1);
    wire_msg_t h = hello_of(1);
    deliver_signed(1, &h);
    CHECK_EQ_U64(count_to(1, M2C_WELCOME), 1);
    /* conn 2 replays what peer 1 signed for conn 1's challenge (an old nonce) */
    connect_(2);
    uint8_t old[32];
    nonce_of(1, old);
    h = hello_of(1);
    deliver_signed_as(2, 1, old, &h);
    CHECK(kick_says(2, "signature"));
    CHECK_EQ_U64(count_to(2, M2C_WELCOME), 0);
    CHECK(!closed_in_log(1)); /* the member is untouched */
}

static void test_resume_wrong_uuid(void) {
    uint8_t ring[2][16];
    connect_(3);
    wire_msg_t m = resume_of(3, ring, RING2, 2);
    uuid_of(1, m.u.resume.uuid); /* claims peer 1's uuid, signed with its own key */
    deliver_signed(3, &m);
    CHECK(kick_says(3, "not its public key's"));
    CHECK_EQ_U64(count_type(M2C_RESUMED), 0);
    /* the real peer 1 resumes */
    connect_(1);
    m = resume_of(1, ring, RING2, 2);
    deliver_signed(1, &m);
    CHECK(!closed_in_log(1) && strcmp(state_of(1), "resuming") == 0);
}

/* At a master restart an attacker RESUMEs first with the members' uuids (read from /v1/status): refused; the
 * members then resume, keep their uuids and are rebuilt into the run. */
static void test_takeover_at_restart(void) {
    msm_set_time(M, 1000);
    uint8_t ring[2][16];
    for (uint64_t a = 11; a <= 12; a++) {
        connect_(a);
        wire_msg_t m = resume_of(a - 10, ring, RING2, 2); /* uuid of peer a-10, attacker's key a */
        deliver_signed(a, &m);
        CHECK(kick_says(a, "not its public key's"));
        /* nor with the member's public key and a signature of its own */
        connect_(a + 10);
        m = resume_of(a - 10, ring, RING2, 2);
        memcpy(m.u.resume.id.pubkey, key_of(a - 10)->pk, 32);
        uint8_t n[32];
        nonce_of(a + 10, n);
        wbuf_t b = {0};
        wire_msg_t d;
        char err[160];
        CHECK(ident_encode_signed(key_of(a), n, &m, &b) == 0);
        CHECK(wire_decode(b.data + 4, b.len - 4, &d, err, sizeof err) == 0);
        msm_on_packet(M, a + 10, &d);
        wire_msg_free(&d);
        wbuf_free(&b);
        CHECK(kick_says(a + 10, "signature"));
    }
    for (uint64_t c = 1; c <= 2; c++) {
        connect_(c);
        wire_msg_t m = resume_of(c, ring, RING2, 2);
        deliver_signed(c, &m);
    }
    for (uint64_t c = 1; c <= 2; c++) p2p_ok(c, 1); /* the rebuilt ring is wired before RESUMED */
    for (uint64_t c = 1; c <= 2; c++) {
        const wire_msg_t *r = last_to(c, M2C_RESUMED);
        CHECK(r && r->u.resumed.ok == 1 && r->u.resumed.revision == 5);
        CHECK(is_accepted(c) && !closed_in_log(c));
    }
}

/* A proven peer on a new connection replaces its own registered one (a half-open connection, or a restarted
 * process with its identity file): the old connection is kicked, the new one registers; nobody else moves. */
static void test_proven_duplicate_replaces(void) {
    make_group(2);
    connect_(7);
    uint8_t n[32];
    nonce_of(7, n);
    wire_msg_t h = hello_of(7);
    deliver_signed_as(7, 2, n, &h); /* peer 2's key on conn 7 */
    CHECK(kick_says(2, "replaced"));
    const wire_msg_t *w = last_to(7, M2C_WELCOME);
    CHECK(w && is_uuid_of(w->u.welcome.uuid, 2));
    CHECK(!closed_in_log(7) && !closed_in_log(1) && is_accepted(1));
    CHECK(strcmp(state_of(7), "registered") == 0);
}

/* The same during a rebuild: a second RESUME of peer 5 replaces its first connection. */
static void test_proven_duplicate_replaces_in_rebuild(void) {
    uint8_t ring[2][16], n[32];
    connect_(5);
    wire_msg_t m = resume_of(5, ring, RING2, 2);
    deliver_signed(5, &m);
    connect_(6);
    nonce_of(6, n);
    m = resume_of(5, ring, RING2, 2);
    deliver_signed_as(6, 5, n, &m);
    CHECK(kick_says(5, "replaced") && !closed_in_log(6) && strcmp(state_of(6), "resuming") == 0);
}

static void test_allow_keys(void) {
    uint8_t keys[2][32];
    memcpy(keys[0], key_of(1)->pk, 32);
    memcpy(keys[1], key_of(2)->pk, 32);
    CHECK(msm_set_allowed_keys(M, (const uint8_t (*)[32])keys, 2) == 0);
    make_group(2);
    connect_(3);
    hello_g(3, 0, 1);
    CHECK(kick_says(3, "allow-keys"));
    /* peer 2's key is removed: it is kicked, peer 1 stays */
    CHECK(msm_set_allowed_keys(M, (const uint8_t (*)[32])keys, 1) == 0);
    CHECK(kick_says(2, "removed"));
    CHECK(!closed_in_log(1) && is_accepted(1));
    /* no list: everyone again */
    CHECK(msm_set_allowed_keys(M, NULL, 0) == 0);
    connect_(4);
    hello_g(4, 0, 1);
    CHECK(!closed_in_log(4) && count_to(4, M2C_WELCOME) == 1);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_valid_hello);
    RUN_TEST(test_forged_signature);
    RUN_TEST(test_replayed_hello);
    RUN_TEST(test_resume_wrong_uuid);
    RUN_TEST(test_takeover_at_restart);
    RUN_TEST(test_proven_duplicate_replaces);
    RUN_TEST(test_proven_duplicate_replaces_in_rebuild);
    RUN_TEST(test_allow_keys);
    TEST_MAIN_END();
}
