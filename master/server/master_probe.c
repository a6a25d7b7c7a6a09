/*
 * master_probe.c - the reachability probe (docs/nat.md): when a peer registers, the master dials its
 * advertised p2p address once, bounded by MASTER_PROBE_MS, and tells the state machine whether it connected.
 * The peer's acceptor takes the connection as a stranger that sends no hello and closes it.
 */
#include <stdlib.h>

#include "server/master_internal.h"

#define MASTER_PROBE_MS 1000

typedef struct probe {
    uv_tcp_t tcp;
    uv_connect_t req;
    uv_timer_t timer;
    pcclMasterInstance_t *m;
    uint64_t conn;
    int open; /* handles not closed yet */
    int done;
} probe_t;

static void on_closed(uv_handle_t *h) {
    probe_t *p = h->data;
    if (--p->open == 0) free(p);
}

static void finish(probe_t *p, int reachable) {
    if (p->done) return;
    p->done = 1;
    msm_set_time(p->m->sm, uv_now(&p->m->loop));
    msm_on_reachable(p->m->sm, p->conn, reachable);
    uv_close((uv_handle_t *)&p->timer, on_closed);
    uv_close((uv_handle_t *)&p->tcp, on_closed); /* a pending connect ends with UV_ECANCELED */
}

static void on_connected(uv_connect_t *req, int status) {
    finish(req->data, status == 0);
}

static void on_timeout(uv_timer_t *t) { finish(t->data, 0); }

void master_probe_start(pcclMasterInstance_t *m, uint64_t conn) {
    ccoip_socket_address_t a;
    if (msm_probe_addr(m->sm, conn, &a) != 0) return;
    probe_t *p = calloc(1, sizeof *p);
    if (!p) return;
    *p = (probe_t){.m = m, .conn = conn};
    p->tcp.data = p->timer.data = p->req.data = p;
    uv_tcp_init(&m->loop, &p->tcp);
    uv_timer_init(&m->loop, &p->timer);
    p->open = 2;
    struct sockaddr_storage ss;
    addr_to_sockaddr(&a, &ss);
    if (uv_tcp_connect(&p->req, &p->tcp, (const struct sockaddr *)&ss, on_connected) != 0) {
        finish(p, 0);
        return;
    }
    uv_timer_start(&p->timer, on_timeout, MASTER_PROBE_MS, 0);
}
