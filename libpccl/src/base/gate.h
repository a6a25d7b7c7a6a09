/*
 * gate.h - what strangers may hold (internal). A stranger is a connection that
 * has not yet proven who it is: on the master, a control connection before its
 * first message (HELLO or RESUME; in a keyed run, before its handshake ends);
 * on a peer's p2p port, a connection in its hello or handshake. Strangers are
 * capped in number per source address and in total, in the bytes they may make
 * this process buffer (per address and all together), and in time.
 *
 * Pure bookkeeping: no sockets, no clock (the caller passes the time). When a
 * limit is reached the gate names whom to close: a newcomer over its address's
 * cap is refused; past the totals, the oldest stranger of the address holding
 * the most is evicted, so a flood from a few addresses evicts its own
 * connections while honest ones from elsewhere still get in.
 */
#ifndef PCCL_GATE_H
#define PCCL_GATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "ccoip_inet.h"

#define GATE_EVICT_MAX 16 /* most evictions one reservation may ask for */

typedef struct gate_limits {
    size_t per_addr, total;
    size_t bytes_per_addr, bytes_total;
    uint64_t deadline_ms;
} gate_limits_t;

typedef struct gate_ent {
    uint64_t id;
    uint32_t addr;
    size_t bytes;
    uint64_t since_ms;
    int held; /* its deadline no longer applies (gate_hold) */
} gate_ent_t;

typedef struct gate {
    gate_limits_t lim;
    gate_ent_t *v; /* in order of arrival */
    size_t n, cap;
    size_t bytes;
    uint64_t refused, evicted, expired; /* counters for logs and tests */
} gate_t;

/* The per-address key of a source: an IPv4 address (also IPv4-mapped IPv6) itself; an IPv6 one by its
 * /64, the network one host usually gets, so a host cannot multiply its quota by its addresses. */
uint32_t gate_key_of(const ccoip_inet_address_t *a);
void gate_init(gate_t *g, const gate_limits_t *lim);
void gate_free(gate_t *g);
/*
 * A new stranger id from addr, holding nothing yet. @return 0 admitted (*evict is 0, or a
 * stranger that was removed to make room: close it), -PERR_REFUSED (close the newcomer).
 */
int gate_admit(gate_t *g, uint64_t id, uint32_t addr, uint64_t now_ms, uint64_t *evict);
/*
 * Stranger id wants to buffer bytes in all (not more on top). @return 0 granted (evict[0, *nevict)
 * were removed to make room: close them), -PERR_REFUSED (id was removed: close it). Not a stranger:
 * granted.
 */
int gate_reserve(gate_t *g, uint64_t id, size_t bytes, uint64_t evict[GATE_EVICT_MAX], size_t *nevict);
/*
 * Stranger id delivered its first message, but what it made this process keep still counts: it holds
 * bytes in all from now on (fewer or more than before; more is reserved as by gate_reserve), and its
 * deadline no longer applies (the caller bounds the wait). @return as gate_reserve.
 */
int gate_hold(gate_t *g, uint64_t id, size_t bytes, uint64_t evict[GATE_EVICT_MAX], size_t *nevict);
/* Removes the oldest stranger of the address holding the most into *id (to free what it holds:
 * its descriptor when the process ran out of them). @return 0, or -PERR_INVALID when there is none. */
int gate_evict_one(gate_t *g, uint64_t *id);
/* id is no stranger any more (registered, authenticated or closed); unknown ids are ignored. */
void gate_remove(gate_t *g, uint64_t id);
/* Removes strangers older than the deadline (not held ones) into out (at most max). @return how many. */
size_t gate_expire(gate_t *g, uint64_t now_ms, uint64_t *out, size_t max);
int gate_is_stranger(const gate_t *g, uint64_t id);

#endif
