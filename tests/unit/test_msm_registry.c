/* test_msm_registry.c - the master's pure state machine, operation kind by kind:
 * registration (HELLO and its errors, bootstrap), peer groups, unreachable-peer reports and the read-only views. Driven event by event through the shared harness (msm_harness.h). */
#include "msm_harness.h"

TT_FIXTURE(setup, teardown);

/* ---------- handshake and kicks ---------- */

static void test_hello_errors(void) {
    make_group(1);
    connect_(10);
    hello_full(10, WIRE_MAGIC ^ 1, WIRE_VERSION, 0, 1234, 1);
    CHECK(kicked(10));
    connect_(11);
    hello_full(11, WIRE_MAGIC, WIRE_VERSION + 1, 0, 1234, 1);
    CHECK(kicked(11));
    CHECK(strstr(kick_reason(11), "version") != NULL);
    connect_(12);
    hello_full(12, WIRE_MAGIC, WIRE_VERSION, 0, 0, 1); /* p2p port 0 */
    CHECK(kicked(12));
    connect_(13);
    pkt(13, C2M_UPDATE_TOPOLOGY); /* first packet is not HELLO */
    CHECK(kicked(13));
    CHECK(strstr(kick_reason(13), "HELLO") != NULL);
    connect_(14);
    coll_init(14, 1);
    CHECK(kicked(14));
    for (uint64_t c = 10; c <= 14; c++) CHECK_EQ_U64(count_type(M2C_WELCOME), 0);

    connect_(15);
    hello_g(15, 0, 1);
    const wire_msg_t *w = last_to(15, M2C_WELCOME);
    CHECK(w && is_uuid_of(w->u.welcome.uuid, 15));
    CHECK(!closed_in_log(15));
    hello_g(15, 0, 1); /* duplicate */
    CHECK(kicked(15));
    CHECK(strstr(kick_reason(15), "duplicate") != NULL);

    /* registered but not accepted: run-level packets are refused */
    uint16_t early[] = {C2M_COLL_INIT, C2M_UPDATE_TOPOLOGY, C2M_PEERS_PENDING, C2M_SYNC_SHARED_STATE,
                        C2M_SS_DIST_DONE, C2M_COLL_DONE, C2M_OPTIMIZE_TOPOLOGY};
    for (size_t i = 0; i < sizeof early / sizeof early[0]; i++) {
        uint64_t c = 20 + i;
        join(c);
        CHECK_EQ_U64(count_to(c, M2C_WELCOME), 1);
        pkt(c, early[i]);
        CHECK(kicked(c));
    }
    /* P2P_ESTABLISHED outside of a round */
    join(30);
    p2p_ok(30, 1);
    CHECK(kicked(30));
    /* a registered peer's heartbeat is answered */
    join(31);
    pkt(31, C2M_HEARTBEAT);
    CHECK_EQ_U64(count_to(31, M2C_HEARTBEAT), 1);
    CHECK(!closed_in_log(31));
    /* packets from forgotten or unknown connections are ignored */
    int before = nevs;
    pkt(10, C2M_HELLO);
    pkt(999, C2M_UPDATE_TOPOLOGY);
    disconnect(999);
    disconnect(10);
    CHECK_EQ_U64(nevs, before);

    /* the accepted peer was never bothered */
    CHECK_EQ_U64(sends_to(1), 0);
    CHECK(is_accepted(1));
    msm_stats_t st;
    msm_get_stats(M, &st);
    /* conns 10 and 11 were refused for the protocol (magic, version): counted apart from kicks */
    CHECK_EQ_U64(st.peers_kicked, 3 + 1 + 7 + 1);
    CHECK_EQ_U64(st.refused_magic, 1);
    CHECK_EQ_U64(st.refused_version, 1);
    CHECK_EQ_U64(st.accepted, 1);
    CHECK_EQ_U64(st.registered, 1); /* conn 31 */
    CHECK_EQ_U64(msm_peer_count(M), 2);
    /* the run goes on: the accepted peer can still complete an update round that admits 31 */
    pkt(1, C2M_UPDATE_TOPOLOGY);
    CHECK_EQ_U64(count_to(31, M2C_ESTABLISH_P2P), 1);
    p2p_ok(1, 1);
    p2p_ok(31, 1);
    CHECK(is_accepted(31));
}

/* ---------- bootstrap and accept rounds ---------- */

static void test_bootstrap(void) {
    connect_(1);
    CHECK_EQ_U64(total_sends(), 1); /* the CHALLENGE, first on every connection */
    CHECK(evs[0].msg.type == M2C_CHALLENGE);
    uint8_t n1[32];
    nonce_of(1, n1);
    CHECK(memcmp(evs[0].msg.u.challenge.nonce, n1, 32) == 0);
    CHECK(strcmp(state_of(1), "connecting") == 0);
    hello_g(1, 0, 4);
    CHECK_EQ_U64(count_to(1, M2C_WELCOME), 1);
    const wire_msg_t *e = last_to(1, M2C_ESTABLISH_P2P);
    CHECK(e != NULL);
    CHECK(evs[1].msg.type == M2C_WELCOME); /* WELCOME next */
    CHECK(is_uuid_of(evs[1].msg.u.welcome.uuid, 1)); /* the uuid of its key */
    if (e) {
        CHECK_EQ_U64(e->u.establish.n, 1);
        CHECK(is_uuid_of(e->u.establish.peers[0].uuid, 1));
        CHECK(e->u.establish.peers[0].ip.ipv4.data[0] == 10 && e->u.establish.peers[0].ip.ipv4.data[3] == 1);
        CHECK_EQ_U64(e->u.establish.peers[0].port, port_of(1));
        CHECK_EQ_U64(e->u.establish.world.group_world_size, 1);
    }
    CHECK(!is_accepted(1));
    CHECK(strcmp(state_of(1), "establishing") == 0);
    CHECK_EQ_U64(count_to(1, M2C_TOPOLOGY_DONE), 0);
    p2p_ok(1, 1);
    const wire_msg_t *d = last_to(1, M2C_TOPOLOGY_DONE);
    CHECK(d && d->u.topo_done.ok == 1);
    if (d) check_world(&d->u.topo_done.world, 1, 1, 1, 1);
    CHECK(is_accepted(1));
    CHECK(strcmp(state_of(1), "idle") == 0);
    uint64_t ring[4];
    CHECK_EQ_U64(msm_group_ring(M, 0, ring, 4), 1);
    CHECK_EQ_U64(ring[0], 1);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK(st.accepted == 1 && st.registered == 0 && st.groups == 1);
}

/* A peer behind NAT announces where its neighbours dial it: the ring carries that address and port, not the
 * address its control connection came from (10.0.0.N here). */
static void test_advertised_address(void) {
    connect_(1);
    wire_msg_t h = {.type = C2M_HELLO};
    h.u.hello.magic = WIRE_MAGIC;
    h.u.hello.version = WIRE_VERSION;
    h.u.hello.p2p_port = 41000;
    h.u.hello.pool_size = 1;
    h.u.hello.has_adv = 1;
    h.u.hello.adv_ip = (ccoip_inet_address_t){.protocol = inetIPv6, .ipv6.data = {0x20, 0x01, 0x0d, 0xb8, [15] = 7}};
    deliver_signed(1, &h);
    const wire_msg_t *e = last_to(1, M2C_ESTABLISH_P2P);
    CHECK(e && e->u.establish.n == 1);
    if (e && e->u.establish.n == 1) {
        const wire_peer_t *p = &e->u.establish.peers[0];
        CHECK(p->ip.protocol == inetIPv6 && memcmp(p->ip.ipv6.data, h.u.hello.adv_ip.ipv6.data, 16) == 0);
        CHECK_EQ_U64(p->port, 41000);
    }
    /* one without an advertised address keeps the connection's */
    connect_(2);
    hello_g(2, 0, 1);
    msm_peer_view_t v;
    CHECK(view_of(2, &v) == 0 && v.ip.protocol == inetIPv4 && v.ip.ipv4.data[0] == 10 && v.ip.ipv4.data[3] == 2);
}

/* A peer on the master's host (it connected over loopback) is dialled there by the peers on that host, and at the
 * master's address by a peer elsewhere: the address that peer reached the master on. */
static void test_loopback_peer_seen_from_elsewhere(void) {
    const ccoip_inet_address_t lo = {.protocol = inetIPv4, .ipv4.data = {127, 0, 0, 1}};
    uint8_t n[32];
    nonce_of(1, n);
    msm_on_connect(M, 1, &lo, &lo, n);
    hello_g(1, 0, 1);
    p2p_ok(1, 1);
    CHECK(is_accepted(1));
    connect_(2); /* from 10.0.0.2 to the master's 10.0.0.254 */
    hello_g(2, 0, 1);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    const wire_msg_t *to1 = last_to(1, M2C_ESTABLISH_P2P), *to2 = last_to(2, M2C_ESTABLISH_P2P);
    CHECK(to1 && to2 && to1->u.establish.n == 2 && to2->u.establish.n == 2);
    for (uint32_t i = 0; to1 && to2 && i < 2 && i < to1->u.establish.n && i < to2->u.establish.n; i++) {
        const wire_peer_t *a = &to1->u.establish.peers[i], *b = &to2->u.establish.peers[i];
        if (is_uuid_of(a->uuid, 1)) {
            CHECK(a->ip.ipv4.data[0] == 127);                                /* itself, as it connected */
            CHECK(b->ip.ipv4.data[0] == 10 && b->ip.ipv4.data[3] == 254);     /* the master's host */
            CHECK_EQ_U64(b->port, port_of(1));
        } else {
            CHECK(a->ip.ipv4.data[0] == 10 && a->ip.ipv4.data[3] == 2); /* a remote peer is never rewritten */
            CHECK(b->ip.ipv4.data[0] == 10 && b->ip.ipv4.data[3] == 2);
        }
    }
}

static void report(uint64_t from, uint64_t about) {
    wire_msg_t m = {.type = C2M_PEER_UNREACHABLE};
    uuid_of(about, m.u.welcome.uuid);
    msm_on_packet(M, from, &m);
}

/* A peer is removed only when two distinct ring neighbours could not reach it. */
static void test_unreachable_reports(void) {
    make_group(3);
    report(1, 2);
    report(1, 2); /* the same reporter twice counts once */
    CHECK(!kicked(2));
    report(2, 2); /* about oneself: ignored */
    report(3, 2);
    CHECK(kicked(2));
    CHECK(!kicked(1) && !kicked(3));
}

/* a successful collective proves connectivity: old reports are forgotten */
static void test_unreachable_forgotten_after_collective(void) {
    make_group(3);
    report(1, 2);
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 5);
    uint64_t seq = commence_of(1, 5) ? commence_of(1, 5)->u.commence.op_seq : 0;
    for (uint64_t c = 1; c <= 3; c++) coll_done(c, 5, seq, 1);
    report(3, 2);
    CHECK(!kicked(2));
}

/* two peers blaming each other: nobody can tell who is at fault, nobody is kicked */
static void test_unreachable_mutual_blame(void) {
    make_group(2);
    report(1, 2);
    report(2, 1);
    CHECK(!kicked(1) && !kicked(2));
}

static void test_multi_group(void) {
    make_group_ex(1, 1, 0, 1);
    connect_(2);
    hello_g(2, 0, 1);
    connect_(3);
    hello_g(3, 7, 1);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    uint64_t g0[] = {1, 2}, g7[] = {3};
    check_establish_ring(1, g0, 2);
    check_establish_ring(2, g0, 2);
    check_establish_ring(3, g7, 1);
    for (uint64_t c = 1; c <= 3; c++) p2p_ok(c, 1);
    const wire_msg_t *d = last_to(1, M2C_TOPOLOGY_DONE);
    if (d) check_world(&d->u.topo_done.world, 3, 2, 2, 2);
    d = last_to(3, M2C_TOPOLOGY_DONE);
    if (d) check_world(&d->u.topo_done.world, 3, 1, 2, 2);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK(st.groups == 2 && st.accepted == 3);
    /* collectives are per group: group 0 does not wait for group 7 */
    clear_log();
    coll_init(1, 5);
    coll_init(2, 5);
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 2);
    coll_init(3, 5);
    const wire_msg_t *r = last_to(3, M2C_COLL_REJECT);
    CHECK(r && r->u.reject.reason == REJECT_TOO_FEW_PEERS && r->u.reject.tag == 5);
    /* run-wide votes span groups */
    clear_log();
    pkt(1, C2M_PEERS_PENDING);
    pkt(2, C2M_PEERS_PENDING);
    CHECK_EQ_U64(count_type(M2C_PEERS_PENDING), 0);
    pkt(3, C2M_PEERS_PENDING);
    CHECK_EQ_U64(count_type(M2C_PEERS_PENDING), 3);
}

/* ---------- views ---------- */

static void test_views(void) {
    make_group(2);
    join(3);
    connect_(4);
    CHECK_EQ_U64(msm_peer_count(M), 4);
    msm_peer_view_t v;
    CHECK(msm_peer_view(M, -1, &v) == -PERR_INVALID);
    CHECK(msm_peer_view(M, 4, &v) == -PERR_INVALID);
    CHECK(view_of(1, &v) == 0);
    CHECK(v.accepted == 1 && v.group == 0 && v.p2p_port == port_of(1) && v.ip.ipv4.data[0] == 10 && v.ip.ipv4.data[3] == 1 &&
          is_uuid_of(v.uuid, 1) && strcmp(v.state, "idle") == 0);
    CHECK(view_of(3, &v) == 0 && !v.accepted && strcmp(v.state, "registered") == 0);
    CHECK(view_of(4, &v) == 0 && !v.accepted && strcmp(v.state, "connecting") == 0);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK(st.registered == 1 && st.accepted == 2 && st.groups == 1 && st.peers_kicked == 0);
    disconnect(1);
    disconnect(2);
    msm_get_stats(M, &st);
    CHECK(st.accepted == 0 && st.groups == 0);
    CHECK(view_of(1, &v) == -1);
}

/* Log lines name a peer by its uuid prefix, its name when it has one, and its address once registered, by its
 * connection before. */
static void test_names(void) {
    join(3); /* 10.0.0.3, p2p port 20003, no name */
    connect_(4);
    connect_(5);
    next_name = "worker-5";
    hello_g(5, 0, 1);
    uint8_t u3[16], u5[16];
    uuid_of(3, u3);
    uuid_of(5, u5);
    char name[MSM_NAME_MAX], want[MSM_NAME_MAX];
    snprintf(want, sizeof want, "peer %02x%02x%02x%02x (10.0.0.3:20003)", u3[0], u3[1], u3[2], u3[3]);
    CHECK(strcmp(msm_conn_name(M, 3, name), want) == 0);
    snprintf(want, sizeof want, "peer %02x%02x%02x%02x \"worker-5\" (10.0.0.5:20005)", u5[0], u5[1], u5[2], u5[3]);
    CHECK(strcmp(msm_conn_name(M, 5, name), want) == 0);
    msm_peer_view_t v;
    CHECK(view_of(5, &v) == 0 && strcmp(v.name, "worker-5") == 0);
    CHECK(strcmp(msm_conn_name(M, 4, name), "peer conn=4 (10.0.0.4)") == 0);
    CHECK(strcmp(msm_conn_name(M, 99, name), "conn=99") == 0);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_hello_errors);
    RUN_TEST(test_bootstrap);
    RUN_TEST(test_advertised_address);
    RUN_TEST(test_loopback_peer_seen_from_elsewhere);
    RUN_TEST(test_unreachable_reports);
    RUN_TEST(test_unreachable_forgotten_after_collective);
    RUN_TEST(test_unreachable_mutual_blame);
    RUN_TEST(test_multi_group);
    RUN_TEST(test_views);
    RUN_TEST(test_names);
    TEST_MAIN_END();
}
