/*
 * master_gate.h - what the master lets strangers hold (internal). A stranger is
 * a control connection that has not yet delivered its first message (HELLO or
 * RESUME; in a keyed run, that has not finished its handshake). Strangers are
 * capped in number per source address and in total, in the bytes they may make
 * the master buffer (per address and all together), and in time. RESUME may
 * legitimately be megabytes (rings, hashes of many tensors), so bytes are a
 * budget shared by all strangers rather than a small per-frame limit; every
 * other first message must fit MGATE_HELLO_MAX.
 *
 * Pure bookkeeping: no sockets, no clock (the server passes the time). When a
 * limit is reached the gate names whom to close: a newcomer over its address's
 * cap is refused; past the totals, the oldest stranger of the address holding
 * the most is evicted, so a flood from a few addresses evicts its own
 * connections and honest peers from elsewhere still get in.
 */
#ifndef PCCL_MASTER_GATE_H
#define PCCL_MASTER_GATE_H

#include <stddef.h>
#include <stdint.h>

#define MGATE_PER_ADDR 64                 /* strangers per source address */
#define MGATE_TOTAL 512                   /* strangers in all */
#define MGATE_BYTES_PER_ADDR (32u << 20)  /* buffered by the strangers of one address */
#define MGATE_BYTES_TOTAL (64u << 20)     /* buffered by all strangers */
#define MGATE_DEADLINE_MS 10000           /* from accept to the first message */
#define MGATE_HELLO_MAX 4096              /* body of a first message other than RESUME */
#define MGATE_EVICT_MAX 16                /* most evictions one reservation may ask for */

typedef struct mgate_limits {
    size_t per_addr, total;
    size_t bytes_per_addr, bytes_total;
    uint64_t deadline_ms;
} mgate_limits_t;

typedef struct mgate_ent {
    uint64_t id;
    uint32_t addr;
    size_t bytes;
    uint64_t since_ms;
} mgate_ent_t;

typedef struct mgate {
    mgate_limits_t lim;
    mgate_ent_t *v; /* in order of arrival */
    size_t n, cap;
    size_t bytes;
    uint64_t refused, evicted, expired; /* counters for logs and tests */
} mgate_t;

/* lim NULL: the MGATE_* defaults. */
void mgate_init(mgate_t *g, const mgate_limits_t *lim);
void mgate_free(mgate_t *g);
/*
 * A new stranger id from addr, holding nothing yet. @return 0 admitted (*evict is 0, or a
 * stranger that was removed to make room: close it), -1 refused (close the newcomer).
 */
int mgate_admit(mgate_t *g, uint64_t id, uint32_t addr, uint64_t now_ms, uint64_t *evict);
/*
 * Stranger id wants to buffer bytes in all (not more on top). @return 0 granted (evict[0, *nevict)
 * were removed to make room: close them), -1 refused (id was removed: close it). Not a stranger:
 * granted.
 */
int mgate_reserve(mgate_t *g, uint64_t id, size_t bytes, uint64_t evict[MGATE_EVICT_MAX], size_t *nevict);
/* id is no stranger any more (registered, authenticated or closed); unknown ids are ignored. */
void mgate_remove(mgate_t *g, uint64_t id);
/* Removes strangers older than the deadline into out (at most max). @return how many. */
size_t mgate_expire(mgate_t *g, uint64_t now_ms, uint64_t *out, size_t max);
int mgate_is_stranger(const mgate_t *g, uint64_t id);

#endif
