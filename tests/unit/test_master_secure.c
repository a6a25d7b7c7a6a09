/* test_master_secure.c - the master's side of a keyed run (master/server/master_secure.c) under the one error
 * convention: msec_feed returns 0 or a -PERR_<NAME> code and says where the handshake stands in its own state
 * (handshaking, ready, open client), never both in one value. */
#include <string.h>

#include "base/base.h"
#include "sec_pair.h"
#include "server/master_secure.h"
#include "tinytest.h"

static const char *KEY = "0123456789abcdef0123456789abcdef-master-secure";

/* The master's responder and a peer's initiator; the initiator's MSG1 is in i->out. */
static void start(msec_t *x, sec_hs_t *i, const char *peer_key) {
    sec_cfg_t km = test_key(KEY), kp = test_key(peer_key);
    CHECK(msec_start(x, &km, 0) == 0);
    sec_hs_params_t pi = {.role = SEC_INITIATOR, .purpose = SEC_PURPOSE_CONTROL, .flags = -1};
    CHECK(sec_hs_start(i, &kp, &pi) == 0);
}

/* Feeds bytes as the server does (the connection's input buffer); what the master answers goes to the peer i. */
static int feed(msec_t *x, sec_hs_t *i, const uint8_t *in, size_t n, msec_state_t *st, char *err, size_t errlen) {
    uint8_t buf[SEC_HS_MSG2];
    memcpy(buf, in, n);
    size_t len = n, used;
    int rc = msec_feed(x, buf, &len, st, err, errlen);
    if (rc == 0 && x->hs && x->hs->out_len) {
        CHECK(sec_hs_feed(i, x->hs->out, x->hs->out_len, &used) == 0);
        x->hs->out_len = 0;
    }
    return rc;
}

static void test_ready(void) {
    msec_t x;
    sec_hs_t i;
    char err[128] = "";
    msec_state_t st;
    start(&x, &i, KEY);
    CHECK(feed(&x, &i, i.out, i.out_len, &st, err, sizeof err) == 0 && st == MSEC_HANDSHAKING);
    CHECK(sec_hs_done(&i) && i.out_len == SEC_HS_MSG3);
    CHECK(feed(&x, &i, i.out, i.out_len, &st, err, sizeof err) == 0 && st == MSEC_READY && x.hs == NULL);
    msec_free(&x);
}

static void test_refused(void) {
    msec_t x;
    sec_hs_t i;
    char err[128] = "";
    msec_state_t st;
    /* Another key: the peer refuses MSG2; a MSG3 without the proof is refused by the master. */
    start(&x, &i, "another-key-0123456789abcdef0123456789abcdef");
    uint8_t m1[SEC_HS_MSG1];
    memcpy(m1, i.out, sizeof m1);
    size_t len = sizeof m1, used;
    CHECK(msec_feed(&x, m1, &len, &st, err, sizeof err) == 0 && st == MSEC_HANDSHAKING && len == 0);
    CHECK(sec_hs_feed(&i, x.hs->out, x.hs->out_len, &used) == -PERR_REFUSED && !sec_hs_done(&i));
    x.hs->out_len = 0;
    uint8_t m3[SEC_HS_MSG3] = {0};
    wire_put_u32(m3, SEC_HS_MAGIC);
    m3[4] = SEC_HS_VERSION;
    m3[5] = 3;
    len = sizeof m3;
    CHECK(msec_feed(&x, m3, &len, &st, err, sizeof err) == -PERR_REFUSED && strstr(err, "run key") != NULL);
    CHECK(x.hs == NULL); /* the handshake state is freed after a failure */
    msec_free(&x);
    /* Bytes that are no handshake at all. */
    start(&x, &i, KEY);
    uint8_t junk[SEC_HS_MSG1];
    memset(junk, 0x5A, sizeof junk);
    len = sizeof junk;
    CHECK(msec_feed(&x, junk, &len, &st, err, sizeof err) == -PERR_PROTOCOL && st == MSEC_HANDSHAKING);
    msec_free(&x);
}

/* An open client's HELLO is no failure of the handshake but a state of its own: the master answers it. */
static void test_open_client(void) {
    msec_t x;
    sec_hs_t i;
    char err[128] = "";
    msec_state_t st = MSEC_READY;
    start(&x, &i, KEY);
    uint8_t hello[32] = {0, 0, 0, 18};
    wire_put_u16(hello + 4, C2M_HELLO);
    size_t len = sizeof hello;
    CHECK(msec_feed(&x, hello, &len, &st, err, sizeof err) == 0 && st == MSEC_OPEN_CLIENT && x.hs == NULL);
    CHECK(strstr(err, "no run key") != NULL);
    msec_free(&x);
}

int main(void) {
    RUN_TEST(test_ready);
    RUN_TEST(test_refused);
    RUN_TEST(test_open_client);
    TEST_MAIN_END();
}
