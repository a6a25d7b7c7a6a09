/* relay_conn.c - a relay connection from its greeting to its close: pairing by token and role, then the
 * pair's bytes moved both ways with bounded buffering (relay_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay/relay_internal.h"

/* Bytes queued towards one side past which the other side is no longer read (and read again below
 * RELAY_LOW): what a slow reader can make the relay hold. */
#define RELAY_HIGH (256u << 10)
#define RELAY_LOW (64u << 10)
#define RELAY_READ (64u << 10)

/* A read buffer that becomes the write request passing it on. */
typedef struct rchunk {
    uv_write_t req;
    rconn_t *to;
    size_t len;
    char data[RELAY_READ];
} rchunk_t;

static void on_close(uv_handle_t *h) { relay_forget(h->data); }

int relay_log_due(uint64_t count) { return count <= 10 || count % 1000 == 0; }

static void close_one(rconn_t *c) {
    if (c->state == RC_CLOSING) return;
    c->state = RC_CLOSING;
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void log_pair_end(rpair_t *p, const char *why) {
    uint64_t ms = uv_now(&p->c[0]->r->loop) - p->since_ms;
    PLOG_INFO("relay", "pair %s closed after %llu bytes in %llu.%03llu s (%s)", p->id, (unsigned long long)p->bytes,
              (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000), why);
}

void rpair_close(rpair_t *p, const char *why) {
    if (p->c[0]->state != RC_CLOSING || p->c[1]->state != RC_CLOSING) log_pair_end(p, why);
    close_one(p->c[0]);
    close_one(p->c[1]);
}

void rconn_close(rconn_t *c, const char *why) {
    if (c->pair) rpair_close(c->pair, why);
    else close_one(c);
}

void rconn_refuse(rconn_t *c, int status) {
    /* On a fresh connection the one byte goes at once; if it cannot, closing says enough. */
    uint8_t st = (uint8_t)status;
    uv_buf_t b = uv_buf_init((char *)&st, 1);
    if (c->state != RC_CLOSING) uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    close_one(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)h;
    (void)suggested;
    rchunk_t *k = malloc(sizeof *k);
    *buf = k ? uv_buf_init(k->data, sizeof k->data) : uv_buf_init(NULL, 0);
}

static rchunk_t *chunk_of(const uv_buf_t *buf) {
    return buf->base ? (rchunk_t *)(buf->base - offsetof(rchunk_t, data)) : NULL;
}

static void set_reading(rconn_t *c, int on);

static void on_written(uv_write_t *req, int status) {
    rchunk_t *k = req->data;
    rconn_t *to = k->to, *from = to->peer;
    to->queued -= k->len;
    free(k);
    if (to->state == RC_CLOSING) return;
    if (status < 0) {
        rconn_close(to, uv_strerror(status));
        return;
    }
    if (to->queued < RELAY_LOW && from->state == RC_PAIRED && !from->eof && !from->reading) set_reading(from, 1);
}

static void on_shut(uv_shutdown_t *req, int status) {
    rconn_t *c = req->data;
    free(req);
    if (c->state == RC_CLOSING) return;
    c->shut = 1;
    if (status < 0) rconn_close(c, uv_strerror(status));
    else if (c->eof && c->peer->eof && c->peer->shut) rpair_close(c->pair, "both sides closed");
}

/* from's read side ended: the other side's write side is shut down once what was queued for it is sent. */
static void pass_eof(rconn_t *from) {
    from->eof = 1;
    set_reading(from, 0);
    rconn_t *to = from->peer;
    if (!from->pair->half_since) from->pair->half_since = uv_now(&from->r->loop);
    uv_shutdown_t *req = malloc(sizeof *req);
    if (!req) {
        rconn_close(from, "out of memory");
        return;
    }
    req->data = to;
    if (uv_shutdown(req, (uv_stream_t *)&to->tcp, on_shut) != 0) {
        free(req);
        rconn_close(from, "cannot pass the close on");
    }
}

/* A paired connection's bytes go to its peer as they are; the pair's limit counts them. */
static void pass_on(rconn_t *from, rchunk_t *k, size_t n) {
    rconn_t *to = from->peer;
    rpair_t *p = from->pair;
    p->bytes += n;
    if (from->r->lim.pair_bytes && p->bytes > from->r->lim.pair_bytes) {
        free(k);
        rpair_close(p, "byte limit reached");
        return;
    }
    k->to = to;
    k->len = n;
    k->req.data = k;
    uv_buf_t b = uv_buf_init(k->data, (unsigned)n);
    to->queued += n;
    int rc = uv_write(&k->req, (uv_stream_t *)&to->tcp, &b, 1, on_written);
    if (rc != 0) {
        to->queued -= n;
        free(k);
        rpair_close(p, uv_strerror(rc));
        return;
    }
    if (to->queued > RELAY_HIGH) set_reading(from, 0);
}

static void pair_up(rconn_t *a, rconn_t *b);
static void on_greeting(rconn_t *c, const uint8_t *data, size_t n);

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    rconn_t *c = s->data;
    rchunk_t *k = chunk_of(buf);
    if (c->state == RC_CLOSING || nread == 0) {
        free(k);
        return;
    }
    if (nread < 0) {
        free(k);
        if (c->state == RC_PAIRED && nread == UV_EOF) pass_eof(c);
        else rconn_close(c, nread == UV_EOF ? "closed" : uv_strerror((int)nread));
        return;
    }
    if (c->state == RC_PAIRED) {
        pass_on(c, k, (size_t)nread);
        return;
    }
    on_greeting(c, (const uint8_t *)k->data, (size_t)nread);
    free(k);
}

static void set_reading(rconn_t *c, int on) {
    if (on == c->reading) return;
    c->reading = on;
    if (on) uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    else uv_read_stop((uv_stream_t *)&c->tcp);
}

void rconn_start(rconn_t *c) {
    c->tcp.data = c;
    uv_tcp_nodelay(&c->tcp, 1);
    set_reading(c, 1);
}

/* The waiting connection with c's token, or NULL; *same_role: it has c's role too. */
static rconn_t *find_partner(rconn_t *c, int *same_role) {
    for (rconn_t *o = c->r->conns; o; o = o->next) {
        if (o == c || o->state != RC_WAITING || memcmp(o->g.token, c->g.token, RELAY_TOKEN_BYTES) != 0) continue;
        *same_role = o->g.role == c->g.role;
        return o;
    }
    return NULL;
}

/* A whole greeting from c: checked, then paired or left waiting. */
static void greeted(rconn_t *c) {
    relay_t *r = c->r;
    char who[ADDR_STRLEN];
    addr_str(&c->from, who);
    if (r->keyed && relay_token_check_key(r->token_key, c->g.token) != 0) {
        if (relay_log_due(++r->refused_token))
            PLOG_WARN("relay", "%s: a token not minted under the run key, refused (%llu so far)", who,
                      (unsigned long long)r->refused_token);
        rconn_refuse(c, RELAY_ST_BAD_TOKEN);
        return;
    }
    int same_role = 0;
    rconn_t *o = find_partner(c, &same_role);
    if (o && same_role) {
        r->refused_limit++;
        PLOG_DEBUG("relay", "%s: the token's role is taken, refused", who);
        rconn_refuse(c, RELAY_ST_BUSY);
        return;
    }
    if (o) {
        pair_up(o, c);
        return;
    }
    c->state = RC_WAITING;
    c->since_ms = uv_now(&r->loop);
}

static void on_greeting(rconn_t *c, const uint8_t *data, size_t n) {
    if (c->state == RC_WAITING) { /* nothing may come before the pairing */
        c->r->refused_garbage++;
        rconn_close(c, "bytes before its pairing");
        return;
    }
    size_t room = sizeof c->greet - c->greet_len, take = n < room ? n : room;
    memcpy(c->greet + c->greet_len, data, take);
    c->greet_len += take;
    int rc = relay_greeting_parse(c->greet, c->greet_len, &c->g);
    if (rc < 0 || (rc == 0 && take < n)) {
        c->r->refused_garbage++;
        char who[ADDR_STRLEN];
        addr_str(&c->from, who);
        PLOG_DEBUG("relay", "%s: %s, closed", who, rc == -PERR_REFUSED ? "another protocol version" : "not a relay greeting");
        if (rc == -PERR_REFUSED) rconn_refuse(c, RELAY_ST_VERSION);
        else rconn_close(c, "garbage");
        return;
    }
    if (rc == 0) greeted(c);
}

static void pair_up(rconn_t *a, rconn_t *b) {
    relay_t *r = a->r;
    rpair_t *p = calloc(1, sizeof *p);
    if (!p) {
        rconn_close(a, "out of memory");
        rconn_close(b, "out of memory");
        return;
    }
    p->c[0] = a->g.role == RELAY_ROLE_DIALER ? a : b;
    p->c[1] = p->c[0] == a ? b : a;
    p->since_ms = uv_now(&r->loop);
    for (int i = 0; i < 4; i++) snprintf(p->id + 2 * i, 3, "%02x", a->g.token[i]);
    a->pair = b->pair = p;
    a->peer = b;
    b->peer = a;
    a->state = b->state = RC_PAIRED;
    a->since_ms = b->since_ms = p->since_ms;
    r->pairs++;
    char da[ADDR_STRLEN], ta[ADDR_STRLEN];
    addr_str(&p->c[0]->from, da);
    addr_str(&p->c[1]->from, ta);
    PLOG_INFO("relay", "pair %s: %s (dialer) <-> %s (target)", p->id, da, ta);
    uint8_t st = RELAY_ST_PAIRED;
    uv_buf_t buf = uv_buf_init((char *)&st, 1);
    /* Nothing was written to either yet, so the byte goes at once and before anything the other side sends. */
    if (uv_try_write((uv_stream_t *)&a->tcp, &buf, 1) != 1 || uv_try_write((uv_stream_t *)&b->tcp, &buf, 1) != 1)
        rpair_close(p, "cannot answer the pairing");
}
