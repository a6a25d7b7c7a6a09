/* sec_pair.h - two handshake state machines run against each other in memory, and the
 * keys the tests use. */
#ifndef PCCL_TEST_SEC_PAIR_H
#define PCCL_TEST_SEC_PAIR_H

#include <string.h>

#include "sec/sec_hs.h"
#include "sec/sec_key.h"

static inline sec_cfg_t test_key(const char *text) {
    sec_cfg_t cfg = {0};
    char err[160];
    if (sec_key_from_bytes(text, strlen(text), &cfg, err, sizeof err) != 0) cfg.keyed = 0;
    return cfg;
}

/* Hands each side's output to the other until neither has anything to say; each side's last
 * sec_hs_feed result in *ri / *rr (0 also for a side that never finished: ask sec_hs_done). */
static inline void hs_run(sec_hs_t *ini, sec_hs_t *res, int *ri, int *rr) {
    *ri = *rr = 0;
    for (int round = 0; round < 8; round++) {
        size_t used;
        int moved = 0;
        if (ini->out_len && *rr == 0 && !sec_hs_done(res)) {
            *rr = sec_hs_feed(res, ini->out, ini->out_len, &used);
            ini->out_len = 0;
            moved = 1;
        }
        if (res->out_len && *ri == 0 && !sec_hs_done(ini)) {
            *ri = sec_hs_feed(ini, res->out, res->out_len, &used);
            res->out_len = 0;
            moved = 1;
        }
        if (!moved) break;
    }
}

/* The two ends of one encrypted session, as a handshake with key leaves them when both sides
 * prefer cipher (0: this machine's preference). 0, or -1. */
static inline int session_pair_cipher(const char *key, int cipher, sec_session_t *a, sec_session_t *b) {
    sec_hs_t i, r;
    sec_cfg_t k = test_key(key);
    sec_hs_params_t pi = {.role = SEC_INITIATOR, .purpose = SEC_PURPOSE_P2P, .flags = -1, .cipher = cipher};
    sec_hs_params_t pr = {.role = SEC_RESPONDER, .purpose = SEC_PURPOSE_P2P, .flags = SEC_FLAG_ENCRYPT,
                          .cipher = cipher};
    int ri, rr;
    sec_hs_start(&i, &k, &pi);
    sec_hs_start(&r, &k, &pr);
    hs_run(&i, &r, &ri, &rr);
    *a = i.session;
    *b = r.session;
    return ri == 0 && rr == 0 && sec_hs_done(&i) && sec_hs_done(&r) && a->encrypt && a->cipher == b->cipher ? 0 : -1;
}

static inline int session_pair_of(const char *key, sec_session_t *a, sec_session_t *b) {
    return session_pair_cipher(key, 0, a, b);
}

#endif
