/* master_secure.c - see master_secure.h. */
#include "server/master_secure.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sec/sec.h"
#include "base/base.h"

int msec_start(msec_t *x, const sec_cfg_t *cfg, uint64_t now_ms) {
    memset(x, 0, sizeof *x);
    x->hs = malloc(sizeof *x->hs);
    sec_hs_params_t p = {.role = SEC_RESPONDER, .purpose = SEC_PURPOSE_CONTROL,
                         .flags = cfg->encrypt ? SEC_FLAG_ENCRYPT : 0};
    if (!x->hs || sec_hs_start(x->hs, cfg, &p) != 0) {
        free(x->hs);
        x->hs = NULL;
        return -PERR_NOMEM;
    }
    x->started_ms = now_ms;
    return 0;
}

static void end_handshake(msec_t *x) {
    sec_hs_wipe(x->hs);
    free(x->hs);
    x->hs = NULL;
}

/* The first bytes of an open client: a control frame's length, then HELLO's type. */
static int looks_open(const uint8_t *buf, size_t len) {
    if (len < 6) return 0;
    uint32_t body = wire_get_u32(buf);
    return body >= 2 && body <= WIRE_MAX_BODY && wire_get_u16(buf + 4) == C2M_HELLO;
}

int msec_feed(msec_t *x, uint8_t *buf, size_t *len, msec_state_t *state, char *err, size_t errlen) {
    *state = MSEC_HANDSHAKING;
    /* An open client's HELLO gets a clear refusal rather than a silent close. */
    if (x->hs->in_len == 0 && sec_hs_want(x->hs) == SEC_HS_MSG1 && looks_open(buf, *len)) {
        snprintf(err, errlen, "the client has no run key");
        end_handshake(x);
        *state = MSEC_OPEN_CLIENT;
        return 0;
    }
    size_t used;
    int r = sec_hs_feed(x->hs, buf, *len, &used);
    memmove(buf, buf + used, *len - used);
    *len -= used;
    if (r != 0) {
        snprintf(err, errlen, "%s", x->hs->err);
        end_handshake(x);
        return r;
    }
    if (!sec_hs_done(x->hs)) return 0;
    x->encrypt = x->hs->session.encrypt;
    int keyed = !x->encrypt || sec_aead_init(&x->a, &x->hs->session) == 0;
    end_handshake(x);
    if (!keyed) {
        snprintf(err, errlen, "cannot set up the cipher");
        return -PERR_FAILED;
    }
    if (x->encrypt && *len) {
        size_t avail;
        uint8_t *space = msec_raw_space(x, &avail);
        if (!space || avail < *len) {
            snprintf(err, errlen, "out of memory");
            return -PERR_NOMEM;
        }
        memcpy(space, buf, *len);
        x->raw_len += *len;
        *len = 0;
    }
    *state = MSEC_READY;
    return 0;
}

#define RAW_READ (64u << 10) /* what each read may add */

uint8_t *msec_raw_space(msec_t *x, size_t *avail) {
    if (x->raw_cap - x->raw_len < RAW_READ) {
        size_t cap = x->raw_cap ? x->raw_cap * 2 : 2 * (SEC_FRAME_MAX + SEC_FRAME_OVERHEAD);
        while (cap - x->raw_len < RAW_READ) cap *= 2;
        uint8_t *b = realloc(x->raw, cap);
        if (!b) return NULL;
        x->raw = b;
        x->raw_cap = cap;
    }
    *avail = x->raw_cap - x->raw_len;
    return x->raw + x->raw_len;
}

int msec_open(msec_t *x, uint8_t **buf, size_t *len, size_t *cap) {
    size_t off = 0;
    while (x->raw_len - off >= SEC_FRAME_HDR) {
        size_t fs = sec_frame_size(x->raw + off);
        if (!fs) return -PERR_REFUSED;
        if (x->raw_len - off < fs) break;
        int rc = sec_frame_open(&x->a, x->raw + off, fs);
        if (rc != 0) return rc;
        size_t n = fs - SEC_FRAME_OVERHEAD;
        if (*cap - *len < n) {
            size_t nc = *cap ? *cap : 131072;
            while (nc - *len < n) nc *= 2;
            uint8_t *b = realloc(*buf, nc);
            if (!b) return -PERR_NOMEM;
            *buf = b;
            *cap = nc;
        }
        memcpy(*buf + *len, x->raw + off + SEC_FRAME_HDR, n);
        *len += n;
        off += fs;
    }
    if (off) { /* nothing consumed: raw may not be allocated yet (memmove of NULL is undefined) */
        memmove(x->raw, x->raw + off, x->raw_len - off);
        x->raw_len -= off;
    }
    /* A buffer that grew for a burst goes back to its usual size. */
    if (x->raw_cap > 4 * (SEC_FRAME_MAX + SEC_FRAME_OVERHEAD) && x->raw_len < RAW_READ) {
        uint8_t *b = realloc(x->raw, 2 * (SEC_FRAME_MAX + SEC_FRAME_OVERHEAD));
        if (b) {
            x->raw = b;
            x->raw_cap = 2 * (SEC_FRAME_MAX + SEC_FRAME_OVERHEAD);
        }
    }
    return 0;
}

int msec_seal(msec_t *x, const uint8_t *pt, size_t len, uint8_t **out, size_t *out_len) {
    size_t frames = (len + SEC_FRAME_MAX - 1) / SEC_FRAME_MAX;
    uint8_t *b = malloc(len + frames * SEC_FRAME_OVERHEAD);
    if (!b) return -PERR_NOMEM;
    size_t o = 0;
    for (size_t off = 0; off < len;) {
        size_t n = len - off < SEC_FRAME_MAX ? len - off : SEC_FRAME_MAX;
        int rc = sec_frame_seal(&x->a, pt + off, n, b + o);
        if (rc != 0) {
            free(b);
            return rc;
        }
        off += n;
        o += n + SEC_FRAME_OVERHEAD;
    }
    *out = b;
    *out_len = o;
    return 0;
}

void msec_free(msec_t *x) {
    if (x->hs) end_handshake(x);
    sec_aead_free(&x->a);
    free(x->raw);
    x->raw = NULL;
    x->raw_len = x->raw_cap = 0;
}
