/* relay_server.c - the relay's loop: listener, the limits on connections, deadlines, stopping (relay.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "relay/relay_internal.h"

#define RELAY_TICK_MS 100

static raddr_t *addr_slot(relay_t *r, uint32_t key) {
    for (uint32_t i = 0; i < r->naddrs; i++)
        if (r->addrs[i].key == key) return &r->addrs[i];
    return NULL;
}

/* Counts c in the limits. @return 0, or -PERR_REFUSED (over a limit) / -PERR_NOMEM. */
static int admit(relay_t *r, rconn_t *c) {
    if (r->nconns >= r->lim.max_conns) return -PERR_REFUSED;
    raddr_t *a = addr_slot(r, c->addr_key);
    if (a && a->n >= r->lim.max_per_addr) return -PERR_REFUSED;
    if (!a) {
        if (r->naddrs == r->cap_addrs) {
            uint32_t cap = r->cap_addrs ? 2 * r->cap_addrs : 16;
            raddr_t *v = realloc(r->addrs, cap * sizeof *v);
            if (!v) return -PERR_NOMEM;
            r->addrs = v;
            r->cap_addrs = cap;
        }
        a = &r->addrs[r->naddrs++];
        *a = (raddr_t){.key = c->addr_key};
    }
    a->n++;
    r->nconns++;
    c->admitted = 1;
    return 0;
}

static void unlink_conn(relay_t *r, rconn_t *c) {
    if (c->prev) c->prev->next = c->next;
    else if (r->conns == c) r->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

void relay_forget(rconn_t *c) {
    relay_t *r = c->r;
    unlink_conn(r, c);
    if (c->admitted) {
        r->nconns--;
        raddr_t *a = addr_slot(r, c->addr_key);
        if (a && --a->n == 0) *a = r->addrs[--r->naddrs];
    }
    rpair_t *p = c->pair;
    if (!p) {
        free(c);
    } else if (++p->nclosed == 2) { /* a write to one side may name the other until both closed */
        free(p->c[0]);
        free(p->c[1]);
        free(p);
    }
}

static void on_connection(uv_stream_t *server, int status) {
    relay_t *r = server->data;
    if (status < 0) {
        PLOG_WARN("relay", "accept: %s", uv_strerror(status));
        return;
    }
    rconn_t *c = calloc(1, sizeof *c);
    if (!c || uv_tcp_init(&r->loop, &c->tcp) != 0) {
        free(c);
        return;
    }
    c->r = r;
    c->tcp.data = c;
    c->next = r->conns;
    if (r->conns) r->conns->prev = c;
    r->conns = c;
    c->since_ms = uv_now(&r->loop);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 ||
        uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0 ||
        addr_from_sockaddr((struct sockaddr *)&ss, &c->from) != 0) {
        rconn_close(c, "accept failed");
        return;
    }
    c->addr_key = gate_key_of(&c->from.inet);
    if (r->stopping || admit(r, c) != 0) {
        char who[ADDR_STRLEN];
        addr_str(&c->from, who);
        if (relay_log_due(++r->refused_limit))
            PLOG_WARN("relay", "%s: over the connection limits, refused (%llu so far)", who,
                      (unsigned long long)r->refused_limit);
        rconn_refuse(c, RELAY_ST_BUSY);
        return;
    }
    rconn_start(c);
}

/* Connections past their state's deadline are closed; pairs past their lifetime too. */
static void on_tick(uv_timer_t *t) {
    relay_t *r = t->data;
    uint64_t now = uv_now(&r->loop);
    const relay_limits_t *l = &r->lim;
    for (rconn_t *c = r->conns; c; c = c->next) {
        if (c->state == RC_GREETING && now - c->since_ms > l->greet_ms) {
            r->timed_out++;
            rconn_close(c, "no greeting in time");
        } else if (c->state == RC_WAITING && now - c->since_ms > l->wait_ms) {
            r->timed_out++;
            rconn_refuse(c, RELAY_ST_TIMEOUT);
        } else if (c->state == RC_PAIRED && c == c->pair->c[0]) {
            rpair_t *p = c->pair;
            if (l->pair_ms && now - p->since_ms > l->pair_ms) rpair_close(p, "lifetime reached");
            else if (p->half_since && now - p->half_since > l->wait_ms)
                rpair_close(p, "one side closed, the other did not finish in time");
        }
    }
}

static void stop(relay_t *r, const char *why) {
    if (r->stopping) return;
    r->stopping = 1;
    PLOG_INFO("relay", "stopping (%s): %llu pairs made; refused %llu over limits, %llu bad tokens, %llu not "
              "greeting; %llu timed out", why, (unsigned long long)r->pairs, (unsigned long long)r->refused_limit,
              (unsigned long long)r->refused_token, (unsigned long long)r->refused_garbage,
              (unsigned long long)r->timed_out);
    for (rconn_t *c = r->conns; c; c = c->next) rconn_close(c, "the relay stops");
    uv_close((uv_handle_t *)&r->server, NULL);
    uv_close((uv_handle_t *)&r->tick, NULL);
    uv_close((uv_handle_t *)&r->sigint, NULL);
    uv_close((uv_handle_t *)&r->sigterm, NULL);
}

static void on_signal(uv_signal_t *s, int signum) {
    stop(s->data, signum == SIGINT ? "received SIGINT" : "received SIGTERM");
}

/* Listens on addr through the library's dual-stack listen, then hands the socket to libuv. */
static int listen_on(relay_t *r, const ccoip_socket_address_t *addr, char *err, size_t errlen) {
    char where[ADDR_STRLEN];
    addr_str(addr, where);
    int fd = net_listen(addr, &r->port);
    if (fd < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", where, strerror(errno));
        return -PERR_IO;
    }
    net_set_nonblock(fd, 1);
    int rc = uv_tcp_open(&r->server, fd);
    if (rc != 0) close(fd);
    else rc = uv_listen((uv_stream_t *)&r->server, 511, on_connection);
    if (rc != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", where, uv_strerror(rc));
        return -PERR_IO;
    }
    return 0;
}

static int check_limits(const relay_limits_t *l, char *err, size_t errlen) {
    if (l->max_conns && l->max_per_addr && l->greet_ms && l->wait_ms) return 0;
    snprintf(err, errlen, "connection limits, the greeting's and the pairing's deadlines must be above 0");
    return -PERR_INVALID;
}

int relay_create(const ccoip_socket_address_t *addr, const relay_limits_t *lim, const char *key_file,
                 relay_t **out, char *err, size_t errlen) {
    int rc = check_limits(lim, err, errlen);
    if (rc != 0) return rc;
    relay_t *r = calloc(1, sizeof *r);
    if (!r) return -PERR_NOMEM;
    r->lim = *lim;
    if (key_file && (rc = relay_load_key(key_file, r->token_key, &r->run_key, err, errlen)) != 0) {
        free(r);
        return rc;
    }
    r->keyed = key_file != NULL;
    if (uv_loop_init(&r->loop) != 0) {
        free(r);
        snprintf(err, errlen, "cannot start an event loop");
        return -PERR_FAILED;
    }
    uv_tcp_init(&r->loop, &r->server);
    r->server.data = r;
    uv_timer_init(&r->loop, &r->tick);
    r->tick.data = r;
    uv_signal_init(&r->loop, &r->sigint);
    uv_signal_init(&r->loop, &r->sigterm);
    r->sigint.data = r->sigterm.data = r;
    if ((rc = listen_on(r, addr, err, errlen)) != 0) {
        r->stopping = 1;
        uv_close((uv_handle_t *)&r->server, NULL);
        uv_close((uv_handle_t *)&r->tick, NULL);
        uv_close((uv_handle_t *)&r->sigint, NULL);
        uv_close((uv_handle_t *)&r->sigterm, NULL);
        relay_destroy(r);
        return rc;
    }
    uv_signal_start(&r->sigint, on_signal, SIGINT);
    uv_signal_start(&r->sigterm, on_signal, SIGTERM);
    uv_timer_start(&r->tick, on_tick, RELAY_TICK_MS, RELAY_TICK_MS);
    *out = r;
    return 0;
}

uint16_t relay_port(const relay_t *r) { return r->port; }
int relay_keyed(const relay_t *r) { return r->keyed + r->run_key; }

int relay_run(relay_t *r) {
    /* A write to a side that just vanished must fail with EPIPE, not end the process (libuv writes with
     * write(2)); the signal is thread-directed, so blocking it on the loop's thread suffices. */
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    return 0;
}

void relay_destroy(relay_t *r) {
    if (!r) return;
    if (!r->stopping) stop(r, "destroyed");
    uv_run(&r->loop, UV_RUN_DEFAULT); /* the close callbacks */
    uv_loop_close(&r->loop);
    sodium_memzero(r->token_key, sizeof r->token_key);
    free(r->addrs);
    free(r);
}
