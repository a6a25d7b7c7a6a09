/* p2p_hello.c - see p2p_hello.h. */
#include "p2p/p2p_hello.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

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

int p2p_greeting_start(p2p_greeting_t *g, const sec_cfg_t *sec, const uint8_t self[16]) {
    memset(g, 0, sizeof *g);
    if (!sec || !sec->keyed) return 0;
    uint8_t ctx[SEC_HS_CTX] = {0};
    memcpy(ctx, self, 16);
    sec_hs_params_t p;
    params_for(sec, SEC_RESPONDER, ctx, NULL, &p);
    g->hs = malloc(sizeof *g->hs);
    if (g->hs && sec_hs_start(g->hs, sec, &p) == 0) return 0;
    p2p_greeting_free(g);
    return -1;
}

void p2p_greeting_free(p2p_greeting_t *g) {
    if (g->hs) sec_hs_wipe(g->hs);
    free(g->hs);
    g->hs = NULL;
}

/* Feeds the handshake what arrived and sends its answer. 1 done (the hello in g->hello), 0 more, -1 failed. */
static int handshake_step(p2p_greeting_t *g, int fd, sec_link_t **link, char *err, size_t errlen) {
    uint8_t buf[SEC_HS_MSG2];
    ssize_t n = recv(fd, buf, sec_hs_want(g->hs), MSG_DONTWAIT); /* only the handshake's own bytes */
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (n <= 0) {
        snprintf(err, errlen, "handshake: %s", n == 0 ? "closed by the other side (no key, or another key?)"
                                                      : strerror(errno));
        return -1;
    }
    size_t used;
    int r = sec_hs_feed(g->hs, buf, (size_t)n, &used);
    if (r != 0) {
        snprintf(err, errlen, "handshake: %s", g->hs->err);
        return -1;
    }
    if (g->hs->out_len) { /* MSG2 on a fresh connection: its send buffer is empty, so it goes whole */
        ssize_t w = send(fd, g->hs->out, g->hs->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w != (ssize_t)g->hs->out_len) {
            snprintf(err, errlen, "handshake: cannot answer");
            return -1;
        }
        g->hs->out_len = 0;
    }
    if (!sec_hs_done(g->hs)) return 0;
    memcpy(g->hello, g->hs->peer_ctx, sizeof g->hello);
    int rc = finish(g->hs, link);
    free(g->hs);
    g->hs = NULL;
    if (rc != 0) snprintf(err, errlen, "out of memory");
    return rc == 0 ? 1 : -1;
}

int p2p_greeting_step(p2p_greeting_t *g, int fd, p2p_intro_t *who, sec_link_t **link, char *err, size_t errlen) {
    *link = NULL;
    int r;
    if (g->hs) {
        r = handshake_step(g, fd, link, err, errlen);
    } else {
        ssize_t n = recv(fd, g->hello + g->hello_len, WIRE_P2P_HELLO_LEN - g->hello_len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
        if (n <= 0) {
            snprintf(err, errlen, "no hello (%s)", n == 0 ? "closed" : strerror(errno));
            return -1;
        }
        g->hello_len += (size_t)n;
        r = g->hello_len == WIRE_P2P_HELLO_LEN;
    }
    if (r != 1) return r;
    if (wire_p2p_hello_decode(g->hello, &who->kind, who->uuid, &who->slot) != 0) {
        snprintf(err, errlen, "bad hello");
        sec_link_free(*link);
        *link = NULL;
        return -1;
    }
    return 1;
}

int p2p_greet(int fd, const sec_cfg_t *sec, const uint8_t self[16], p2p_intro_t *who, sec_link_t **link, char *err,
              size_t errlen) {
    *link = NULL;
    uint64_t deadline = net_now_ms() + SEC_HS_TIMEOUT_MS;
    p2p_greeting_t g;
    if (p2p_greeting_start(&g, sec, self) != 0) {
        snprintf(err, errlen, "handshake: cannot start");
        return -1;
    }
    int r = 0;
    while (r == 0) {
        int w = net_wait_until(fd, POLLIN, deadline, NULL);
        if (w != 0) {
            snprintf(err, errlen, "no hello in time");
            r = -1;
            break;
        }
        r = p2p_greeting_step(&g, fd, who, link, err, errlen);
    }
    p2p_greeting_free(&g);
    return r == 1 ? 0 : -1;
}
