/*
 * relay_internal.h - the relay's state (relay_server.c: listener, limits, deadlines, stopping) and its
 * connections (relay_conn.c: greeting, pairing, moving bytes, closing). Loop thread only.
 */
#ifndef PCCL_RELAY_INTERNAL_H
#define PCCL_RELAY_INTERNAL_H

#include <stdint.h>

#include <uv.h>

#include "base/base.h"
#include "relay/relay.h"

enum rconn_state { RC_GREETING, RC_WAITING, RC_PAIRED, RC_CLOSING };

struct rpair;

typedef struct rconn {
    uv_tcp_t tcp;
    struct relay *r;
    struct rconn *prev, *next; /* every connection not yet closed (r->conns) */
    struct rconn *peer;        /* the other side of its pair */
    struct rpair *pair;
    ccoip_socket_address_t from;
    uint32_t addr_key; /* gate_key_of(from) */
    int admitted;      /* counted in the limits */
    int state;
    uint64_t since_ms; /* accepted, then greeted (the deadline of its state runs from here) */
    uint8_t greet[RELAY_GREETING_BYTES];
    size_t greet_len;
    relay_greeting_t g;
    size_t queued; /* bytes written to it and not yet sent */
    int reading, eof, shut; /* reads started; its read side ended; its write side shut down */
} rconn_t;

typedef struct rpair {
    rconn_t *c[2]; /* dialer, target */
    uint64_t bytes, since_ms;
    uint64_t half_since; /* when one side closed (0: neither yet) */
    int nclosed;         /* close callbacks run, of 2 */
    char id[9];          /* the token's first bytes in hex, for the log */
} rpair_t;

/* Sources with connections open, and how many each. */
typedef struct raddr {
    uint32_t key, n;
} raddr_t;

struct relay {
    uv_loop_t loop;
    uv_tcp_t server;
    uv_timer_t tick;
    uv_signal_t sigint, sigterm;
    relay_limits_t lim;
    int keyed, run_key; /* tokens are checked under token_key; run_key: it came from the run key file */
    uint8_t token_key[RELAY_KEY_BYTES];
    uint16_t port;
    rconn_t *conns;
    uint32_t nconns;
    raddr_t *addrs;
    uint32_t naddrs, cap_addrs;
    int stopping;
    /* counters, logged when the relay stops */
    uint64_t pairs, refused_limit, refused_token, refused_garbage, timed_out;
};

/* relay_conn.c: the connection's read callbacks (greeting, then its pair's bytes). */
void rconn_start(rconn_t *c);
/* Answers status (a byte, when it can go at once) and closes c. */
void rconn_refuse(rconn_t *c, int status);
/* Closes c, and its pair's other side with it. */
void rconn_close(rconn_t *c, const char *why);
/* Closes both sides of p. */
void rpair_close(rpair_t *p, const char *why);

/* Whether the count-th refusal of a kind is logged: the first ten, then every thousandth, so a flood does not
 * fill the log (the counts are logged when the relay stops). */
int relay_log_due(uint64_t count);

/* relay_key.c: the token key of path, a relay key file (relay_key_line) or the run key file (*run_key 1).
 * @return 0, or -PERR_INVALID with a one-line reason in err. */
int relay_load_key(const char *path, uint8_t k[RELAY_KEY_BYTES], int *run_key, char *err, size_t errlen);

/* relay_server.c: a connection's close callback ran; forget it in the limits and free it (a pair's sides are
 * freed together, once both closed). */
void relay_forget(rconn_t *c);

#endif
