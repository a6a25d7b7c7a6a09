/* test_msm_rendezvous.c - the master as rendezvous (master/sm/msm_rendezvous.c, docs/nat.md): a RENDEZVOUS
 * is answered to both sides with the other's observed address and the pair's punch index; a request for an unknown, departed or
 * other-group target, or for itself, is refused to the requester alone; a stranger cannot trigger one; each
 * peer's requests are bounded per window; a failed punch without a relay is refused, with one both sides meet at
 * the relay with one nonce; the reachability verdict,
 * the observed address and the EDGES report reach the views and the peer lists. */
#include "msm_harness.h"
#include "sm/msm_internal.h"

TT_FIXTURE(setup, teardown);

static void observe(uint64_t conn) { msm_set_observed_port(M, conn, (uint16_t)(40000 + conn)); }

static void rendezvous(uint64_t from, uint64_t target, int punch_failed, uint32_t req) {
    wire_msg_t m = {.type = C2M_RENDEZVOUS};
    m.u.rdv_req.req = req;
    uuid_of(target, m.u.rdv_req.target);
    m.u.rdv_req.punch_failed = (uint8_t)punch_failed;
    msm_on_packet(M, from, &m);
}

/* Peers 1 (group 0) and 2 (group g2), both with observed addresses; the log emptied. */
static void two_peers_in(uint32_t g2) {
    connect_(1);
    observe(1);
    hello_g(1, 0, 1);
    connect_(2);
    observe(2);
    hello_g(2, g2, 1);
    clear_log();
}
static void two_peers(void) { two_peers_in(0); }

/* Whether peer 1's last answer is a refusal saying `why`, and peer 2 heard nothing. */
static int refused(const char *why) {
    const wire_msg_t *d = last_to(1, M2C_RENDEZVOUS);
    return d && d->u.rdv.mode == WIRE_RDV_REFUSED && strstr(d->u.rdv.reason, why) && count_to(2, M2C_RENDEZVOUS) == 0;
}

static void test_punch_answers_both(void) {
    two_peers();
    rendezvous(1, 2, 0, 7);
    const wire_msg_t *d = last_to(1, M2C_RENDEZVOUS), *t = last_to(2, M2C_RENDEZVOUS);
    CHECK(d && t);
    CHECK_EQ_U64(d->u.rdv.mode, WIRE_RDV_PUNCH);
    CHECK_EQ_U64(d->u.rdv.role, WIRE_RDV_DIALER);
    CHECK_EQ_U64(d->u.rdv.req, 7);
    CHECK(is_uuid_of(d->u.rdv.peer, 2));
    CHECK_EQ_U64(d->u.rdv.port, 40002); /* the target's observed address */
    CHECK(d->u.rdv.has_ip && d->u.rdv.ip.ipv4.data[3] == 2);
    CHECK_EQ_U64(t->u.rdv.mode, WIRE_RDV_PUNCH);
    CHECK_EQ_U64(t->u.rdv.role, WIRE_RDV_TARGET);
    CHECK(is_uuid_of(t->u.rdv.peer, 1));
    CHECK_EQ_U64(t->u.rdv.port, 40001);
    CHECK_EQ_U64(t->u.rdv.delay_ms, d->u.rdv.delay_ms); /* both dial at the same moment */
    CHECK(!kicked(1) && !kicked(2));
}

/* A pair's punches get distinct indexes whichever side asks (both sides told the same one), 0 first, rolling
 * over after MSM_PUNCH_INDEXES; another pair counts on its own. */
static void test_punch_index_per_pair(void) {
    two_peers();
    connect_(3);
    observe(3);
    hello_g(3, 0, 1);
    for (uint32_t k = 0; k < MSM_PUNCH_INDEXES + 2; k++) {
        clear_log();
        if (k % 2) rendezvous(2, 1, 0, k);
        else rendezvous(1, 2, 0, k);
        const wire_msg_t *a = last_to(1, M2C_RENDEZVOUS), *b = last_to(2, M2C_RENDEZVOUS);
        CHECK(a && b && a->u.rdv.mode == WIRE_RDV_PUNCH && b->u.rdv.mode == WIRE_RDV_PUNCH);
        CHECK(a && b && a->u.rdv.index == k % MSM_PUNCH_INDEXES && b->u.rdv.index == a->u.rdv.index);
        if (k == 2) {
            clear_log();
            rendezvous(3, 1, 0, 99);
            const wire_msg_t *c = last_to(3, M2C_RENDEZVOUS);
            CHECK(c && c->u.rdv.mode == WIRE_RDV_PUNCH && c->u.rdv.index == 0);
        }
    }
}

static void test_unknown_and_departed_targets_refused(void) {
    two_peers();
    rendezvous(1, 9, 0, 1); /* never registered */
    const wire_msg_t *d = last_to(1, M2C_RENDEZVOUS);
    CHECK(d && d->u.rdv.mode == WIRE_RDV_REFUSED && strstr(d->u.rdv.reason, "not a registered peer"));
    CHECK_EQ_U64(d->u.rdv.req, 1);
    disconnect(2);
    clear_log();
    rendezvous(1, 2, 0, 2); /* departed */
    d = last_to(1, M2C_RENDEZVOUS);
    CHECK(d && d->u.rdv.mode == WIRE_RDV_REFUSED && strstr(d->u.rdv.reason, "departed"));
    CHECK_EQ_U64(total_sends(), 1); /* the requester alone is told */
    rendezvous(1, 1, 0, 3);
    d = last_to(1, M2C_RENDEZVOUS);
    CHECK(d && d->u.rdv.mode == WIRE_RDV_REFUSED && strstr(d->u.rdv.reason, "itself"));
    CHECK(!kicked(1));
}

static void test_other_group_refused(void) {
    two_peers_in(5);
    rendezvous(1, 2, 0, 1);
    CHECK(refused("another peer group"));
}

static void test_stranger_cannot_trigger(void) {
    two_peers();
    connect_(3); /* no HELLO: a stranger */
    clear_log();
    rendezvous(3, 2, 0, 1);
    CHECK_EQ_U64(count_type(M2C_RENDEZVOUS), 0);
    CHECK(kicked(3));
    CHECK(!closed_in_log(2));
}

static void test_rate_bounded(void) {
    two_peers();
    msm_set_time(M, 1000);
    for (uint32_t i = 0; i < MSM_RDV_PER_WINDOW; i++) rendezvous(1, 2, 0, i + 1);
    CHECK_EQ_U64(count_to(2, M2C_RENDEZVOUS), MSM_RDV_PER_WINDOW);
    rendezvous(1, 2, 0, 999);
    const wire_msg_t *d = last_to(1, M2C_RENDEZVOUS);
    CHECK(d && d->u.rdv.mode == WIRE_RDV_REFUSED && d->u.rdv.req == 999 && strstr(d->u.rdv.reason, "too many"));
    CHECK_EQ_U64(count_to(2, M2C_RENDEZVOUS), MSM_RDV_PER_WINDOW); /* the target is not bothered */
    msm_set_time(M, 1000 + MSM_RDV_WINDOW_MS);
    rendezvous(1, 2, 0, 1000);
    CHECK_EQ_U64(last_to(1, M2C_RENDEZVOUS)->u.rdv.mode, WIRE_RDV_PUNCH); /* a new window */
    CHECK(!kicked(1));
}

static void test_failed_punch_without_relay_refused(void) {
    two_peers();
    rendezvous(1, 2, 1, 4);
    CHECK(refused("no relay"));
}

static void test_failed_punch_meets_at_relay(void) {
    two_peers();
    const ccoip_socket_address_t relays[2] = {{.inet = {.protocol = inetIPv4, .ipv4.data = {192, 0, 2, 1}}, .port = 48153},
                                              {.inet = {.protocol = inetIPv4, .ipv4.data = {192, 0, 2, 2}}, .port = 48153}};
    CHECK(msm_set_relays(M, relays, 2) == 0);
    rendezvous(1, 2, 0, 5); /* a punch first, even with relays */
    CHECK_EQ_U64(last_to(1, M2C_RENDEZVOUS)->u.rdv.mode, WIRE_RDV_PUNCH);
    const uint8_t nonce[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1};
    msm_set_rendezvous_nonce(M, nonce);
    rendezvous(1, 2, 1, 6);
    const wire_msg_t *d = last_to(1, M2C_RENDEZVOUS), *t = last_to(2, M2C_RENDEZVOUS);
    CHECK(d && t && d->u.rdv.mode == WIRE_RDV_RELAY && t->u.rdv.mode == WIRE_RDV_RELAY);
    CHECK(d && t && d->u.rdv.role == WIRE_RDV_DIALER && t->u.rdv.role == WIRE_RDV_TARGET && d->u.rdv.req == 6);
    CHECK(d && t && addr_ip_equal(&d->u.rdv.ip, &t->u.rdv.ip) && d->u.rdv.port == 48153 && t->u.rdv.port == 48153);
    CHECK(d && t && memcmp(d->u.rdv.token, nonce, 16) == 0 && memcmp(t->u.rdv.token, nonce, 16) == 0);
    CHECK(d && t && is_uuid_of(d->u.rdv.peer, 2) && is_uuid_of(t->u.rdv.peer, 1));
    /* a pair without an observed address goes to the relay at once */
    connect_(3);
    hello_g(3, 0, 1);
    rendezvous(1, 3, 0, 7);
    CHECK_EQ_U64(last_to(3, M2C_RENDEZVOUS)->u.rdv.mode, WIRE_RDV_RELAY);
}

static void test_views_and_peer_lists(void) {
    two_peers();
    CHECK(msm_probe_addr(M, 1, &(ccoip_socket_address_t){0}) == 0);
    connect_(3);
    CHECK(msm_probe_addr(M, 3, &(ccoip_socket_address_t){0}) != 0); /* not registered */
    msm_on_reachable(M, 2, 0);
    msm_on_reachable(M, 1, 1);
    msm_peer_view_t v;
    CHECK(view_of(2, &v) == 0 && v.reach == WIRE_REACH_NO && v.obs_port == 40002);
    CHECK(view_of(1, &v) == 0 && v.reach == WIRE_REACH_YES);
    wire_edge_t e = {.kind = WIRE_EDGE_PUNCHED};
    uuid_of(2, e.uuid);
    wire_msg_t m = {.type = C2M_EDGES};
    m.u.edges.n = 1;
    m.u.edges.e = &e;
    msm_on_packet(M, 1, &m);
    CHECK(view_of(1, &v) == 0 && v.nedges == 1 && v.edges[0].kind == WIRE_EDGE_PUNCHED);
    CHECK(!kicked(1));
}

static void test_peer_lists_carry_them(void) {
    make_group(1);
    connect_(2);
    observe(2);
    hello_g(2, 0, 1);
    msm_on_reachable(M, 2, 0);
    clear_log();
    pkt(1, C2M_UPDATE_TOPOLOGY);
    const wire_msg_t *est = last_to(1, M2C_ESTABLISH_P2P);
    CHECK(est != NULL);
    int seen = 0;
    for (uint32_t i = 0; est && i < est->u.establish.n; i++) {
        const wire_peer_t *p = &est->u.establish.peers[i];
        if (!is_uuid_of(p->uuid, 2)) continue;
        seen = 1;
        CHECK(p->has_obs && p->obs_port == 40002 && p->reach == WIRE_REACH_NO);
    }
    CHECK(seen);
}

/* The solver's matrix: a pair reported relayed (by either side, or both) costs MSM_RELAYED_BW_FACTOR of its
 * measured bandwidth, once, in both directions; the other pairs keep theirs. */
static void test_relayed_edges_penalized(void) {
    make_group(3);
    wire_edge_t e = {.kind = WIRE_EDGE_RELAYED};
    uuid_of(3, e.uuid);
    wire_msg_t m = {.type = C2M_EDGES};
    m.u.edges.n = 1;
    m.u.edges.e = &e;
    msm_on_packet(M, 1, &m); /* 1 says its edge with 3 is relayed ... */
    uuid_of(1, e.uuid);
    msm_on_packet(M, 3, &m); /* ... and so does 3 */
    msm_group_t *g = msm_group(M, 0, 0);
    CHECK(g && g->ring_len == 3);
    if (!g || g->ring_len != 3) return;
    double bw[9];
    for (int k = 0; k < 9; k++) bw[k] = 1000;
    msm_penalize_relayed(M, g, bw, 3);
    int one = -1, three = -1;
    for (int i = 0; i < 3; i++) {
        if (g->ring[i] == 1) one = i;
        if (g->ring[i] == 3) three = i;
    }
    CHECK(one >= 0 && three >= 0);
    for (int i = 0; one >= 0 && three >= 0 && i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int pair = (i == one && j == three) || (i == three && j == one);
            CHECK(bw[i * 3 + j] == (pair ? 1000 * MSM_RELAYED_BW_FACTOR : 1000));
        }
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_punch_answers_both);
    RUN_TEST(test_punch_index_per_pair);
    RUN_TEST(test_unknown_and_departed_targets_refused);
    RUN_TEST(test_other_group_refused);
    RUN_TEST(test_stranger_cannot_trigger);
    RUN_TEST(test_rate_bounded);
    RUN_TEST(test_failed_punch_without_relay_refused);
    RUN_TEST(test_failed_punch_meets_at_relay);
    RUN_TEST(test_views_and_peer_lists);
    RUN_TEST(test_peer_lists_carry_them);
    RUN_TEST(test_relayed_edges_penalized);
    TEST_MAIN_END();
}
