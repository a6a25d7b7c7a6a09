/* sec_pair.h - two handshake state machines run against each other in memory, and the
 * keys the tests use. */
#ifndef PCCL_TEST_SEC_PAIR_H
#define PCCL_TEST_SEC_PAIR_H

#include <string.h>

#include "sec_hs.h"
#include "sec_key.h"

static inline sec_cfg_t test_key(const char *text) {
    sec_cfg_t cfg = {0};
    char err[160];
    if (sec_key_from_bytes(text, strlen(text), &cfg, err, sizeof err) != 0) cfg.keyed = 0;
    return cfg;
}

/* Hands each side's output to the other until neither has anything to say; the final results
 * of both sides in *ri / *rr (SEC_HS_MORE if a side never finished). */
static inline void hs_run(sec_hs_t *ini, sec_hs_t *res, int *ri, int *rr) {
    *ri = *rr = SEC_HS_MORE;
    for (int round = 0; round < 8; round++) {
        size_t used;
        int moved = 0;
        if (ini->out_len && *rr == SEC_HS_MORE) {
            *rr = sec_hs_feed(res, ini->out, ini->out_len, &used);
            ini->out_len = 0;
            moved = 1;
        }
        if (res->out_len && *ri == SEC_HS_MORE) {
            *ri = sec_hs_feed(ini, res->out, res->out_len, &used);
            res->out_len = 0;
            moved = 1;
        }
        if (!moved) break;
    }
}

#endif
