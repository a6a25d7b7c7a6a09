/* test_sec_hs.c - the handshake of a keyed run as a pure state machine (sec_hs.c): both
 * sides derive crossing session keys with the same key; a wrong key, a replayed or altered
 * message, garbage, another purpose or a mismatched encryption flag fail it; both sides agree on
 * the bulk cipher; truncated input waits; the feed never takes more than its own message. */
#include <string.h>

#include "sec/sec_frame.h"
#include "sec/sec_hs.h"
#include "sec_pair.h"
#include "tinytest.h"

static const char *K1 = "0123456789abcdef0123456789abcdef-run-one";
static const char *K2 = "0123456789abcdef0123456789abcdef-run-two";

static void start_pair(sec_hs_t *i, sec_hs_t *r, const char *ki, const char *kr, int flags_r, int expect_i) {
    sec_cfg_t ci = test_key(ki), cr = test_key(kr);
    uint8_t ctx_i[SEC_HS_CTX], ctx_r[SEC_HS_CTX];
    memset(ctx_i, 0xA1, sizeof ctx_i);
    memset(ctx_r, 0xB2, sizeof ctx_r);
    sec_hs_params_t pi = {.role = SEC_INITIATOR, .purpose = SEC_PURPOSE_P2P, .flags = expect_i, .ctx = ctx_i};
    sec_hs_params_t pr = {.role = SEC_RESPONDER, .purpose = SEC_PURPOSE_P2P, .flags = flags_r, .ctx = ctx_r};
    CHECK(sec_hs_start(i, &ci, &pi) == 0);
    CHECK(sec_hs_start(r, &cr, &pr) == 0);
}

static void test_good_key(void) {
    sec_hs_t i, r;
    int ri, rr;
    start_pair(&i, &r, K1, K1, SEC_FLAG_ENCRYPT, -1);
    CHECK(i.out_len == SEC_HS_MSG1 && r.out_len == 0);
    hs_run(&i, &r, &ri, &rr);
    CHECK(ri == 0 && rr == 0 && sec_hs_done(&i) && sec_hs_done(&r));
    CHECK(memcmp(i.session.tx_key, r.session.rx_key, SEC_KEY_BYTES) == 0);
    CHECK(memcmp(i.session.rx_key, r.session.tx_key, SEC_KEY_BYTES) == 0);
    CHECK(memcmp(i.session.tx_key, i.session.rx_key, SEC_KEY_BYTES) != 0); /* a key per direction */
    CHECK(i.session.encrypt == 1 && r.session.encrypt == 1);
    CHECK(i.peer_ctx[0] == 0xB2 && r.peer_ctx[SEC_HS_CTX - 1] == 0xA1);
    /* Every connection has its own keys, even between the same two sides. */
    sec_hs_t i2, r2;
    start_pair(&i2, &r2, K1, K1, 0, 0);
    hs_run(&i2, &r2, &ri, &rr);
    CHECK(ri == 0 && rr == 0 && sec_hs_done(&i2) && sec_hs_done(&r2) && i2.session.encrypt == 0);
    CHECK(memcmp(i.session.tx_key, i2.session.tx_key, SEC_KEY_BYTES) != 0);
}

static void test_wrong_key(void) {
    sec_hs_t i, r;
    int ri, rr;
    start_pair(&i, &r, K1, K2, 0, -1);
    hs_run(&i, &r, &ri, &rr);
    CHECK(ri == -PERR_REFUSED && rr == 0 && !sec_hs_done(&r)); /* the initiator sees it first and says nothing more */
    CHECK(strstr(i.err, "run key") != NULL);
    CHECK(i.out_len == 0);
    /* A responder without the key cannot get through either. */
    start_pair(&i, &r, K2, K1, 0, -1);
    hs_run(&i, &r, &ri, &rr);
    CHECK(ri == -PERR_REFUSED && !sec_hs_done(&r));
}

/* Records a good session, then replays its initiator's messages to a fresh responder and its
 * responder's message to a fresh initiator: both sides' fresh ephemerals and nonces refuse them. */
static void test_replay(void) {
    sec_hs_t i, r;
    uint8_t m1[SEC_HS_MSG1], m2[SEC_HS_MSG2], m3[SEC_HS_MSG3];
    size_t used;
    start_pair(&i, &r, K1, K1, 0, -1);
    memcpy(m1, i.out, sizeof m1);
    CHECK(sec_hs_feed(&r, m1, sizeof m1, &used) == 0 && !sec_hs_done(&r));
    memcpy(m2, r.out, sizeof m2);
    CHECK(sec_hs_feed(&i, m2, sizeof m2, &used) == 0 && sec_hs_done(&i));
    memcpy(m3, i.out, sizeof m3);
    CHECK(sec_hs_feed(&r, m3, sizeof m3, &used) == 0 && sec_hs_done(&r));

    sec_hs_t i2, r2;
    start_pair(&i2, &r2, K1, K1, 0, -1);
    CHECK(sec_hs_feed(&r2, m1, sizeof m1, &used) == 0);
    CHECK(memcmp(r2.out, m2, sizeof m2) != 0); /* a fresh answer */
    CHECK(sec_hs_feed(&r2, m3, sizeof m3, &used) == -PERR_REFUSED);
    CHECK(sec_hs_feed(&i2, m2, sizeof m2, &used) == -PERR_REFUSED);
}

/* Any bit of MSG2 or MSG3 changed on the way fails the handshake (the MACs cover the transcript). */
static void test_altered(void) {
    static const size_t at2[] = {6, 8, 40, 72, 103, 104, 135};
    for (size_t k = 0; k < sizeof at2 / sizeof at2[0]; k++) {
        sec_hs_t i, r;
        size_t used;
        start_pair(&i, &r, K1, K1, 0, -1);
        sec_hs_feed(&r, i.out, i.out_len, &used);
        r.out[at2[k]] ^= 0x01;
        CHECK(sec_hs_feed(&i, r.out, r.out_len, &used) < 0 && !sec_hs_done(&i));
    }
    sec_hs_t i, r;
    size_t used;
    start_pair(&i, &r, K1, K1, 0, -1);
    i.out[70] ^= 0x80; /* MSG1's nonce: the responder answers, but the proofs no longer match */
    sec_hs_feed(&r, i.out, i.out_len, &used);
    /* (the initiator hashes its own MSG1, so it rejects the answer) */
    CHECK(sec_hs_feed(&i, r.out, r.out_len, &used) == -PERR_REFUSED);
}

static void test_garbage_and_oversize(void) {
    sec_hs_t i, r;
    size_t used;
    uint8_t junk[4096];
    memset(junk, 0x5A, sizeof junk);
    start_pair(&i, &r, K1, K1, 0, -1);
    CHECK(sec_hs_feed(&r, junk, sizeof junk, &used) == -PERR_PROTOCOL);
    CHECK(used <= SEC_HS_MSG1 && r.out_len == 0);
    /* An open client's control HELLO is not a handshake. */
    static const uint8_t hello[] = {0, 0, 0, 18, 0, 1, 0x50, 0x43, 0x43, 0x4c, 0, 2};
    start_pair(&i, &r, K1, K1, 0, -1);
    CHECK(sec_hs_feed(&r, hello, sizeof hello, &used) == -PERR_PROTOCOL);
    /* Wrong version, type, purpose. */
    for (int f = 0; f < 3; f++) {
        start_pair(&i, &r, K1, K1, 0, -1);
        uint8_t m1[SEC_HS_MSG1];
        memcpy(m1, i.out, sizeof m1);
        m1[4 + f] ^= 0x40;
        CHECK(sec_hs_feed(&r, m1, 8, &used) == -PERR_PROTOCOL); /* known from the header alone */
    }
    /* A valid MSG1 followed by more bytes: only the message is taken. */
    start_pair(&i, &r, K1, K1, 0, -1);
    memcpy(junk, i.out, SEC_HS_MSG1);
    CHECK(sec_hs_feed(&r, junk, sizeof junk, &used) == 0);
    CHECK(used == SEC_HS_MSG1 && r.out_len == SEC_HS_MSG2);
    CHECK(sec_hs_want(&r) == SEC_HS_MSG3);
    /* Junk where MSG3 belongs fails on its header; nothing is taken after a failure. */
    CHECK(sec_hs_feed(&r, junk + SEC_HS_MSG1, 8, &used) == -PERR_PROTOCOL);
    CHECK(sec_hs_feed(&r, junk, 8, &used) == -PERR_PROTOCOL && used == 0 && !sec_hs_done(&r));
}

static void test_truncated(void) {
    sec_hs_t i, r;
    size_t used;
    start_pair(&i, &r, K1, K1, 0, -1);
    for (size_t k = 0; k + 1 < SEC_HS_MSG1; k++) {
        CHECK(sec_hs_feed(&r, i.out + k, 1, &used) == 0 && used == 1);
        CHECK(r.out_len == 0);
    }
    CHECK(sec_hs_want(&r) == 1);
    CHECK(sec_hs_feed(&r, i.out + SEC_HS_MSG1 - 1, 1, &used) == 0 && r.out_len == SEC_HS_MSG2 && !sec_hs_done(&r));
}

static void test_policy(void) {
    sec_hs_t i, r;
    int ri, rr;
    start_pair(&i, &r, K1, K1, SEC_FLAG_ENCRYPT, 0); /* the initiator's run does not encrypt */
    hs_run(&i, &r, &ri, &rr);
    CHECK(ri == -PERR_REFUSED && !sec_hs_done(&r));
    start_pair(&i, &r, K1, K1, 0, SEC_FLAG_ENCRYPT);
    hs_run(&i, &r, &ri, &rr);
    CHECK(ri == -PERR_REFUSED);
    /* The initiator meant another peer: the responder's context must match. */
    sec_cfg_t k = test_key(K1);
    uint8_t want[16];
    memset(want, 0xB3, sizeof want);
    sec_hs_params_t pi = {.role = SEC_INITIATOR, .purpose = SEC_PURPOSE_P2P, .flags = 0, .expect_ctx = want,
                          .expect_ctx_len = 16};
    sec_hs_params_t pr = {.role = SEC_RESPONDER, .purpose = SEC_PURPOSE_P2P, .flags = 0};
    CHECK(sec_hs_start(&i, &k, &pi) == 0 && sec_hs_start(&r, &k, &pr) == 0);
    hs_run(&i, &r, &ri, &rr);
    CHECK(ri == -PERR_REFUSED && strstr(i.err, "expected") != NULL);
    /* A control handshake does not open a p2p port. */
    sec_hs_params_t pc = {.role = SEC_INITIATOR, .purpose = SEC_PURPOSE_CONTROL, .flags = -1};
    CHECK(sec_hs_start(&i, &k, &pc) == 0 && sec_hs_start(&r, &k, &pr) == 0);
    hs_run(&i, &r, &ri, &rr);
    CHECK(rr == -PERR_PROTOCOL);
    /* No key, no handshake. */
    sec_cfg_t none = {0};
    CHECK(sec_hs_start(&i, &none, &pi) == -PERR_INVALID);
}

/* Runs an encrypting handshake between sides that prefer ci and cr; the cipher both ended with,
 * or -1 when they disagree or failed. */
static int agreed(int ci, int cr) {
    sec_cfg_t k = test_key(K1);
    sec_hs_params_t pi = {.role = SEC_INITIATOR, .purpose = SEC_PURPOSE_P2P, .flags = -1, .cipher = ci};
    sec_hs_params_t pr = {.role = SEC_RESPONDER, .purpose = SEC_PURPOSE_P2P, .flags = SEC_FLAG_ENCRYPT, .cipher = cr};
    sec_hs_t i, r;
    int ri, rr;
    CHECK(sec_hs_start(&i, &k, &pi) == 0 && sec_hs_start(&r, &k, &pr) == 0);
    hs_run(&i, &r, &ri, &rr);
    return ri == 0 && rr == 0 && sec_hs_done(&i) && sec_hs_done(&r) && i.session.cipher == r.session.cipher ? i.session.cipher : -1;
}

static void test_cipher_agreement(void) {
    const int A = SEC_CIPHER_AES256GCM, C = SEC_CIPHER_CHACHA20POLY1305;
    CHECK(agreed(A, A) == A);
    CHECK(agreed(A, C) == C && agreed(C, A) == C && agreed(C, C) == C); /* AES only where both have it */
    CHECK(agreed(0, 0) == sec_cipher_preferred());
    /* A run that does not encrypt has no cipher. */
    sec_hs_t i, r;
    int ri, rr;
    start_pair(&i, &r, K1, K1, 0, -1);
    hs_run(&i, &r, &ri, &rr);
    CHECK(ri == 0 && sec_hs_done(&i) && i.session.cipher == SEC_CIPHER_NONE && r.session.cipher == SEC_CIPHER_NONE);
    /* A responder that answers AES to an initiator that asked for ChaCha20 is refused, before the MAC. */
    sec_cfg_t k = test_key(K1);
    sec_hs_params_t pi = {.role = SEC_INITIATOR, .purpose = SEC_PURPOSE_P2P, .flags = -1, .cipher = C};
    sec_hs_params_t pr = {.role = SEC_RESPONDER, .purpose = SEC_PURPOSE_P2P, .flags = SEC_FLAG_ENCRYPT, .cipher = A};
    size_t used;
    CHECK(sec_hs_start(&i, &k, &pi) == 0 && sec_hs_start(&r, &k, &pr) == 0);
    CHECK(sec_hs_feed(&r, i.out, i.out_len, &used) == 0 && r.out_len == SEC_HS_MSG2 && r.out[7] == C);
    r.out[7] = A;
    CHECK(sec_hs_feed(&i, r.out, r.out_len, &used) == -PERR_PROTOCOL && strstr(i.err, "cipher") != NULL);
    /* An unknown cipher in MSG1 or MSG2 fails; so does asking for one. */
    CHECK(sec_hs_start(&i, &k, &pi) == 0 && sec_hs_start(&r, &k, &pr) == 0);
    uint8_t m1[SEC_HS_MSG1];
    memcpy(m1, i.out, sizeof m1);
    m1[7] = 7;
    CHECK(sec_hs_feed(&r, m1, sizeof m1, &used) == -PERR_PROTOCOL);
    CHECK(sec_hs_start(&r, &k, &pr) == 0 && sec_hs_feed(&r, i.out, i.out_len, &used) == 0);
    r.out[7] = 0;
    CHECK(sec_hs_feed(&i, r.out, r.out_len, &used) == -PERR_PROTOCOL);
    sec_hs_params_t bad = pi;
    bad.cipher = 9;
    CHECK(sec_hs_start(&i, &k, &bad) == -PERR_INVALID);
    /* The cipher bytes are in the transcript: a changed preference fails the responder's MAC. */
    sec_hs_params_t pa = pi;
    pa.cipher = A;
    CHECK(sec_hs_start(&i, &k, &pa) == 0 && sec_hs_start(&r, &k, &pr) == 0);
    memcpy(m1, i.out, sizeof m1);
    m1[7] = C;
    CHECK(sec_hs_feed(&r, m1, sizeof m1, &used) == 0 && r.out[7] == C);
    CHECK(sec_hs_feed(&i, r.out, r.out_len, &used) == -PERR_REFUSED);
}

/* A failed handshake keeps its code: every later feed returns it again and takes nothing; it never reports
 * done. Completion is sec_hs_done's answer, not a value of the feed. */
static void test_failure_codes(void) {
    sec_hs_t i, r;
    size_t used;
    int ri, rr;
    start_pair(&i, &r, K1, K2, 0, -1);
    hs_run(&i, &r, &ri, &rr);
    CHECK(ri == -PERR_REFUSED && !sec_hs_done(&i));
    CHECK(sec_hs_feed(&i, r.out, SEC_HS_MSG2, &used) == -PERR_REFUSED && used == 0 && !sec_hs_done(&i));
    uint8_t junk[SEC_HS_MSG1];
    memset(junk, 0xA5, sizeof junk);
    start_pair(&i, &r, K1, K1, 0, -1);
    CHECK(sec_hs_feed(&r, junk, sizeof junk, &used) == -PERR_PROTOCOL);
    CHECK(sec_hs_feed(&r, i.out, i.out_len, &used) == -PERR_PROTOCOL && used == 0 && r.out_len == 0);
    /* Done stays done: feeding more takes nothing and is no failure. */
    start_pair(&i, &r, K1, K1, 0, -1);
    hs_run(&i, &r, &ri, &rr);
    CHECK(ri == 0 && rr == 0 && sec_hs_done(&i) && sec_hs_done(&r));
    CHECK(sec_hs_feed(&r, junk, sizeof junk, &used) == 0 && used == 0 && sec_hs_done(&r));
    /* Parameters no handshake can have: the start says so, and so does every feed. */
    sec_cfg_t none = {0};
    sec_hs_params_t pi = {.role = SEC_INITIATOR, .purpose = SEC_PURPOSE_P2P, .flags = -1};
    CHECK(sec_hs_start(&i, &none, &pi) == -PERR_INVALID);
    CHECK(sec_hs_feed(&i, junk, sizeof junk, &used) == -PERR_INVALID && !sec_hs_done(&i));
}

int main(void) {
    RUN_TEST(test_good_key);
    RUN_TEST(test_wrong_key);
    RUN_TEST(test_replay);
    RUN_TEST(test_altered);
    RUN_TEST(test_garbage_and_oversize);
    RUN_TEST(test_truncated);
    RUN_TEST(test_policy);
    RUN_TEST(test_cipher_agreement);
    RUN_TEST(test_failure_codes);
    TEST_MAIN_END();
}
