/* p2p_hello.c - see p2p_hello.h. */
#include "p2p_hello.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wire.h"

/* The run's encryption is what the master announced: a p2p connection must agree with it. */
static void params_for(const sec_cfg_t *sec, int role, const uint8_t *ctx, const uint8_t *expect, sec_hs_params_t *p) {
    *p = (sec_hs_params_t){.role = role, .purpose = SEC_PURPOSE_P2P, .flags = sec->encrypt ? SEC_FLAG_ENCRYPT : 0,
                           .ctx = ctx, .expect_ctx = expect, .expect_ctx_len = expect ? 16 : 0};
}

static int finish(sec_hs_t *hs, sec_link_t **link) {
    int rc = 0;
    if (hs->session.encrypt && !(*link = sec_link_new(&hs->session))) rc = -1;
    sec_hs_wipe(hs);
    return rc;
}

int p2p_dial(const ccoip_socket_address_t *to, const sec_cfg_t *sec, const p2p_intro_t *me,
             const uint8_t peer_uuid[16], int timeout_ms, const net_cancel_t *cancel, sec_link_t **link, char *err,
             size_t errlen) {
    *link = NULL;
    snprintf(err, errlen, "handshake: cannot start");
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    int fd = net_connect_cancellable(to, timeout_ms, cancel);
    if (fd < 0) {
        snprintf(err, errlen, "connect: %s", strerror(errno));
        return -1;
    }
    uint8_t ctx[SEC_HS_CTX] = {0};
    wire_p2p_hello_encode(ctx, me->kind, me->uuid, me->slot);
    if (!sec || !sec->keyed) {
        if (net_send_all(fd, ctx, WIRE_P2P_HELLO_LEN) == 0) return fd;
        snprintf(err, errlen, "sending the hello: %s", strerror(errno));
        close(fd);
        return -1;
    }
    sec_hs_t hs;
    sec_hs_params_t p;
    params_for(sec, SEC_INITIATOR, ctx, peer_uuid, &p);
    if (sec_hs_start(&hs, sec, &p) != 0 || sec_handshake_fd(fd, &hs, deadline, cancel, err, errlen) != 0 ||
        finish(&hs, link) != 0) {
        sec_hs_wipe(&hs);
        close(fd);
        errno = errno == ECANCELED || errno == ETIMEDOUT ? errno : EACCES;
        return -1;
    }
    return fd;
}

int p2p_greet(int fd, const sec_cfg_t *sec, const uint8_t self[16], p2p_intro_t *who, sec_link_t **link, char *err,
              size_t errlen) {
    *link = NULL;
    snprintf(err, errlen, "handshake: cannot start");
    uint64_t deadline = net_now_ms() + SEC_HS_TIMEOUT_MS;
    uint8_t hello[SEC_HS_CTX];
    if (!sec || !sec->keyed) {
        net_set_timeouts(fd, SEC_HS_TIMEOUT_MS);
        if (net_recv_all(fd, hello, WIRE_P2P_HELLO_LEN) != 0) {
            snprintf(err, errlen, "no hello");
            return -1;
        }
    } else {
        sec_hs_t hs;
        sec_hs_params_t p;
        uint8_t ctx[SEC_HS_CTX] = {0};
        memcpy(ctx, self, 16);
        params_for(sec, SEC_RESPONDER, ctx, NULL, &p);
        if (sec_hs_start(&hs, sec, &p) != 0 || sec_handshake_fd(fd, &hs, deadline, NULL, err, errlen) != 0) {
            sec_hs_wipe(&hs);
            return -1;
        }
        memcpy(hello, hs.peer_ctx, sizeof hello);
        if (finish(&hs, link) != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    if (wire_p2p_hello_decode(hello, &who->kind, who->uuid, &who->slot) != 0) {
        snprintf(err, errlen, "bad hello");
        sec_link_free(*link);
        *link = NULL;
        return -1;
    }
    return 0;
}
