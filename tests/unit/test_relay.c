/* test_relay.c - the relay's tokens and greeting (sec_relay.c) and the master's list of relays
 * (msm_set_relays): a token checks under the key it was minted with and no other, a changed byte anywhere
 * fails it, and the greeting parser judges each byte as it arrives. */
#include <string.h>

#include "sec/sec.h"
#include "sm/master_sm.h"
#include "tinytest.h"

static const uint8_t NONCE[RELAY_NONCE_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static void psk_of(const char *key, uint8_t psk[SEC_PSK_BYTES]) {
    sec_cfg_t cfg = {0};
    char err[256];
    CHECK(sec_key_from_bytes(key, strlen(key), &cfg, err, sizeof err) == 0);
    memcpy(psk, cfg.psk, SEC_PSK_BYTES);
}

static void test_token_checks_under_its_key_only(void) {
    uint8_t a[SEC_PSK_BYTES], b[SEC_PSK_BYTES], tok[RELAY_TOKEN_BYTES], tok2[RELAY_TOKEN_BYTES];
    psk_of("the run key of run A, 32 bytes or more", a);
    psk_of("the run key of run B, 32 bytes or more", b);
    CHECK(relay_token_make(a, NONCE, tok) == 0);
    CHECK(memcmp(tok, NONCE, RELAY_NONCE_BYTES) == 0); /* the nonce travels in the clear */
    CHECK(relay_token_check(a, tok) == 0);
    CHECK(relay_token_check(b, tok) == -PERR_REFUSED);    /* another run's relay */
    CHECK(relay_token_check(NULL, tok) == -PERR_REFUSED); /* not an open run's token either */
    CHECK(relay_token_make(a, NONCE, tok2) == 0 && memcmp(tok, tok2, sizeof tok) == 0); /* deterministic */
    /* the MAC is not the PSK's bytes nor the nonce again */
    CHECK(memcmp(tok + RELAY_NONCE_BYTES, a, RELAY_TOKEN_BYTES - RELAY_NONCE_BYTES) != 0);
    CHECK(memcmp(tok + RELAY_NONCE_BYTES, NONCE, RELAY_NONCE_BYTES) != 0);
}

static void test_token_key_checks_what_the_run_key_minted(void) {
    uint8_t a[SEC_PSK_BYTES], b[SEC_PSK_BYTES], ka[RELAY_KEY_BYTES], kb[RELAY_KEY_BYTES], tok[RELAY_TOKEN_BYTES];
    psk_of("the run key of run A, 32 bytes or more", a);
    psk_of("the run key of run B, 32 bytes or more", b);
    CHECK(relay_token_key(a, ka) == 0 && relay_token_key(b, kb) == 0);
    CHECK(memcmp(ka, a, sizeof ka) != 0 && memcmp(ka, kb, sizeof ka) != 0); /* not the PSK, one per run */
    CHECK(relay_token_make(a, NONCE, tok) == 0);
    CHECK(relay_token_check_key(ka, tok) == 0);
    CHECK(relay_token_check_key(kb, tok) == -PERR_REFUSED);
    CHECK(relay_token_check_key(NULL, tok) == -PERR_REFUSED);
    /* the token key is not usable as a run key: tokens minted with it as the PSK do not check */
    uint8_t forged[RELAY_TOKEN_BYTES];
    CHECK(relay_token_make(ka, NONCE, forged) == 0 && relay_token_check_key(ka, forged) == -PERR_REFUSED);
}

static void test_unkeyed_token_is_refused_by_a_keyed_check(void) {
    uint8_t k[SEC_PSK_BYTES], tok[RELAY_TOKEN_BYTES];
    psk_of("the run key of run A, 32 bytes or more", k);
    CHECK(relay_token_make(NULL, NONCE, tok) == 0);
    CHECK(relay_token_check(NULL, tok) == 0);
    CHECK(relay_token_check(k, tok) == -PERR_REFUSED);
    uint8_t zero[RELAY_TOKEN_BYTES] = {0};
    CHECK(relay_token_check(k, zero) == -PERR_REFUSED);
}

static void test_any_tampered_byte_fails_the_check(void) {
    uint8_t k[SEC_PSK_BYTES], tok[RELAY_TOKEN_BYTES];
    psk_of("the run key of run A, 32 bytes or more", k);
    CHECK(relay_token_make(k, NONCE, tok) == 0);
    for (int i = 0; i < RELAY_TOKEN_BYTES; i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            uint8_t t[RELAY_TOKEN_BYTES];
            memcpy(t, tok, sizeof t);
            t[i] ^= (uint8_t)(1u << bit);
            CHECK(relay_token_check(k, t) == -PERR_REFUSED);
        }
    }
    /* another nonce gives another MAC */
    uint8_t n2[RELAY_NONCE_BYTES], tok2[RELAY_TOKEN_BYTES];
    memcpy(n2, NONCE, sizeof n2);
    n2[15] ^= 1;
    CHECK(relay_token_make(k, n2, tok2) == 0 && memcmp(tok2 + 16, tok + 16, 16) != 0);
}

static void test_greeting_round_trip_and_byte_by_byte(void) {
    uint8_t tok[RELAY_TOKEN_BYTES], g[RELAY_GREETING_BYTES];
    CHECK(relay_token_make(NULL, NONCE, tok) == 0);
    relay_greeting_encode(tok, RELAY_ROLE_TARGET, g);
    CHECK(g[0] == 'P' && g[1] == 'C' && g[2] == 'R' && g[3] == 'L' && g[4] == RELAY_VERSION);
    relay_greeting_t out;
    for (size_t len = 0; len < RELAY_GREETING_BYTES; len++)
        CHECK(relay_greeting_parse(g, len, &out) == (int)(RELAY_GREETING_BYTES - len));
    memset(&out, 0, sizeof out);
    CHECK(relay_greeting_parse(g, RELAY_GREETING_BYTES, &out) == 0);
    CHECK(out.role == RELAY_ROLE_TARGET && memcmp(out.token, tok, sizeof tok) == 0);
    relay_greeting_encode(tok, RELAY_ROLE_DIALER, g);
    CHECK(relay_greeting_parse(g, RELAY_GREETING_BYTES, &out) == 0 && out.role == RELAY_ROLE_DIALER);
}

static void test_greeting_refuses_garbage_at_its_first_wrong_byte(void) {
    uint8_t tok[RELAY_TOKEN_BYTES] = {0}, g[RELAY_GREETING_BYTES];
    relay_greeting_t out;
    relay_greeting_encode(tok, RELAY_ROLE_DIALER, g);
    for (int i = 0; i < 4; i++) { /* a wrong magic byte is caught with nothing after it */
        uint8_t b[RELAY_GREETING_BYTES];
        memcpy(b, g, sizeof b);
        b[i] ^= 0x20;
        CHECK(relay_greeting_parse(b, (size_t)i + 1, &out) == -PERR_PROTOCOL);
    }
    const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(relay_greeting_parse((const uint8_t *)http, strlen(http), &out) == -PERR_PROTOCOL);
    uint8_t b[RELAY_GREETING_BYTES];
    memcpy(b, g, sizeof b);
    b[4] = RELAY_VERSION + 1; /* another version: refused, so the relay can say so */
    CHECK(relay_greeting_parse(b, 5, &out) == -PERR_REFUSED);
    memcpy(b, g, sizeof b);
    b[RELAY_GREETING_BYTES - 1] = 2; /* no such role */
    CHECK(relay_greeting_parse(b, RELAY_GREETING_BYTES - 1, &out) == 1);
    CHECK(relay_greeting_parse(b, RELAY_GREETING_BYTES, &out) == -PERR_PROTOCOL);
}

static void test_status_strings(void) {
    for (int st = RELAY_ST_PAIRED; st <= RELAY_ST_VERSION; st++)
        CHECK(strcmp(relay_status_str(st), "unknown relay status") != 0);
    CHECK(strcmp(relay_status_str(200), "unknown relay status") == 0);
}

static void noop_send(void *ctx, uint64_t conn, const wire_msg_t *msg) { (void)ctx, (void)conn, (void)msg; }
static void noop_close(void *ctx, uint64_t conn, const char *reason) { (void)ctx, (void)conn, (void)reason; }

static void test_master_keeps_its_relays(void) {
    msm_t *m = msm_create((msm_io_t){.send = noop_send, .close = noop_close});
    CHECK(m != NULL);
    uint32_t n = 99;
    msm_relays(m, &n);
    CHECK(n == 0);
    ccoip_socket_address_t r[MSM_RELAYS_MAX + 1];
    memset(r, 0, sizeof r);
    for (int i = 0; i <= MSM_RELAYS_MAX; i++) {
        r[i].inet.protocol = inetIPv4;
        r[i].inet.ipv4.data[0] = 10;
        r[i].inet.ipv4.data[3] = (uint8_t)(i + 1);
        r[i].port = (uint16_t)(48153 + i);
    }
    CHECK(msm_set_relays(m, r, 2) == 0);
    const ccoip_socket_address_t *got = msm_relays(m, &n);
    CHECK(n == 2 && memcmp(got, r, 2 * sizeof *r) == 0);
    CHECK(msm_set_relays(m, r, MSM_RELAYS_MAX + 1) == -PERR_INVALID); /* too many: unchanged */
    CHECK(msm_set_relays(m, NULL, 1) == -PERR_INVALID);
    got = msm_relays(m, &n);
    CHECK(n == 2 && got[1].port == 48154);
    CHECK(msm_set_relays(m, r, MSM_RELAYS_MAX) == 0);
    got = msm_relays(m, &n);
    CHECK(n == MSM_RELAYS_MAX && got[MSM_RELAYS_MAX - 1].inet.ipv4.data[3] == MSM_RELAYS_MAX);
    CHECK(msm_set_relays(m, NULL, 0) == 0);
    msm_relays(m, &n);
    CHECK(n == 0);
    msm_destroy(m);
}

int main(void) {
    RUN_TEST(test_token_checks_under_its_key_only);
    RUN_TEST(test_token_key_checks_what_the_run_key_minted);
    RUN_TEST(test_unkeyed_token_is_refused_by_a_keyed_check);
    RUN_TEST(test_any_tampered_byte_fails_the_check);
    RUN_TEST(test_greeting_round_trip_and_byte_by_byte);
    RUN_TEST(test_greeting_refuses_garbage_at_its_first_wrong_byte);
    RUN_TEST(test_status_strings);
    RUN_TEST(test_master_keeps_its_relays);
    TEST_MAIN_END();
}
