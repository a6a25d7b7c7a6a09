/* test_msm_conflicts.c - the master's table of operation kinds (msm_kinds.c)
 * against docs/protocol.md section 3 (its conflict table is parsed and
 * compared row by row, so document and code cannot drift), and the illegal
 * transitions of every kind: a vote while in a conflicting operation, a vote
 * before the peer is accepted, and each kind's report out of state. */
#include "doc_table.h"
#include "msm_harness.h"
#include "sm/msm_internal.h"

TT_FIXTURE(setup, teardown);

#define DOC PCCL_TEST_DATA_DIR "/../../docs/protocol.md"

/* The name section 2 gives peer->master message type t. */
static const char *doc_msg_name(const char *doc, uint16_t t, char *buf) {
    char key[16];
    snprintf(key, sizeof key, "\n| %u | `", t);
    const char *p = strstr(doc, key);
    if (!p) return "?";
    char c[4][256];
    if (doc_cells(p + 1, c, 4) < 2) return "?";
    snprintf(buf, 256, "%s", c[1]);
    return buf;
}

/* The documented row of kind k, built from the table. */
static void expected_row(const char *doc, int k, char row[7][256]) {
    const msm_kind_t *kd = &msm_kinds[k];
    char buf[256];
    snprintf(row[0], 256, "%s", kd->name);
    snprintf(row[1], 256, "%s", doc_msg_name(doc, kd->vote, buf));
    snprintf(row[2], 256, "%s", kd->reports[0] ? doc_msg_name(doc, kd->reports[0], buf) : "—");
    snprintf(row[3], 256, "%s", kd->run_wide ? "run" : "group");
    row[4][0] = 0;
    for (int j = 0; j < MSM_OP_NKINDS; j++)
        if (kd->conflicts & MSM_BIT(j))
            snprintf(row[4] + strlen(row[4]), 256 - strlen(row[4]), "%s%s", row[4][0] ? ", " : "", msm_kinds[j].name);
    snprintf(row[5], 256, "%s", kd->refused_while_running ? "kick" : "waits");
    snprintf(row[6], 256, "%s", kd->departure_fails ? "fails" : "continues");
}

static void test_doc_matches_table(void) {
    char *doc = doc_read(DOC);
    CHECK(doc != NULL);
    if (!doc) return;
    const char *t = strstr(doc, "| operation | vote | reports |");
    CHECK(t != NULL);
    int seen[MSM_OP_NKINDS] = {0}, rows = 0;
    for (const char *line = t ? strchr(t, '\n') : NULL; line && line[1] == '|'; line = strchr(line + 1, '\n')) {
        char c[8][256];
        int n = doc_cells(line + 1, c, 8);
        if (n >= 1 && strncmp(c[0], "---", 3) == 0) continue;
        rows++;
        CHECK_EQ_U64(n, 7);
        int k = 0;
        while (k < MSM_OP_NKINDS && strcmp(msm_kinds[k].name, c[0]) != 0) k++;
        if (k == MSM_OP_NKINDS) {
            fprintf(stderr, "  documented operation %s is not in the kinds table\n", c[0]);
            CHECK(0);
            continue;
        }
        seen[k]++;
        char want[7][256];
        expected_row(doc, k, want);
        for (int i = 1; i < 7 && i < n; i++)
            if (strcmp(want[i], c[i]) != 0) {
                fprintf(stderr, "  %s, column %d: document says \"%s\", the table \"%s\"\n", c[0], i + 1, c[i], want[i]);
                CHECK(0);
            }
    }
    CHECK_EQ_U64(rows, MSM_OP_NKINDS);
    for (int k = 0; k < MSM_OP_NKINDS; k++) CHECK_EQ_U64(seen[k], 1);
    free(doc);
}

/* ---------- illegal transitions ---------- */

static wire_tensor_t one_tensor = {.key = "w", .dtype = pcclFloat, .count = 4, .hash = 1};

/* Peer conn votes for kind k (collectives: tag). */
static void vote_for(uint64_t conn, int k, uint64_t tag) {
    switch (k) {
    case MSM_OP_ACCEPT: pkt(conn, C2M_UPDATE_TOPOLOGY); break;
    case MSM_OP_PENDING: pkt(conn, C2M_PEERS_PENDING); break;
    case MSM_OP_OPTIMIZE: pkt(conn, C2M_OPTIMIZE_TOPOLOGY); break;
    case MSM_OP_SYNC: sync_vote(conn, 1, ENFORCE, &one_tensor, 1); break;
    default: coll_init(conn, tag); break;
    }
}

/* For every pair of kinds: a peer voting for `second` while its vote for `first` waits (the other peer
 * has not voted) is kicked exactly when the table says they conflict; the other peer never is. */
static void test_conflicts_as_tabled(void) {
    for (int first = 0; first < MSM_OP_NKINDS; first++)
        for (int second = 0; second < MSM_OP_NKINDS; second++) {
            restart();
            make_group(2);
            vote_for(1, first, 1);
            CHECK(!closed_in_log(1));
            vote_for(1, second, 1); /* same tag for collectives: a duplicate */
            int expect = (msm_kinds[second].conflicts & MSM_BIT(first)) != 0;
            if (kicked(1) != expect)
                fprintf(stderr, "  %s then %s: kicked %d, table says %d\n", msm_kinds[first].name,
                        msm_kinds[second].name, kicked(1), expect);
            CHECK_EQ_U64(kicked(1), expect);
            CHECK(!closed_in_log(2));
        }
}

/* Collectives of different tags overlap. */
static void test_collectives_of_different_tags(void) {
    make_group(2);
    coll_init(1, 1);
    coll_init(1, 2);
    CHECK(!closed_in_log(1));
}

/* A registered peer (not accepted) may not vote for anything. */
static void test_votes_before_accepted(void) {
    for (int k = 0; k < MSM_OP_NKINDS; k++) {
        restart();
        make_group(1);
        join(2);
        vote_for(2, k, 1);
        CHECK(kicked(2));
        CHECK(!closed_in_log(1));
    }
}

/* Every kind's report out of its running phase. */
static void test_reports_out_of_state(void) {
    static const uint16_t reports[] = {C2M_P2P_ESTABLISHED, C2M_BENCH_RESULT, C2M_SS_DIST_DONE};
    for (size_t i = 0; i < sizeof reports / sizeof reports[0]; i++) {
        restart();
        make_group(2);
        flag(1, reports[i], 1);
        CHECK(kicked(1));
        CHECK(!closed_in_log(2));
    }
}

/* A COLL_DONE for no running op is a normal race with an abort: ignored. */
static void test_coll_done_without_op(void) {
    make_group(2);
    coll_done(1, 5, 1, 1);
    coll_init(1, 5);
    coll_done(1, 5, 1, 1); /* still voting */
    CHECK(!closed_in_log(1));
    CHECK_EQ_U64(total_sends(), 0);
}

/* a distribution report from a member of a running collective */
static void test_dist_report_in_collective(void) {
    make_group(2);
    coll_init(1, 5);
    coll_init(2, 5);
    CHECK(commenced_seq(1, 5) != 0);
    clear_log();
    flag(1, C2M_SS_DIST_DONE, 1); /* it is in a collective, not a distribution */
    CHECK(kicked(1));
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_doc_matches_table);
    RUN_TEST(test_conflicts_as_tabled);
    RUN_TEST(test_collectives_of_different_tags);
    RUN_TEST(test_votes_before_accepted);
    RUN_TEST(test_reports_out_of_state);
    RUN_TEST(test_coll_done_without_op);
    RUN_TEST(test_dist_report_in_collective);
    TEST_MAIN_END();
}
