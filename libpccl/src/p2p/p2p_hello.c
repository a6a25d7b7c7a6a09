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
    if (hs->session.encrypt && !(*link = sec_link_new(&hs->session))) rc = -PERR_NOMEM;
    sec_hs_wipe(hs);
    return rc;
}

int p2p_dial(const ccoip_socket_address_t *to, const sec_cfg_t *sec, const p2p_intro_t *me,
             const uint8_t peer_uuid[16], int timeout_ms, const net_cancel_t *cancel, sec_link_t **link, char *err,
             size_t errlen) {
    *link = NULL;
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    int fd = net_connect_cancellable(to, timeout_ms, cancel);
    if (fd < 0) {
        snprintf(err, errlen, "connect: %s", strerror(errno));
        return fd;
    }
    return p2p_introduce(fd, sec, me, peer_uuid, deadline, cancel, link, err, errlen);
}

int p2p_introduce(int fd, const sec_cfg_t *sec, const p2p_intro_t *me, const uint8_t peer_uuid[16],
                  uint64_t deadline, const net_cancel_t *cancel, sec_link_t **link, char *err, size_t errlen) {
    *link = NULL;
    snprintf(err, errlen, "handshake: cannot start");
    uint8_t ctx[SEC_HS_CTX] = {0};
    wire_p2p_hello_encode(ctx, me->kind, me->uuid, me->slot);
    if (!sec || !sec->keyed) {
        /* 27 bytes on a fresh connection: its send buffer is empty, so this does not wait. */
        int rc = net_send_all(fd, ctx, WIRE_P2P_HELLO_LEN);
        if (rc == 0) return fd;
        snprintf(err, errlen, "sending the hello: %s", strerror(errno));
        close(fd);
        return rc;
    }
    sec_hs_t hs;
    sec_hs_params_t p;
    params_for(sec, SEC_INITIATOR, ctx, peer_uuid, &p);
    int rc = sec_hs_start(&hs, sec, &p);
    if (rc == 0) rc = sec_handshake_fd(fd, &hs, deadline, cancel, err, errlen);
    if (rc == 0) rc = finish(&hs, link);
    if (rc != 0) {
        sec_hs_wipe(&hs);
        close(fd);
        /* A handshake that did not end in time or was cancelled keeps that reason; any other failure is
         * the other side's refusal (no key, another key, another peer). */
        return rc == -PERR_CANCELLED || rc == -PERR_TIMEOUT ? rc : -PERR_REFUSED;
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
    return -PERR_NOMEM;
}

void p2p_greeting_free(p2p_greeting_t *g) {
    if (g->hs) sec_hs_wipe(g->hs);
    free(g->hs);
    g->hs = NULL;
}

/* Feeds the handshake what arrived and sends its answer. @return 0 with *done 1 (the hello in g->hello) or 0
 * (more to come), or -PERR_IO (closed, or a failed answer) / -PERR_REFUSED (the proof failed) / -PERR_NOMEM. */
static int handshake_step(p2p_greeting_t *g, int fd, sec_link_t **link, int *done, char *err, size_t errlen) {
    uint8_t buf[SEC_HS_MSG2];
    ssize_t n = recv(fd, buf, sec_hs_want(g->hs), MSG_DONTWAIT); /* only the handshake's own bytes */
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (n <= 0) {
        snprintf(err, errlen, "handshake: %s", n == 0 ? "closed by the other side (no key, or another key?)"
                                                      : strerror(errno));
        return -PERR_IO;
    }
    size_t used;
    if (sec_hs_feed(g->hs, buf, (size_t)n, &used) != 0) {
        snprintf(err, errlen, "handshake: %s", g->hs->err);
        return -PERR_REFUSED;
    }
    if (g->hs->out_len) { /* MSG2 on a fresh connection: its send buffer is empty, so it goes whole */
        ssize_t w = send(fd, g->hs->out, g->hs->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w != (ssize_t)g->hs->out_len) {
            snprintf(err, errlen, "handshake: cannot answer");
            return -PERR_IO;
        }
        g->hs->out_len = 0;
    }
    if (!sec_hs_done(g->hs)) return 0;
    memcpy(g->hello, g->hs->peer_ctx, sizeof g->hello);
    int rc = finish(g->hs, link);
    free(g->hs);
    g->hs = NULL;
    if (rc != 0) snprintf(err, errlen, "out of memory");
    *done = rc == 0;
    return rc;
}

int p2p_greeting_step(p2p_greeting_t *g, int fd, p2p_intro_t *who, sec_link_t **link, int *greeted, char *err,
                      size_t errlen) {
    *link = NULL;
    *greeted = 0;
    int done = 0;
    if (g->hs) {
        int rc = handshake_step(g, fd, link, &done, err, errlen);
        if (rc != 0) return rc;
    } else {
        ssize_t n = recv(fd, g->hello + g->hello_len, WIRE_P2P_HELLO_LEN - g->hello_len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
        if (n <= 0) {
            snprintf(err, errlen, "no hello (%s)", n == 0 ? "closed" : strerror(errno));
            return -PERR_IO;
        }
        g->hello_len += (size_t)n;
        done = g->hello_len == WIRE_P2P_HELLO_LEN;
    }
    if (!done) return 0;
    if (wire_p2p_hello_decode(g->hello, &who->kind, who->uuid, &who->slot) != 0) {
        snprintf(err, errlen, "bad hello");
        sec_link_free(*link);
        *link = NULL;
        return -PERR_PROTOCOL;
    }
    *greeted = 1;
    return 0;
}

int p2p_greet(int fd, const sec_cfg_t *sec, const uint8_t self[16], const pwait_t *w, p2p_intro_t *who,
              sec_link_t **link, char *err, size_t errlen) {
    *link = NULL;
    net_cancel_t cancel = {.wait = w};
    uint64_t deadline = net_now_ms() + SEC_HS_TIMEOUT_MS;
    p2p_greeting_t g;
    int rc = p2p_greeting_start(&g, sec, self), greeted = 0;
    if (rc != 0) snprintf(err, errlen, "handshake: cannot start");
    while (rc == 0 && !greeted) {
        rc = net_wait_until(fd, POLLIN, deadline, &cancel);
        if (rc != 0) snprintf(err, errlen, rc == -PERR_CANCELLED ? "cancelled" : "no hello in time");
        else rc = p2p_greeting_step(&g, fd, who, link, &greeted, err, errlen);
    }
    p2p_greeting_free(&g);
    return rc;
}
