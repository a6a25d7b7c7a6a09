/* test_msm_resume.c - a restarted master rebuilding the run from RESUMEs
 * (master/sm/msm_resume.c): agreeing peers, a partial return (deadline), a
 * disagreeing or lying revision, a late RESUME, a newcomer during the rebuild,
 * the verdicts on collectives the lost master left unsettled, the bad inputs
 * (version, a uuid claimed with another key, votes before RESUMED); what a
 * stranger cannot do: a
 * RESUME outside the restart window or beyond the caps is a HELLO, nobody is
 * accepted before its rebuilt ring is wired, and the rebuilt revision is one a
 * wired peer holds (a group whose holders are gone forgets it). */
#include "msm_harness.h"

/* ---------- on top of the shared harness: a clock, the old master's uuids, RESUME ---------- */

static uint64_t now;
static uint8_t U[8][16]; /* the uuids of peers 1..n: derived from their keys (msm_harness.h), as the old master knew them */

static void start(void) {
    setup();
    for (int c = 0; c < 8; c++) uuid_of((uint64_t)c, U[c]);
    now = 1000;
    msm_set_time(M, now);
}
TT_FIXTURE(start, teardown);

static int got(uint64_t conn, uint16_t type) { return count_to(conn, type); }
static const wire_msg_t *msg_of(uint64_t conn, uint16_t type) {
    static const wire_msg_t none;
    const wire_msg_t *m = last_to(conn, type);
    return m ? m : &none;
}
static int closed_(uint64_t conn) { return closed_in_log(conn); }

static void tick(uint64_t ms) {
    now += ms;
    msm_set_time(M, now);
    msm_on_tick(M);
}

static wire_tensor_t T = {.key = "w", .dtype = pcclFloat, .count = 4, .hash = 111};

/* conn re-registers: group 0, revision rev (has_rev), hash of its state, the ring of conns ring[0..nr). */
static void resume_full_ops(uint64_t conn, uint16_t version, int has_rev, uint64_t rev, uint64_t hash,
                            const int *ring, int nr, const wire_op_outcome_t *ops, uint32_t nops) {
    connect_(conn);
    uint8_t r[8][16];
    for (int i = 0; i < nr; i++) memcpy(r[i], U[ring[i]], 16);
    wire_tensor_t t = T;
    t.hash = hash;
    wire_msg_t m = {.type = C2M_RESUME};
    m.u.resume.magic = WIRE_MAGIC;
    m.u.resume.version = version;
    m.u.resume.p2p_port = (uint16_t)(40000 + conn);
    m.u.resume.pool_size = 1;
    memcpy(m.u.resume.uuid, U[conn], 16);
    m.u.resume.has_revision = (uint8_t)has_rev;
    m.u.resume.revision = rev;
    m.u.resume.nring = (uint32_t)nr;
    m.u.resume.ring = r;
    m.u.resume.n = 1;
    m.u.resume.tensors = &t;
    m.u.resume.nops = nops;
    m.u.resume.ops = (wire_op_outcome_t *)ops;
    deliver_signed(conn, &m);
}

static void resume_full(uint64_t conn, uint16_t version, int has_rev, uint64_t rev, uint64_t hash, const int *ring,
                        int nr) {
    resume_full_ops(conn, version, has_rev, rev, hash, ring, nr, NULL, 0);
}

/* conn re-registers at revision 5 and lists ops (tag, op_seq, finished). */
static void resume_ops(uint64_t conn, const int *ring, int nr, const wire_op_outcome_t *ops, uint32_t nops) {
    resume_full_ops(conn, WIRE_VERSION, 1, 5, 111, ring, nr, ops, nops);
}

/* Index in the log of the first message of type to conn (-1: none). */
static int first_index(uint64_t conn, uint16_t type) {
    for (int i = 0; i < nevs; i++)
        if (!evs[i].is_close && evs[i].conn == conn && evs[i].msg.type == type) return i;
    return -1;
}

static void resume(uint64_t conn, uint64_t rev, uint64_t hash, const int *ring, int nr) {
    resume_full(conn, WIRE_VERSION, 1, rev, hash, ring, nr);
}

static void sync_hash(uint64_t conn, uint64_t rev, uint64_t hash) {
    wire_tensor_t t = T;
    t.hash = hash;
    wire_msg_t m = {.type = C2M_SYNC_SHARED_STATE};
    m.u.sync.revision = rev;
    m.u.sync.n = 1;
    m.u.sync.tensors = &t;
    msm_on_packet(M, conn, &m);
}

/* conns report their rebuilt ring wired (ok) or not. */
static void wired(const uint64_t *conns, int n, int ok) {
    for (int i = 0; i < n; i++) p2p_ok(conns[i], ok);
}
static const uint64_t C12[] = {1, 2}, C123[] = {1, 2, 3};

/* The ring of the last ESTABLISH_P2P to conn is the old master's uuids of conns ring[0..n). */
static int establish_is(uint64_t conn, const int *ring, int n) {
    const wire_msg_t *e = last_to(conn, M2C_ESTABLISH_P2P);
    if (!e || e->u.establish.n != (uint32_t)n) return 0;
    for (int i = 0; i < n; i++)
        if (memcmp(e->u.establish.peers[i].uuid, U[ring[i]], 16) != 0) return 0;
    return 1;
}

/* ---------- tests ---------- */

static const int RING3[] = {1, 2, 3};

static void test_agreeing_peers(void) {
    resume(2, 5, 111, RING3, 3);
    resume(3, 5, 111, RING3, 3);
    CHECK(got(2, M2C_RESUMED) == 0 && strcmp(state_of(2), "resuming") == 0); /* peer 1 not back yet */
    CHECK(got(2, M2C_ESTABLISH_P2P) == 0 && msm_resume_held(M, 2) > 0);
    resume(1, 5, 111, RING3, 3);
    /* Every peer is back: the ring is wired before anyone is accepted. */
    for (uint64_t c = 1; c <= 3; c++) CHECK(establish_is(c, RING3, 3) && got(c, M2C_RESUMED) == 0 && !is_accepted(c));
    CHECK(msm_resume_held(M, 2) == 0);
    wired(C123, 3, 1);
    for (uint64_t c = 1; c <= 3; c++) {
        CHECK(got(c, M2C_RESUMED) == 1);
        CHECK(msg_of(c, M2C_RESUMED)->u.resumed.ok == 1 && msg_of(c, M2C_RESUMED)->u.resumed.revision == 5);
        CHECK(msg_of(c, M2C_RESUMED)->u.resumed.world.group_world_size == 3);
        CHECK(strcmp(state_of(c), "idle") == 0);
    }
    uint64_t ring[4];
    CHECK(msm_group_ring(M, 0, ring, 4) == 3 && ring[0] == 1 && ring[1] == 2 && ring[2] == 3);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK(st.rebuilds == 1 && st.reregistrations == 3 && st.accepted == 3);
    /* The ring is wired as the peers had it: an update vote needs no rewiring. */
    for (uint64_t c = 1; c <= 3; c++) pkt(c, C2M_UPDATE_TOPOLOGY);
    for (uint64_t c = 1; c <= 3; c++) CHECK(got(c, M2C_ESTABLISH_P2P) == 1 && got(c, M2C_TOPOLOGY_DONE) == 1);
    /* The group's revision is the peers': revision 6 is next. */
    for (uint64_t c = 1; c <= 3; c++) sync_hash(c, 6, 222);
    for (uint64_t c = 1; c <= 3; c++)
        CHECK(got(c, M2C_SS_PLAN) == 1 && msg_of(c, M2C_SS_PLAN)->u.ss_plan.status == SS_OK &&
              msg_of(c, M2C_SS_PLAN)->u.ss_plan.revision == 6);
}

static void test_partial_return_waits_for_deadline(void) {
    resume(1, 5, 111, RING3, 3);
    resume(3, 5, 111, RING3, 3);
    tick(MSM_REBUILD_MS - 1);
    CHECK(got(1, M2C_RESUMED) == 0);
    tick(1);
    /* Peer 2 is gone, so the ring is not what anyone had: the rebuild wires the two that came back. */
    const int ring13[] = {1, 3};
    CHECK(establish_is(1, ring13, 2) && establish_is(3, ring13, 2) && got(1, M2C_RESUMED) == 0);
    const uint64_t c13[] = {1, 3};
    wired(c13, 2, 1);
    CHECK(got(1, M2C_RESUMED) == 1 && got(3, M2C_RESUMED) == 1);
    CHECK(msg_of(1, M2C_RESUMED)->u.resumed.world.group_world_size == 2);
    uint64_t ring[4];
    CHECK(msm_group_ring(M, 0, ring, 4) == 2 && ring[0] == 1 && ring[1] == 3);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    pkt(3, C2M_UPDATE_TOPOLOGY);
    CHECK(got(1, M2C_ESTABLISH_P2P) == 1 && got(1, M2C_TOPOLOGY_DONE) == 1);
}

static void test_waiting_peers_are_not_timed_out(void) {
    msm_set_peer_timeout(M, 1000); /* shorter than the rebuild window */
    resume(1, 5, 111, RING3, 3);
    resume(2, 5, 111, RING3, 3);
    tick(MSM_REBUILD_MS - 1); /* silent while they wait: no kick */
    CHECK(!closed_(1) && !closed_(2));
    tick(1);
    tick(999); /* wiring: still silent, still no kick */
    CHECK(!closed_(1) && !closed_(2));
    wired(C12, 2, 1);
    CHECK(got(1, M2C_RESUMED) == 1 && !closed_(1));
    tick(999); /* the peer timeout counts from RESUMED */
    CHECK(!closed_(1));
    tick(2);
    CHECK(closed_(1) && closed_(2));
}

static void test_majority_revision_wins(void) {
    resume(1, 7, 111, RING3, 3);
    resume(2, 7, 111, RING3, 3);
    resume(3, 9, 999, RING3, 3); /* claims to be ahead, with other content */
    wired(C123, 3, 1);
    CHECK(msg_of(3, M2C_RESUMED)->u.resumed.revision == 7);
    /* Next sync: 1 and 2 offer 8; 3 offers 10. 3 is not refused: it is outdated and receives. */
    sync_hash(1, 8, 222);
    sync_hash(2, 8, 222);
    sync_hash(3, 10, 999);
    const wire_msg_t *p3 = msg_of(3, M2C_SS_PLAN);
    CHECK(got(3, M2C_SS_PLAN) == 1 && p3->u.ss_plan.status == SS_OK && p3->u.ss_plan.revision == 8);
    CHECK(p3->u.ss_plan.n == 1); /* fetches the majority's tensor */
    CHECK(msg_of(1, M2C_SS_PLAN)->u.ss_plan.n == 0);
}

static void test_tie_goes_forward(void) {
    const int ring2[] = {1, 2};
    resume(1, 4, 111, ring2, 2);
    resume(2, 5, 111, ring2, 2); /* one sync finished here only: the run never goes back */
    wired(C12, 2, 1);            /* both wired: peer 2 can serve revision 5 */
    CHECK(msg_of(1, M2C_RESUMED)->u.resumed.revision == 5 && msg_of(2, M2C_RESUMED)->u.resumed.revision == 5);
}

static void test_late_resume_is_a_new_peer(void) {
    const int ring2[] = {1, 2};
    resume(1, 3, 111, ring2, 2);
    resume(2, 3, 111, ring2, 2);
    wired(C12, 2, 1);
    resume(3, 3, 111, RING3, 3); /* after the rebuild */
    CHECK(got(3, M2C_RESUMED) == 1 && msg_of(3, M2C_RESUMED)->u.resumed.ok == 0);
    CHECK(strcmp(state_of(3), "registered") == 0);
    pkt(3, C2M_HEARTBEAT); /* a newcomer from a RESUME joins a round once it was heard from */
    pkt(1, C2M_UPDATE_TOPOLOGY);
    pkt(2, C2M_UPDATE_TOPOLOGY);
    CHECK(got(3, M2C_ESTABLISH_P2P) == 1 && msg_of(3, M2C_ESTABLISH_P2P)->u.establish.n == 3);
}

static void test_newcomer_waits_for_rebuild(void) {
    const int ring2[] = {1, 2};
    resume(1, 3, 111, ring2, 2);
    join(4);
    CHECK(got(4, M2C_WELCOME) == 1 && got(4, M2C_ESTABLISH_P2P) == 0); /* not bootstrapped alone */
    resume(2, 3, 111, ring2, 2);
    wired(C12, 2, 1);
    CHECK(got(1, M2C_RESUMED) == 1 && got(4, M2C_ESTABLISH_P2P) == 0); /* waits for the members' vote */
    pkt(1, C2M_UPDATE_TOPOLOGY);
    pkt(2, C2M_UPDATE_TOPOLOGY);
    CHECK(got(4, M2C_ESTABLISH_P2P) == 1);
}

static void test_newcomer_first_after_restart(void) {
    const int ring2[] = {1, 2};
    join(4); /* the newcomer of an accept round the old master never finished comes back first */
    CHECK(got(4, M2C_ESTABLISH_P2P) == 1); /* bootstrapped: alone in the run */
    wire_msg_t ok = {.type = C2M_P2P_ESTABLISHED};
    ok.u.flag.value = 1;
    msm_on_packet(M, 4, &ok);
    CHECK(strcmp(state_of(4), "idle") == 0);
    resume(1, 6, 111, ring2, 2);
    resume(2, 6, 111, ring2, 2);
    CHECK(establish_is(1, ring2, 2)); /* the resumed peers are wired among themselves first */
    wired(C12, 2, 1);
    CHECK(msg_of(1, M2C_RESUMED)->u.resumed.ok == 1 && msg_of(2, M2C_RESUMED)->u.resumed.ok == 1);
    CHECK(msg_of(1, M2C_RESUMED)->u.resumed.revision == 6 && msg_of(1, M2C_RESUMED)->u.resumed.world.group_world_size == 3);
    /* The newcomer was never wired to them: the members' next vote rewires the ring of three. */
    for (uint64_t c = 1; c <= 4; c += c == 2 ? 2 : 1) pkt(c, C2M_UPDATE_TOPOLOGY);
    CHECK(got(1, M2C_ESTABLISH_P2P) == 2 && msg_of(1, M2C_ESTABLISH_P2P)->u.establish.n == 3);
}

/* A fresh master holds its first peer for the boot grace (a restarted run's peers may be on their way). */
static void test_boot_grace(void) {
    msm_set_boot_grace(M, 1000);
    join(4); /* a fresh master: the first peer waits out the grace */
    CHECK(got(4, M2C_WELCOME) == 1 && got(4, M2C_ESTABLISH_P2P) == 0);
    tick(999);
    CHECK(got(4, M2C_ESTABLISH_P2P) == 0);
    tick(1);
    CHECK(got(4, M2C_ESTABLISH_P2P) == 1);
}

/* A newcomer that reaches a restarted master before the run's peers joins at their next vote. */
static void test_boot_grace_newcomer_first(void) {
    msm_set_boot_grace(M, 1000);
    const int ring2[] = {1, 2};
    join(4); /* a newcomer reaches the restarted master before the run's peers */
    tick(300);
    resume(1, 8, 111, ring2, 2);
    resume(2, 8, 111, ring2, 2);
    wired(C12, 2, 1);
    CHECK(msg_of(1, M2C_RESUMED)->u.resumed.revision == 8 && msg_of(1, M2C_RESUMED)->u.resumed.ok == 1);
    tick(1000);
    CHECK(got(4, M2C_ESTABLISH_P2P) == 0); /* no run of its own: it waits for the members' vote */
    pkt(1, C2M_UPDATE_TOPOLOGY);
    pkt(2, C2M_UPDATE_TOPOLOGY);
    CHECK(got(4, M2C_ESTABLISH_P2P) == 1 && msg_of(4, M2C_ESTABLISH_P2P)->u.establish.n == 3);
}

/* The lost master died between its COMPLETEs: peers whose ring finished get a verdict before RESUMED,
 * COMPLETE when no member reports the op unfinished, ABORT otherwise; op_seq must match too. */
static void test_verdicts_on_unsettled_ops(void) {
    const wire_op_outcome_t fin7 = {.tag = 7, .op_seq = 40, .finished = 1};
    const wire_op_outcome_t fin9 = {.tag = 9, .op_seq = 41, .finished = 1};
    const wire_op_outcome_t unf9 = {.tag = 9, .op_seq = 41, .finished = 0};
    const wire_op_outcome_t unf7_old = {.tag = 7, .op_seq = 12, .finished = 0}; /* an older attempt of tag 7 */
    wire_op_outcome_t a[2] = {fin7, fin9}, b[2] = {fin7, unf9}, c[1] = {unf7_old};
    resume_ops(1, RING3, 3, a, 2);
    resume_ops(2, RING3, 3, b, 2);
    resume_ops(3, RING3, 3, c, 1); /* got COMPLETE for tag 7 already: lists only what it did not finish */
    wired(C123, 3, 1);
    CHECK(got(1, M2C_COLL_COMPLETE) == 1 && got(2, M2C_COLL_COMPLETE) == 1 && got(3, M2C_COLL_COMPLETE) == 0);
    CHECK(msg_of(1, M2C_COLL_COMPLETE)->u.coll.tag == 7 && msg_of(1, M2C_COLL_COMPLETE)->u.coll.op_seq == 40 &&
          msg_of(1, M2C_COLL_COMPLETE)->u.coll.ok == 1);
    CHECK(msg_of(2, M2C_COLL_COMPLETE)->u.coll.tag == 7);
    /* Tag 9: peer 2 did not finish it, so peer 1 (which did) restores. */
    CHECK(got(1, M2C_COLL_ABORT) == 1 && got(2, M2C_COLL_ABORT) == 0 && got(3, M2C_COLL_ABORT) == 0);
    CHECK(msg_of(1, M2C_COLL_ABORT)->u.coll.tag == 9 && msg_of(1, M2C_COLL_ABORT)->u.coll.op_seq == 41);
    /* Each verdict precedes that peer's RESUMED (the peer settles what is left when RESUMED arrives). */
    CHECK(first_index(1, M2C_COLL_COMPLETE) >= 0 && first_index(1, M2C_COLL_COMPLETE) < first_index(1, M2C_RESUMED));
    CHECK(first_index(1, M2C_COLL_ABORT) < first_index(1, M2C_RESUMED));
    for (uint64_t k = 1; k <= 3; k++) CHECK(got(k, M2C_RESUMED) == 1 && msg_of(k, M2C_RESUMED)->u.resumed.ok == 1);
}

/* A RESUME after the rebuild gets no verdict: RESUMED ok 0, and the peer restores what it held. */
static void test_resume_after_rebuild_no_verdict(void) {
    resume(1, 5, 111, RING3, 3);
    resume(2, 5, 111, RING3, 3);
    resume(3, 5, 111, RING3, 3);
    wired(C123, 3, 1);
    for (uint64_t k = 1; k <= 3; k++) sync_hash(k, 6, 222);
    const wire_op_outcome_t a[2] = {{.tag = 7, .op_seq = 40, .finished = 1}, {.tag = 9, .op_seq = 41, .finished = 1}};
    resume_ops(4, RING3, 3, a, 2);
    CHECK(got(4, M2C_RESUMED) == 1 && msg_of(4, M2C_RESUMED)->u.resumed.ok == 0);
    CHECK(got(4, M2C_COLL_COMPLETE) == 0 && got(4, M2C_COLL_ABORT) == 0);
}

static void test_bad_resumes(void) {
    resume_full(1, WIRE_VERSION + 1, 1, 3, 111, RING3, 3);
    CHECK(closed_(1) && got(1, M2C_KICK) == 1);
    CHECK(strstr(msg_of(1, M2C_KICK)->u.kick.reason, "protocol mismatch") != NULL);
    resume(2, 3, 111, RING3, 3);
    connect_(3); /* claims conn 2's uuid with its own key */
    wire_msg_t m = {.type = C2M_RESUME};
    m.u.resume.magic = WIRE_MAGIC;
    m.u.resume.version = WIRE_VERSION;
    m.u.resume.p2p_port = 4003;
    memcpy(m.u.resume.uuid, U[2], 16);
    deliver_signed(3, &m);
    CHECK(closed_(3) && strstr(msg_of(3, M2C_KICK)->u.kick.reason, "not its public key's") != NULL);
    CHECK(!closed_(2));
    resume(4, 3, 111, RING3, 3);
    pkt(4, C2M_COLL_INIT); /* a vote before RESUMED is out of state */
    CHECK(closed_(4) && strstr(msg_of(4, M2C_KICK)->u.kick.reason, "rebuilt") != NULL);
    wire_msg_t again = m;
    memcpy(again.u.resume.uuid, U[2], 16);
    deliver_signed(2, &again); /* a second RESUME on one connection */
    CHECK(closed_(2));
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK(st.accepted == 0 && st.rebuilds == 0);
}


/* ---------- what strangers cannot do ---------- */

/* conn sends a RESUME (group, ring of nr uuids, nops unfinished collectives), signed with its own key: u
 * stands for its uuid (the key's), in the ring as well. */
static void resume_raw(uint64_t conn, const uint8_t u[16], uint32_t group, uint8_t (*ring)[16], uint32_t nr,
                       uint32_t nops) {
    uint8_t self[16], (*named)[16] = calloc(nr ? nr : 1, 16);
    uuid_of(conn, self);
    for (uint32_t i = 0; i < nr; i++) memcpy(named[i], memcmp(ring[i], u, 16) == 0 ? self : ring[i], 16);
    connect_(conn);
    wire_op_outcome_t *ops = calloc(nops ? nops : 1, sizeof *ops);
    for (uint32_t i = 0; i < nops; i++) ops[i] = (wire_op_outcome_t){.tag = i, .op_seq = i, .finished = 0};
    wire_msg_t m = {.type = C2M_RESUME};
    m.u.resume.magic = WIRE_MAGIC;
    m.u.resume.version = WIRE_VERSION;
    m.u.resume.peer_group = group;
    m.u.resume.p2p_port = 4000;
    memcpy(m.u.resume.uuid, self, 16);
    m.u.resume.has_revision = 1;
    m.u.resume.revision = 1ull << 60;
    m.u.resume.nring = nr;
    m.u.resume.ring = named;
    m.u.resume.nops = nops;
    m.u.resume.ops = ops;
    deliver_signed(conn, &m);
    free(ops);
    free(named);
}

/* A RESUME past the restart window is a HELLO: no rebuild, nothing kept; the peer is a newcomer that joins
 * an accept round only once it was heard from, so a flood of RESUMEs never holds up the run's rounds. */
static void test_resume_outside_window_is_a_hello(void) {
    make_group_ex(10, 2, 0, 1); /* a run going on */
    tick(MSM_RESUME_WINDOW_MS);
    uint8_t ring[2][16];
    for (uint64_t c = 20; c < 30; c++) {
        memset(ring[0], (int)c, 16);
        memset(ring[1], (int)c + 100, 16);
        resume_raw(c, ring[0], (uint32_t)c, ring, 2, MSM_RESUME_MAX_OPS);
        CHECK(got(c, M2C_RESUMED) == 1 && msg_of(c, M2C_RESUMED)->u.resumed.ok == 0);
        CHECK(strcmp(state_of(c), "registered") == 0 && msm_resume_held(M, c) == 0);
    }
    CHECK(!msm_resume_collecting(M));
    /* The run's accept vote is answered at once: the strangers never wired, never voted. */
    pkt(10, C2M_UPDATE_TOPOLOGY);
    pkt(11, C2M_UPDATE_TOPOLOGY);
    CHECK(got(10, M2C_TOPOLOGY_DONE) == 1 && msg_of(10, M2C_TOPOLOGY_DONE)->u.topo_done.ok == 1);
    CHECK(got(20, M2C_ESTABLISH_P2P) == 0);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK(st.rebuilds == 0 && st.accepted == 2 && st.registered == 10);
    /* One that is alive (heartbeats) goes through the next accept round like any newcomer. */
    pkt(20, C2M_HEARTBEAT);
    pkt(10, C2M_UPDATE_TOPOLOGY);
    pkt(11, C2M_UPDATE_TOPOLOGY);
    CHECK(got(20, M2C_ESTABLISH_P2P) == 1 && !is_accepted(20));
    p2p_ok(10, 1);
    p2p_ok(11, 1);
    p2p_ok(20, 1);
    CHECK(is_accepted(20));
}

/* Caps: collectives per RESUME, ring length, resuming peers; within them the state is held (counted by the
 * server against the strangers' budget) until the collection ends. */
static void test_caps(void) {
    uint8_t u[16], (*ring)[16] = calloc(MSM_RESUME_MAX_PEERS + 1, 16);
    for (int i = 0; i <= MSM_RESUME_MAX_PEERS; i++) {
        memset(ring[i], 0xee, 16);
        ring[i][0] = (uint8_t)i;
        ring[i][1] = (uint8_t)(i >> 8);
    }
    memset(u, 0xa1, 16);
    resume_raw(100, u, 3, ring, 1, MSM_RESUME_MAX_OPS + 1);
    CHECK(msg_of(100, M2C_RESUMED)->u.resumed.ok == 0 && msm_resume_held(M, 100) == 0);
    memset(u, 0xa2, 16);
    resume_raw(101, u, 3, ring, MSM_RESUME_MAX_PEERS + 1, 0);
    CHECK(msg_of(101, M2C_RESUMED)->u.resumed.ok == 0);
    /* Within the caps: held, and the named peer ee.. never comes back, so the collection waits. */
    uint64_t first = 200;
    for (int i = 0; i < MSM_RESUME_MAX_PEERS; i++) {
        memset(u, 0xb0, 16);
        u[0] = (uint8_t)i;
        u[1] = (uint8_t)(i >> 8);
        resume_raw(first + (uint64_t)i, u, 4, ring, (uint32_t)(i == 0 ? MSM_RESUME_MAX_PEERS : 1), 0);
    }
    CHECK(got(first, M2C_RESUMED) == 0 && msm_resume_held(M, first) >= (size_t)MSM_RESUME_MAX_PEERS * 16);
    CHECK(msm_resume_held(M, first + 1) > 0 && msm_resume_collecting(M));
    memset(u, 0xc0, 16);
    resume_raw(900, u, 4, ring, 1, 0); /* one more: a newcomer */
    CHECK(msg_of(900, M2C_RESUMED)->u.resumed.ok == 0 && msm_resume_held(M, 900) == 0);
    tick(MSM_REBUILD_MS); /* the collection ends: nothing is held, everyone wires */
    CHECK(!msm_resume_collecting(M) && msm_resume_held(M, first) == 0);
    CHECK(got(first, M2C_ESTABLISH_P2P) == 1);
    CHECK(msg_of(first, M2C_ESTABLISH_P2P)->u.establish.n == MSM_RESUME_MAX_PEERS);
    free(ring);
}

/* Nobody is accepted before its rebuilt ring is wired: a silent peer is kicked at the deadline and the
 * others are wired again without it; a failed edge makes both ends newcomers; a group that cannot wire
 * does not hold up the others. */
static void test_wiring_before_accept(void) {
    resume(1, 5, 111, RING3, 3);
    resume(2, 5, 111, RING3, 3);
    resume(3, 5, 111, RING3, 3);
    p2p_ok(1, 1);
    p2p_ok(2, 1); /* 3 never answers */
    CHECK(!is_accepted(1) && got(1, M2C_RESUMED) == 0);
    tick(MSM_REBUILD_WIRING_MS);
    CHECK(kicked(3) && strstr(kick_reason(3), "ring wiring") != NULL);
    const int ring12[] = {1, 2};
    CHECK(establish_is(1, ring12, 2) && establish_is(2, ring12, 2) && !is_accepted(1));
    wired(C12, 2, 1);
    CHECK(is_accepted(1) && is_accepted(2) && msg_of(1, M2C_RESUMED)->u.resumed.ok == 1);
    CHECK(msg_of(1, M2C_RESUMED)->u.resumed.world.group_world_size == 2);
}

/* A group that cannot wire does not hold up the others. */
static void test_wiring_before_accept_four(void) {
    msm_set_peer_timeout(M, 0); /* the ticks below jump past the deadlines in one step */
    msm_set_rebuild_floor(M, 500);
    const int ring4[] = {1, 2, 3, 4};
    /* A stranger in a group of its own that never wires; its ring names only itself, but that does not
     * end the collection before the floor: the run's peers get back in time. */
    uint8_t fake[1][16];
    memset(fake[0], 0x77, 16);
    resume_raw(7, fake[0], 9, fake, 1, 0);
    CHECK(got(7, M2C_ESTABLISH_P2P) == 0);
    tick(250);
    for (uint64_t c = 1; c <= 4; c++) resume(c, 5, 111, ring4, 4);
    CHECK(got(1, M2C_ESTABLISH_P2P) == 0);
    tick(250);
    CHECK(got(7, M2C_ESTABLISH_P2P) == 1 && got(1, M2C_ESTABLISH_P2P) == 1);
    p2p_ok(1, 1);
    p2p_ok(2, 0); /* 2 could not reach 3: one of them is at fault, both become newcomers */
    p2p_ok(3, 1);
    p2p_ok(4, 1);
    CHECK(msg_of(2, M2C_RESUMED)->u.resumed.ok == 0 && msg_of(3, M2C_RESUMED)->u.resumed.ok == 0);
    CHECK(strcmp(state_of(2), "registered") == 0 && !closed_(2) && !closed_(3));
    const int ring14[] = {1, 4};
    CHECK(establish_is(1, ring14, 2) && establish_is(4, ring14, 2));
    p2p_ok(1, 1);
    p2p_ok(4, 1);
    /* Group 0 is accepted at once; the silent stranger of group 9 waits out its deadline alone. */
    CHECK(is_accepted(1) && is_accepted(4) && got(1, M2C_RESUMED) == 1 && !is_accepted(7));
    tick(MSM_REBUILD_WIRING_MS);
    CHECK(kicked(7));
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK(st.rebuilds == 1 && st.accepted == 2 && st.registered == 2);
    /* The demoted peers join the next accept round like newcomers. */
    pkt(1, C2M_UPDATE_TOPOLOGY);
    pkt(4, C2M_UPDATE_TOPOLOGY);
    CHECK(got(2, M2C_ESTABLISH_P2P) == 2 && msg_of(2, M2C_ESTABLISH_P2P)->u.establish.n == 4);
}

/* The 2-against-2 poisoning of a restart: two strangers claim revision 2^60. Silent, they are kicked and
 * their claim never counts; wired, their claim wins the tie, but once they are gone no member holds it and
 * the group takes what its members hold instead of refusing every sync as a rollback. */
static void test_revision_needs_a_source(void) {
    for (int fakes_wire = 0; fakes_wire <= 1; fakes_wire++) {
        start();
        const int ring12[] = {1, 2}, order[] = {3, 4, 1, 2};
        resume(3, 1ull << 60, 999, order, 4); /* the strangers come first and name the honest peers */
        resume(4, 1ull << 60, 999, order, 4);
        resume(1, 5, 111, ring12, 2);
        resume(2, 5, 111, ring12, 2);
        CHECK(establish_is(1, order, 4));
        p2p_ok(1, 1);
        if (fakes_wire) {
            p2p_ok(2, 1);
            p2p_ok(3, 1);
            p2p_ok(4, 1);
            CHECK(msg_of(1, M2C_RESUMED)->u.resumed.revision == 1ull << 60);
            disconnect(3);
            disconnect(4);
        } else {
            p2p_ok(2, 0); /* it cannot reach 3, which never answers */
            tick(MSM_REBUILD_WIRING_MS);
            CHECK(kicked(3) && kicked(4) && got(2, M2C_RESUMED) == 0);
            wired(C12, 2, 1); /* the second round: the two honest peers */
            CHECK(msg_of(1, M2C_RESUMED)->u.resumed.ok == 1 && msg_of(1, M2C_RESUMED)->u.resumed.revision == 5);
        }
        sync_hash(1, 6, 222);
        sync_hash(2, 6, 222);
        for (uint64_t c = 1; c <= 2; c++)
            CHECK(msg_of(c, M2C_SS_PLAN)->u.ss_plan.status == SS_OK && msg_of(c, M2C_SS_PLAN)->u.ss_plan.revision == 6);
    }
}

/* A flood of RESUMEs in a fresh master's window, into a group of their own, whose senders never wire: the
 * newcomers of another group do not wait for the strangers' wiring deadline to found the run. */
static void test_newcomers_go_on_while_strangers_wire(void) {
    uint8_t fake[2][16];
    uuid_of(7, fake[0]);
    uuid_of(8, fake[1]);
    resume_raw(7, fake[0], 4242, fake, 2, MSM_RESUME_MAX_OPS);
    resume_raw(8, fake[1], 4242, fake, 2, MSM_RESUME_MAX_OPS);
    CHECK(got(7, M2C_ESTABLISH_P2P) == 1); /* both back: the strangers' ring is wired */
    join(1);
    CHECK(got(1, M2C_ESTABLISH_P2P) == 1); /* bootstraps alone, the strangers' wiring notwithstanding */
    p2p_ok(1, 1);
    join(2);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    p2p_ok(1, 1);
    p2p_ok(2, 1);
    CHECK(is_accepted(1) && is_accepted(2) && !is_accepted(7));
    msm_set_peer_timeout(M, 0);
    tick(MSM_REBUILD_WIRING_MS);
    CHECK(kicked(7) && kicked(8));
}

int main(void) {
    RUN_TEST(test_agreeing_peers);
    RUN_TEST(test_partial_return_waits_for_deadline);
    RUN_TEST(test_waiting_peers_are_not_timed_out);
    RUN_TEST(test_majority_revision_wins);
    RUN_TEST(test_tie_goes_forward);
    RUN_TEST(test_late_resume_is_a_new_peer);
    RUN_TEST(test_newcomer_waits_for_rebuild);
    RUN_TEST(test_newcomer_first_after_restart);
    RUN_TEST(test_boot_grace);
    RUN_TEST(test_boot_grace_newcomer_first);
    RUN_TEST(test_verdicts_on_unsettled_ops);
    RUN_TEST(test_resume_after_rebuild_no_verdict);
    RUN_TEST(test_bad_resumes);
    RUN_TEST(test_resume_outside_window_is_a_hello);
    RUN_TEST(test_caps);
    RUN_TEST(test_wiring_before_accept);
    RUN_TEST(test_wiring_before_accept_four);
    RUN_TEST(test_revision_needs_a_source);
    RUN_TEST(test_newcomers_go_on_while_strangers_wire);
    TEST_MAIN_END();
}
