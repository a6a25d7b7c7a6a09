/*
 * master_server.c - the master's I/O edge: a libuv loop on its own thread that
 * accepts control connections, frames and decodes packets, and feeds the pure
 * state machine (master_sm). A malformed, oversized or wrong-direction packet
 * closes that one connection with a logged reason; everyone else is served on.
 * Implements pcclCreateMaster / pcclRunMaster / pcclInterruptMaster /
 * pcclMasterAwaitTermination / pcclDestroyMaster.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#include <uv.h>

#include "base/base.h"
#include "server/master_internal.h"
#include "server/master_secure.h"
#include "sm/sm.h"
#include "pccl.h"
#include "topology/topology.h"

typedef struct mconn {
    uv_tcp_t tcp;
    pcclMasterInstance_t *master;
    uint64_t id;
    uint8_t *buf; /* received plaintext not yet framed */
    size_t len, cap;
    int closing;
    int known;          /* the state machine knows it (after the handshake of a keyed run) */
    int stranger;       /* in the gate: no first message yet (gate.h) */
    size_t held;        /* a stranger still: what the state machine keeps of its RESUME until the rebuild */
    ccoip_inet_address_t ip, local; /* what the state machine is told on connect: the peer's and our end */
    uint16_t port;      /* the peer's end's port: with ip, its observed address */
    uint8_t nonce[32]; /* its CHALLENGE */
    msec_t sec;         /* keyed runs: the handshake, then the session */
    struct mconn *next;
} mconn_t;

typedef struct wreq {
    uv_write_t req;
    uv_buf_t buf;
} wreq_t;

static mconn_t *find_conn(pcclMasterInstance_t *m, uint64_t id) {
    for (mconn_t *c = m->conns; c; c = c->next)
        if (c->id == id && !c->closing) return c;
    return NULL;
}

static void on_conn_closed(uv_handle_t *h) {
    mconn_t *c = h->data;
    pcclMasterInstance_t *m = c->master;
    if (c->stranger) gate_remove(&m->gate, c->id);
    for (mconn_t **pp = &m->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    msec_free(&c->sec);
    free(c->buf);
    free(c);
    if (m->draining && !m->conns && !uv_is_closing((uv_handle_t *)&m->tick)) uv_close((uv_handle_t *)&m->tick, NULL);
}

static void close_conn(mconn_t *c) {
    if (c->closing) return;
    c->closing = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_written(uv_write_t *req, int status) {
    wreq_t *w = (wreq_t *)req;
    (void)status; /* a failed write surfaces as a read error/EOF on the same connection */
    free(w->buf.base);
    free(w);
}

/* Queues data (malloc'd; taken over) on the connection as it is. */
static void write_owned(mconn_t *c, uint8_t *data, size_t len) {
    wreq_t *w = malloc(sizeof *w);
    if (!w) {
        free(data);
        close_conn(c);
        return;
    }
    w->buf = uv_buf_init((char *)data, (unsigned)len);
    c->master->bytes_sent += len;
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &w->buf, 1, on_written) != 0) {
        free(data);
        free(w);
        close_conn(c);
    }
}

/* Encodes msg and queues it, sealed when the run encrypts. */
static void send_msg(mconn_t *c, const wire_msg_t *msg) {
    wbuf_t b = {0};
    if (wire_encode(msg, &b) != 0) {
        char name[MSM_NAME_MAX];
        PLOG_ERROR("master", "cannot encode %s for %s", wire_type_name(msg->type),
                   msm_conn_name(c->master->sm, c->id, name));
        wbuf_free(&b);
        return;
    }
    uint8_t *out = b.data;
    size_t len = b.len;
    if (c->sec.encrypt) {
        int rc = msec_seal(&c->sec, b.data, b.len, &out, &len);
        wbuf_free(&b);
        if (rc != 0) {
            close_conn(c);
            return;
        }
    }
    write_owned(c, out, len);
}

static void sm_send(void *ctx, uint64_t conn, const wire_msg_t *msg) {
    mconn_t *c = find_conn(ctx, conn);
    if (!c) return;
    if (msg->type == M2C_RENDEZVOUS && msg->u.rdv.mode == WIRE_RDV_RELAY) {
        /* The token is minted here, at the edge, from the nonce the state machine put in its place (docs/nat.md):
         * under the run key, so that a relay started with the run's key file admits only this run's pairs. */
        pcclMasterInstance_t *m = ctx;
        wire_msg_t t = *msg;
        uint8_t nonce[RELAY_NONCE_BYTES];
        memcpy(nonce, msg->u.rdv.token, sizeof nonce);
        if (relay_token_make(m->sec.keyed ? m->sec.psk : NULL, nonce, t.u.rdv.token) != 0) return;
        send_msg(c, &t);
        return;
    }
    send_msg(c, msg);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    mconn_t *c = req->data;
    (void)status;
    free(req);
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* Closes after what is queued (a KICK) was written. */
static void close_after_writes(mconn_t *c) {
    /* uv_close would cancel the queued KICK; shutdown first flushes it, then the callback closes. */
    c->closing = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_shutdown_t *req = malloc(sizeof *req);
    if (req) req->data = c;
    if (!req || uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        free(req);
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
    }
}

static void sm_close(void *ctx, uint64_t conn, const char *reason) {
    pcclMasterInstance_t *m = ctx;
    mconn_t *c = find_conn(m, conn);
    if (!c) return;
    char name[MSM_NAME_MAX];
    PLOG_INFO("master", "closing %s: %s", msm_conn_name(m->sm, conn, name), reason);
    close_after_writes(c);
}

static void release_held(pcclMasterInstance_t *m);

#define STRANGER_BUF 4096 /* what a stranger's buffer starts with: a handshake message or a HELLO */

/* Drops a connection for a transport-level reason and tells the state machine. */
static void drop_conn(mconn_t *c, const char *reason) {
    if (c->closing) return;
    char name[MSM_NAME_MAX];
    PLOG_WARN("master", "dropping %s: %s", msm_conn_name(c->master->sm, c->id, name), reason);
    uint64_t id = c->id;
    close_conn(c);
    if (!c->known) return;
    msm_set_time(c->master->sm, uv_now(&c->master->loop));
    msm_on_disconnect(c->master->sm, id);
    release_held(c->master);
}

/* drop_conn for a frame that breaks the protocol (length, decoding, direction): counted as a refusal. */
static void refuse_malformed(mconn_t *c, const char *why) {
    if (!c->closing) c->master->refused_malformed++;
    drop_conn(c, why);
}

/* Closes strangers the gate removed (evicted, timed out) without a line each: a flood would
 * fill the log; the tick logs the gate's counters instead. */
static void close_strangers(pcclMasterInstance_t *m, const uint64_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        mconn_t *c = find_conn(m, ids[i]);
        if (!c) continue;
        c->stranger = 0;
        close_conn(c);
        if (!c->known) continue;
        msm_set_time(m->sm, uv_now(&m->loop));
        msm_on_disconnect(m->sm, c->id);
    }
}

/* The connection delivered its first message (or finished its handshake): no stranger any more. */
static void unstrange(mconn_t *c) {
    c->held = 0;
    if (!c->stranger) return;
    c->stranger = 0;
    gate_remove(&c->master->gate, c->id);
}

/* Once the rebuild stopped collecting RESUMEs, the state machine keeps nothing of them: the connections
 * held for that state are strangers no more. */
static void release_held(pcclMasterInstance_t *m) {
    if (!m->resume_held || msm_resume_collecting(m->sm)) return;
    m->resume_held = 0;
    for (mconn_t *c = m->conns; c; c = c->next)
        if (c->held) unstrange(c);
}

/* A RESUME's state counts against the strangers' budget until the rebuild, with the connection's buffer
 * shrunk back to a stranger's; past the budget the connection is closed (the state machine forgets it).
 * @return 0, or -PERR_REFUSED (closed). */
static int hold_stranger(mconn_t *c) {
    pcclMasterInstance_t *m = c->master;
    if (c->len <= STRANGER_BUF && c->cap > STRANGER_BUF) {
        uint8_t *b = realloc(c->buf, STRANGER_BUF);
        if (b) {
            c->buf = b;
            c->cap = STRANGER_BUF;
        }
    }
    uint64_t evict[GATE_EVICT_MAX];
    size_t nevict;
    int rc = gate_hold(&m->gate, c->id, c->cap + c->held, evict, &nevict);
    close_strangers(m, evict, nevict);
    if (rc == 0) return 0;
    c->stranger = 0; /* the gate removed it */
    drop_conn(c, "the master buffers no more for unregistered connections");
    return -PERR_REFUSED;
}

/* The master's limits on strangers: 256 per address, so that hundreds of peers starting at once behind one
 * address (one host, one NAT) are admitted together (a burst past it is closed and retries with backoff,
 * connect.c), and 512 in all, past which a flood from few addresses evicts its own; RESUME may legitimately be
 * megabytes (rings, hashes of many tensors), so bytes are a budget shared by every unregistered
 * connection (32 MiB per address, 64 MiB in all) rather than a small limit per frame, and every
 * other first message must fit MASTER_HELLO_MAX. 10 s from accept to the first message. What the
 * state machine keeps of a RESUME until its rebuild counts against the same budget (hold_stranger). */
static const gate_limits_t master_gate_limits = {.per_addr = 256, .total = 512, .bytes_per_addr = 32u << 20,
                                                 .bytes_total = 64u << 20, .deadline_ms = 10000};
#define MASTER_HELLO_MAX 4096

/* Once a stranger's first frame header arrived: only RESUME may be larger than MASTER_HELLO_MAX,
 * and the buffer grows to the frame only out of the gate's budget. @return 0, or (closed) -PERR_PROTOCOL for a
 * first message too large, -PERR_REFUSED past the budget, -PERR_NOMEM. */
static int stranger_grow(mconn_t *c) {
    pcclMasterInstance_t *m = c->master;
    if (c->len < 6) return 0;
    uint32_t body = wire_get_u32(c->buf);
    uint16_t type = wire_get_u16(c->buf + 4);
    uint32_t max = type == C2M_RESUME ? WIRE_MAX_BODY : MASTER_HELLO_MAX;
    if (body > max) {
        char why[112];
        snprintf(why, sizeof why, "first message of %u bytes (at most %u before registration)", body, max);
        refuse_malformed(c, why);
        return -PERR_PROTOCOL;
    }
    size_t need = 4 + (size_t)body;
    if (need <= c->cap) return 0;
    uint64_t evict[GATE_EVICT_MAX];
    size_t nevict;
    int rc = gate_reserve(&m->gate, c->id, need + c->held, evict, &nevict);
    close_strangers(m, evict, nevict);
    uint8_t *b = rc == 0 ? realloc(c->buf, need) : NULL;
    if (!b) {
        c->stranger = rc == 0;
        drop_conn(c, rc == 0 ? "out of memory" : "the master buffers no more for unregistered connections");
        return rc == 0 ? -PERR_NOMEM : rc;
    }
    c->buf = b;
    c->cap = need;
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    mconn_t *c = h->data;
    if (c->stranger) { /* never more than the gate granted (stranger_grow keeps len < cap) */
        *buf = uv_buf_init((char *)c->buf + c->len, (unsigned)(c->cap - c->len));
        return;
    }
    if (c->sec.encrypt) { /* frames go to their own buffer and are opened into buf */
        size_t avail;
        uint8_t *p = msec_raw_space(&c->sec, &avail);
        *buf = p ? uv_buf_init((char *)p, (unsigned)avail) : uv_buf_init(NULL, 0);
        return;
    }
    if (c->cap - c->len < 65536) {
        size_t cap = c->cap ? c->cap * 2 : 131072;
        while (cap - c->len < 65536) cap *= 2;
        uint8_t *b = realloc(c->buf, cap);
        if (!b) {
            *buf = uv_buf_init(NULL, 0);
            return;
        }
        c->buf = b;
        c->cap = cap;
    }
    (void)suggested;
    *buf = uv_buf_init((char *)c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void process_frames(mconn_t *c) {
    pcclMasterInstance_t *m = c->master;
    size_t off = 0;
    while (!c->closing && c->len - off >= 4) {
        uint32_t body = wire_get_u32(c->buf + off);
        if (body > WIRE_MAX_BODY || body < 2) {
            char why[96];
            snprintf(why, sizeof why, "packet length %u outside [2, %u]", body, WIRE_MAX_BODY);
            refuse_malformed(c, why);
            return;
        }
        if (c->len - off - 4 < body) break;
        wire_msg_t msg;
        char err[160];
        if (wire_decode(c->buf + off + 4, body, &msg, err, sizeof err) != 0) {
            refuse_malformed(c, err);
            return;
        }
        off += 4 + (size_t)body;
        m->packets_received++;
        if (!wire_type_is_c2m(msg.type)) {
            char why[96];
            snprintf(why, sizeof why, "%s is not a peer-to-master message", wire_type_name(msg.type));
            wire_msg_free(&msg);
            refuse_malformed(c, why);
            return;
        }
        msm_set_time(m->sm, uv_now(&m->loop));
        uint16_t type = msg.type;
        if (type == C2M_RENDEZVOUS) {
            uint8_t nonce[16];
            randombytes_buf(nonce, sizeof nonce); /* a relay pair's token is unpredictable */
            msm_set_rendezvous_nonce(m->sm, nonce);
        }
        msm_on_packet(m->sm, c->id, &msg);
        wire_msg_free(&msg);
        if (type == C2M_HELLO || type == C2M_RESUME) master_probe_start(m, c->id);
        /* The state machine took HELLO or RESUME (else it kicked); it may keep a RESUME until the rebuild. */
        if (!c->closing && c->stranger && !c->held) {
            c->held = type == C2M_RESUME ? msm_resume_held(m->sm, c->id) : 0;
            if (c->held) m->resume_held = 1;
            else unstrange(c);
        }
        release_held(m);
    }
    if (c->closing) return;
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
    /* Shrink buffers that grew for one large packet. */
    if (c->cap > (1u << 20) && c->len < 65536) {
        uint8_t *b = realloc(c->buf, 131072);
        if (b) {
            c->buf = b;
            c->cap = 131072;
        }
    }
    if (c->held) hold_stranger(c);
}

static void connect_to_sm(mconn_t *c) {
    c->known = 1;
    msm_set_time(c->master->sm, uv_now(&c->master->loop));
    msm_on_connect(c->master->sm, c->id, &c->ip, &c->local, c->nonce);
    msm_set_observed_port(c->master->sm, c->id, c->port);
}


/* Runs the handshake on what arrived; 1 when the connection is authenticated now and its
 * remaining input may be framed, 0 otherwise (still handshaking, or closed). */
static int handshake_step(mconn_t *c) {
    char err[128], ip[ADDR_STRLEN];
    int r;
    msec_state_t st = MSEC_HANDSHAKING;
    size_t before;
    /* One message per feed; a next one that arrived in the same read is fed after the answer. */
    do {
        before = c->len;
        r = msec_feed(&c->sec, c->buf, &c->len, &st, err, sizeof err);
        if (c->sec.hs && c->sec.hs->out_len) {
            uint8_t *out = malloc(c->sec.hs->out_len);
            if (out) memcpy(out, c->sec.hs->out, c->sec.hs->out_len);
            if (out) write_owned(c, out, c->sec.hs->out_len);
            else close_conn(c);
            c->sec.hs->out_len = 0;
        }
    } while (r == 0 && st == MSEC_HANDSHAKING && !c->closing && c->len && c->len < before);
    addr_ip_str(&c->ip, ip);
    if (r != 0) {
        PLOG_WARN("master", "refused conn=%llu from %s: %s", (unsigned long long)c->id, ip, err);
        c->master->refused_handshake++;
        close_conn(c);
        return 0;
    }
    switch (st) {
    case MSEC_HANDSHAKING: return 0;
    case MSEC_OPEN_CLIENT: {
        PLOG_WARN("master", "refused conn=%llu from %s: it has no run key", (unsigned long long)c->id, ip);
        c->master->refused_handshake++;
        wire_msg_t k = {.type = M2C_KICK};
        snprintf(k.u.kick.reason, sizeof k.u.kick.reason,
                 "this run requires a run key (pccl join --key-file FILE, or PCCL_KEY_FILE)");
        send_msg(c, &k);
        close_after_writes(c);
        return 0;
    }
    case MSEC_READY: break;
    }
    unstrange(c); /* it holds the run key */
    connect_to_sm(c);
    if (c->sec.encrypt && msec_open(&c->sec, &c->buf, &c->len, &c->cap) != 0) {
        c->master->refused_handshake++;
        drop_conn(c, "a frame failed authentication");
        return 0;
    }
    return 1;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    mconn_t *c = s->data;
    (void)buf;
    if (c->closing) return;
    if (nread < 0 && c->sec.hs) {
        char ip[ADDR_STRLEN];
        addr_ip_str(&c->ip, ip);
        PLOG_WARN("master", "refused conn=%llu from %s: closed during the handshake (%s)", (unsigned long long)c->id,
                  ip, nread == UV_EOF ? "the client has another key?" : uv_strerror((int)nread));
        c->master->refused_handshake++;
        close_conn(c);
        return;
    }
    if (nread < 0) {
        drop_conn(c, nread == UV_EOF ? "connection closed by peer" : uv_strerror((int)nread));
        return;
    }
    if (nread == 0) return;
    if (c->sec.hs) {
        c->len += (size_t)nread;
        if (!handshake_step(c)) return;
        if (c->closing) return;
    } else if (c->sec.encrypt) {
        c->sec.raw_len += (size_t)nread;
        if (msec_open(&c->sec, &c->buf, &c->len, &c->cap) != 0) {
            c->master->refused_handshake++;
            drop_conn(c, "a frame failed authentication");
            return;
        }
    } else {
        c->len += (size_t)nread;
    }
    if (c->stranger && stranger_grow(c) != 0) return;
    process_frames(c);
}

static void on_connection(uv_stream_t *server, int status) {
    pcclMasterInstance_t *m = server->data;
    if (status < 0) return;
    mconn_t *c = calloc(1, sizeof *c);
    if (!c) return;
    uv_tcp_init(&m->loop, &c->tcp);
    c->tcp.data = c;
    c->master = m;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1); /* consensus packets are tiny: no Nagle/delayed-ACK stalls */
    c->id = ++m->next_conn_id;
    c->next = m->conns;
    m->conns = c;
    struct sockaddr_storage ss;
    int len = sizeof ss;
    ccoip_socket_address_t from;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0 && addr_from_sockaddr((struct sockaddr *)&ss, &from) == 0) {
        c->ip = from.inet;
        c->port = from.port;
    }
    len = sizeof ss;
    if (uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&ss, &len) == 0 && addr_from_sockaddr((struct sockaddr *)&ss, &from) == 0)
        c->local = from.inet;
    uint64_t evict;
    if (gate_admit(&m->gate, c->id, gate_key_of(&c->ip), uv_now(&m->loop), &evict) != 0) {
        close_conn(c); /* before the state machine heard of it; counted, logged by the tick */
        return;
    }
    c->stranger = 1;
    close_strangers(m, &evict, evict != 0);
    uint64_t none[GATE_EVICT_MAX];
    size_t nnone;
    c->buf = malloc(STRANGER_BUF);
    if (!c->buf || gate_reserve(&m->gate, c->id, STRANGER_BUF, none, &nnone) != 0) {
        close_conn(c);
        return;
    }
    close_strangers(m, none, nnone);
    c->cap = STRANGER_BUF;
    randombytes_buf(c->nonce, sizeof c->nonce); /* unpredictable, so a signed HELLO cannot be replayed */
    if (!m->sec.keyed) {
        connect_to_sm(c);
    } else if (msec_start(&c->sec, &m->sec, uv_now(&m->loop)) != 0) {
        close_conn(c);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

#define MASTER_MOONSHOT_MS 2000.0

/* Background ring search, off the loop thread: long budget, cancelled on shutdown. */
static void *moon_main(void *arg) {
    pcclMasterInstance_t *m = arg;
    topo_solution_t sol = {0};
    m->moon_ok = topo_solve(m->moon_req.bw, m->moon_req.n, MASTER_MOONSHOT_MS, &m->moon_cancel, &sol) == 0 &&
                 !atomic_load(&m->moon_cancel);
    if (m->moon_ok) {
        m->moon_order = malloc((size_t)m->moon_req.n * sizeof *m->moon_order);
        if (m->moon_order) memcpy(m->moon_order, sol.order, (size_t)m->moon_req.n * sizeof *m->moon_order);
        else m->moon_ok = 0;
    }
    topo_solution_free(&sol);
    uv_async_send(&m->moon_async);
    return NULL;
}

/* Frees the request and result of a search whose thread was joined. */
static void moon_free(pcclMasterInstance_t *m) {
    m->moon_running = 0;
    free(m->moon_req.conns);
    free(m->moon_req.bw);
    free(m->moon_order);
    m->moon_req = (msm_moonshot_t){0};
    m->moon_order = NULL;
}

/* Joins a finished or cancelled search thread and frees its request and result. */
static void moon_release(pcclMasterInstance_t *m) {
    pthread_join(m->moon_thread, NULL);
    moon_free(m);
}

static void on_moon_done(uv_async_t *a) {
    pcclMasterInstance_t *m = a->data;
    if (!m->moon_running) return;
    pthread_join(m->moon_thread, NULL); /* the thread sent this wake-up as its last act */
    if (m->moon_ok)
        msm_on_moonshot_result(m->sm, m->moon_req.group, m->moon_req.epoch, m->moon_req.conns, m->moon_order,
                               m->moon_req.n);
    moon_free(m);
}

/* Closes strangers past their deadline and logs what the gate refused since the last tick. */
static void gate_tick(pcclMasterInstance_t *m) {
    uint64_t ids[64];
    size_t n;
    while ((n = gate_expire(&m->gate, uv_now(&m->loop), ids, 64)) > 0) close_strangers(m, ids, n);
    const gate_t *g = &m->gate;
    uint64_t now[3] = {g->refused, g->evicted, g->expired};
    if (memcmp(now, m->gate_logged, sizeof now) == 0) return;
    PLOG_WARN("master", "unregistered connections: %llu refused, %llu evicted, %llu past the %llu ms deadline "
              "since the last report; %zu open, %zu bytes buffered",
              (unsigned long long)(now[0] - m->gate_logged[0]), (unsigned long long)(now[1] - m->gate_logged[1]),
              (unsigned long long)(now[2] - m->gate_logged[2]), (unsigned long long)g->lim.deadline_ms, g->n,
              g->bytes);
    memcpy(m->gate_logged, now, sizeof now);
}

/* Kicks peers that went silent (no heartbeat), e.g. a SIGSTOPped process whose kernel still ACKs,
 * closes strangers past their deadline and starts a requested background ring search. */
static void on_tick(uv_timer_t *t) {
    pcclMasterInstance_t *m = t->data;
    gate_tick(m);
    for (mconn_t *c = m->conns; c; c = c->next)
        if (c->sec.hs && !c->closing && uv_now(&m->loop) - c->sec.started_ms > SEC_HS_TIMEOUT_MS) {
            char ip[ADDR_STRLEN];
            addr_ip_str(&c->ip, ip);
            PLOG_WARN("master", "refused conn=%llu from %s: no handshake within %d ms", (unsigned long long)c->id, ip,
                      SEC_HS_TIMEOUT_MS);
            close_conn(c);
        }
    msm_set_time(m->sm, uv_now(&m->loop));
    msm_on_tick(m->sm);
    release_held(m);
    if (!m->moon_running && msm_take_moonshot(m->sm, &m->moon_req)) {
        atomic_store(&m->moon_cancel, false);
        m->moon_ok = 0;
        if (pthread_create(&m->moon_thread, NULL, moon_main, m) == 0) {
            m->moon_running = 1;
        } else {
            free(m->moon_req.conns);
            free(m->moon_req.bw);
            m->moon_req = (msm_moonshot_t){0};
        }
    }
    if (m->tick_hook) m->tick_hook(m->tick_hook_ctx, uv_now(&m->loop));
}

/* How long a master that ends the run waits for its SHUTDOWN messages to be written: a peer that
 * stopped reading must not hold the master up. */
#define MASTER_DRAIN_MS 2000

/* Closes every connection at once (a pending flush is cancelled with it). */
static void close_all_conns(pcclMasterInstance_t *m) {
    for (mconn_t *c = m->conns, *next; c; c = next) {
        next = c->next;
        c->closing = 1;
        if (!uv_is_closing((uv_handle_t *)&c->tcp)) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
        }
    }
}

static void on_drained(uv_timer_t *t) {
    pcclMasterInstance_t *m = t->data;
    close_all_conns(m); /* the last close ends the timer */
}

static void on_stop(uv_async_t *a) {
    pcclMasterInstance_t *m = a->data;
    int end = atomic_load(&m->end_run);
    pccl__admin_on_stop(m); /* first: joins the HTTP thread before its wake-up handle closes */
    pccl__allow_on_stop(m);
    uv_close((uv_handle_t *)&m->server, NULL);
    if (end) {
        /* SHUTDOWN goes out on every connection; each closes once it is written (close_after_writes),
         * the others (still in a handshake) at once, and the drain timer ends what is left. */
        msm_set_time(m->sm, uv_now(&m->loop));
        int n = msm_end_run(m->sm, m->end_reason);
        PLOG_INFO("master", "ending the run (%s): told %d peer%s", m->end_reason, n, n == 1 ? "" : "s");
        for (mconn_t *c = m->conns, *next; c; c = next) {
            next = c->next;
            if (!c->closing) close_conn(c);
        }
        uv_timer_stop(&m->tick);
        if (m->conns) {
            m->draining = 1;
            uv_timer_start(&m->tick, on_drained, MASTER_DRAIN_MS, 0);
        } else {
            uv_close((uv_handle_t *)&m->tick, NULL);
        }
    } else {
        PLOG_INFO("master", "shutting down; the peers keep the run and wait for a master on this address");
        close_all_conns(m);
        uv_close((uv_handle_t *)&m->tick, NULL);
    }
    uv_close((uv_handle_t *)&m->stop_async, NULL);
    if (m->moon_running) {
        atomic_store(&m->moon_cancel, true);
        moon_release(m);
    }
    uv_close((uv_handle_t *)&m->moon_async, NULL);
}

static void *loop_thread(void *arg) {
    pcclMasterInstance_t *m = arg;
    /* A write to a peer that just vanished must fail with EPIPE, not kill the process with SIGPIPE
     * (libuv writes with write(2)); the signal is thread-directed, so blocking it here suffices. */
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
    uv_run(&m->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* 0.0.0.0 and [::] listen dual-stack on [::] (libuv turns IPV6_V6ONLY off without UV_TCP_IPV6ONLY), so peers
 * connect over IPv4 and IPv6 alike; a host without IPv6 falls back to 0.0.0.0 (the failed bind created no
 * socket). Another address serves itself alone. */
static int bind_listen(pcclMasterInstance_t *m, const ccoip_socket_address_t *a) {
    struct sockaddr_storage ss;
    ccoip_socket_address_t v6, v4;
    int rc = UV_EAFNOSUPPORT;
    if (addr_listen_dual(a, &v6, &v4)) {
        addr_to_sockaddr(&v6, &ss);
        rc = uv_tcp_bind(&m->server, (const struct sockaddr *)&ss, 0);
        a = &v4;
    }
    if (rc == UV_EAFNOSUPPORT) {
        addr_to_sockaddr(a, &ss);
        rc = uv_tcp_bind(&m->server, (const struct sockaddr *)&ss, a->inet.protocol == inetIPv6 ? UV_TCP_IPV6ONLY : 0);
    }
    if (rc == 0) rc = uv_listen((uv_stream_t *)&m->server, 511, on_connection);
    return rc;
}

pcclResult_t pcclCreateMaster(ccoip_socket_address_t listen_address, pcclMasterInstance_t **out) {
    if (!out || (listen_address.inet.protocol != inetIPv4 && listen_address.inet.protocol != inetIPv6))
        return pcclInvalidArgument;
    sec_cfg_t sec = {0};
    char err[256];
    int krc = sec_key_from_env(&sec, err, sizeof err);
    const char *enc = getenv("PCCL_ENCRYPT");
    sec.encrypt = enc && *enc && strcmp(enc, "0") != 0;
    if (krc != 0 || (sec.encrypt && !sec.keyed)) {
        PLOG_ERROR("master", "%s", krc != 0 ? err : "PCCL_ENCRYPT needs a run key (PCCL_KEY_FILE)");
        return pcclInvalidArgument;
    }
    if (sodium_init() < 0) return pcclInternalError; /* the challenges' random nonces */
    pcclMasterInstance_t *m = calloc(1, sizeof *m);
    if (!m) return pcclInternalError;
    m->sec = sec;
    gate_init(&m->gate, &master_gate_limits);
    if (uv_loop_init(&m->loop) != 0) {
        free(m);
        return pcclInternalError;
    }
    m->loop.data = m;
    msm_io_t io = {.ctx = m, .send = sm_send, .close = sm_close};
    m->sm = msm_create(io);
    /* The state machine's clock starts now: a RESUME joins a rebuild only within its restart window. */
    if (m->sm) msm_set_time(m->sm, uv_now(&m->loop));
    uv_tcp_init(&m->loop, &m->server);
    m->server.data = m;
    int rc = bind_listen(m, &listen_address);
    if (rc != 0 || !m->sm) {
        char where[ADDR_STRLEN];
        addr_str(&listen_address, where);
        PLOG_ERROR("master", "cannot listen on %s: %s", where, rc ? uv_strerror(rc) : "no memory");
        m->last_error = rc;
        uv_close((uv_handle_t *)&m->server, NULL);
        uv_run(&m->loop, UV_RUN_DEFAULT);
        uv_loop_close(&m->loop);
        msm_destroy(m->sm);
        free(m);
        return pcclInternalError;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&m->server, (struct sockaddr *)&bound, &blen);
    ccoip_socket_address_t b;
    m->port = addr_from_sockaddr((struct sockaddr *)&bound, &b) == 0 ? b.port : 0;
    uv_async_init(&m->loop, &m->stop_async, on_stop);
    m->stop_async.data = m;
    uv_timer_init(&m->loop, &m->tick);
    m->tick.data = m;
    uv_async_init(&m->loop, &m->moon_async, on_moon_done);
    m->moon_async.data = m;
    const char *pt = getenv("PCCL_PEER_TIMEOUT_MS");
    long timeout = pt && *pt ? strtol(pt, NULL, 10) : 10000;
    msm_set_peer_timeout(m->sm, timeout > 0 ? (uint64_t)timeout : 0);
    const char *vt = getenv("PCCL_VOTE_TIMEOUT_MS");
    long vote = vt && *vt ? strtol(vt, NULL, 10) : MSM_VOTE_TIMEOUT_MS;
    msm_set_vote_timeout(m->sm, vote > 0 ? (uint64_t)vote : 0);
    const char *sm = getenv("PCCL_STRIPE_MIN_BYTES"), *sl = getenv("PCCL_STRIPE_LOCAL");
    long long stripe_min = sm && *sm ? strtoll(sm, NULL, 10) : (long long)MSM_STRIPE_MIN_BYTES;
    msm_set_stripe(m->sm, stripe_min > 0 ? (uint64_t)stripe_min : MSM_STRIPE_MIN_BYTES, sl && atoi(sl) > 0);
    /* Peers of a run this master replaces retry every 250 ms at most (libpccl/src/api/resume.c). */
    msm_set_boot_grace(m->sm, 1000);
    msm_set_rebuild_floor(m->sm, 500);
    uv_timer_start(&m->tick, on_tick, 250, 250);
    *out = m;
    return pcclSuccess;
}

pcclResult_t pcclRunMaster(pcclMasterInstance_t *m) {
    if (!m || atomic_load(&m->running)) return pcclInvalidArgument;
    if (!m->sec.keyed)
        PLOG_WARN("master", "this run is open: anyone who can reach port %u can join it and read its traffic "
                  "(a run key closes it: pccl master --key-file FILE, or PCCL_KEY_FILE)", m->port);
    else
        PLOG_INFO("master", "keyed run: peers must prove the run key%s", m->sec.encrypt ? "; traffic is encrypted" : "");
    atomic_store(&m->running, 1);
    if (pthread_create(&m->thread, NULL, loop_thread, m) != 0) {
        atomic_store(&m->running, 0);
        return pcclInternalError;
    }
    return pcclSuccess;
}

pcclResult_t pcclInterruptMaster(pcclMasterInstance_t *m) {
    if (!m || !atomic_load(&m->running)) return pcclInvalidArgument;
    if (atomic_exchange(&m->interrupted, 1)) return pcclSuccess;
    uv_async_send(&m->stop_async); /* async-signal-safe */
    return pcclSuccess;
}

void pccl__master_end_run(pcclMasterInstance_t *m, const char *reason) {
    if (!m || !atomic_load(&m->running) || atomic_load(&m->interrupted)) return;
    size_t i = 0;
    for (; reason && reason[i] && i + 1 < sizeof m->end_reason; i++) m->end_reason[i] = reason[i];
    m->end_reason[i] = 0;
    atomic_store(&m->end_run, 1);
    pcclInterruptMaster(m);
}

pcclResult_t pcclMasterAwaitTermination(pcclMasterInstance_t *m) {
    if (!m || !atomic_load(&m->running)) return pcclInvalidArgument;
    pthread_join(m->thread, NULL);
    atomic_store(&m->running, 0);
    atomic_store(&m->joined, 1);
    return pcclSuccess;
}

pcclResult_t pcclDestroyMaster(pcclMasterInstance_t *m) {
    if (!m) return pcclInvalidArgument;
    if (atomic_load(&m->running)) return pcclInvalidUsage;
    if (!atomic_load(&m->joined)) {
        /* Never run: close the listener and stop handle on this thread. */
        pccl__admin_on_stop(m);
        pccl__allow_on_stop(m);
        uv_close((uv_handle_t *)&m->server, NULL);
        uv_close((uv_handle_t *)&m->stop_async, NULL);
        uv_close((uv_handle_t *)&m->tick, NULL);
        uv_close((uv_handle_t *)&m->moon_async, NULL);
        uv_run(&m->loop, UV_RUN_DEFAULT);
    }
    uv_loop_close(&m->loop);
    pccl__admin_free(m);
    free(m->allow_keys_path);
    msm_destroy(m->sm);
    gate_free(&m->gate);
    free(m);
    return pcclSuccess;
}

uint16_t pccl__master_port(const pcclMasterInstance_t *m) { return m ? m->port : 0; }
void pccl__master_set_tick_hook(pcclMasterInstance_t *m, void (*fn)(void *ctx, uint64_t now_ms), void *ctx) {
    m->tick_hook = fn;
    m->tick_hook_ctx = ctx;
}
void pccl__master_set_vote_timeout(pcclMasterInstance_t *m, uint64_t timeout_ms) {
    msm_set_vote_timeout(m->sm, timeout_ms);
}

int pccl__master_set_relays(pcclMasterInstance_t *m, const ccoip_socket_address_t *relays, uint32_t n) {
    if (!m || atomic_load(&m->running)) return -PERR_INVALID;
    return msm_set_relays(m->sm, relays, n);
}

int pccl__master_set_security(pcclMasterInstance_t *m, const sec_cfg_t *sec) {
    if (!m || !sec || atomic_load(&m->running) || (sec->encrypt && !sec->keyed)) return -PERR_INVALID;
    m->sec = *sec;
    return 0;
}
