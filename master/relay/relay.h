/*
 * relay/ - the relay of last resort (`pccl relay`; docs/relay.md): a process of its own, beside the master,
 * that pairs two connections presenting the same token with opposite roles and then moves their bytes both
 * ways without interpreting them. It is what a peer uses for an edge it can neither dial nor punch.
 *
 * One libuv loop on the thread that calls relay_run owns every connection; nothing else touches them.
 * Strangers are bounded: connections in total and per source address (an IPv4 address, an IPv6 /64), the time
 * to send the greeting and to find a partner, and each pair's bytes and lifetime; a connection that sends
 * anything but a greeting is closed without touching any other. Depends on the library's base/ and sec/ only
 * (the greeting and the token check are sec_relay.h's, shared with the relay client and the master).
 *
 * This is the one relay header the pccl command uses.
 */
#ifndef PCCL_RELAY_H
#define PCCL_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "ccoip_inet.h"
#include "sec/sec.h" /* RELAY_DEFAULT_PORT */

/* What strangers may take from a relay. */
typedef struct relay_limits {
    uint32_t max_conns;    /* connections at once, all together (greeting, waiting and paired) */
    uint32_t max_per_addr; /* connections at once from one source address */
    uint64_t greet_ms;     /* the greeting must be complete this long after the connection is accepted */
    uint64_t wait_ms;      /* a greeted connection waits this long for its partner; a pair one side closed must
                            * finish within it too */
    uint64_t pair_bytes;   /* bytes a pair may move, both directions together (0: no limit) */
    uint64_t pair_ms;      /* how long a pair may last (0: no limit) */
} relay_limits_t;

#define RELAY_DEFAULT_MAX_CONNS 1024
#define RELAY_DEFAULT_MAX_PER_ADDR 64
#define RELAY_DEFAULT_GREET_MS 5000
#define RELAY_DEFAULT_WAIT_MS 30000
#define RELAY_DEFAULT_PAIR_MIB 1048576  /* a tebibyte */
#define RELAY_DEFAULT_PAIR_SECONDS 86400 /* a day */

typedef struct relay relay_t;

/*
 * Listens on addr (port 0: any; 0.0.0.0 and [::] serve IPv4 and IPv6 alike) with the limits lim. key_file: a
 * relay key file (relay_key_line) or the run key file (the master's --key-file format): only tokens minted under
 * the run key are paired; NULL: an open relay, which pairs any token. SIGINT and SIGTERM stop relay_run from now on. @return 0 and *out; -PERR_INVALID (a key file
 * refused, limits of 0); -PERR_IO (cannot listen); -PERR_NOMEM; -PERR_FAILED; with a one-line reason in err.
 */
int relay_create(const ccoip_socket_address_t *addr, const relay_limits_t *lim, const char *key_file,
                 relay_t **out, char *err, size_t errlen);
/* The port it listens on (its own after port 0). */
uint16_t relay_port(const relay_t *r);
/* Whether it checks tokens: 0 no (open), 1 under a relay key file, 2 under the run key file (whose holder can
 * join the run). */
int relay_keyed(const relay_t *r);
/* The relay key line of the run key file run_key_file ("pccl-relay-key-v1 BASE64", no newline) into out: the
 * token key alone, for a keyed relay that must not hold the run key. @return 0, or -PERR_INVALID with err. */
int relay_key_line(const char *run_key_file, char *out, size_t cap, char *err, size_t errlen);
/* Runs the loop on this thread until SIGINT or SIGTERM, then closes every connection. @return 0. */
int relay_run(relay_t *r);
void relay_destroy(relay_t *r);

#endif
