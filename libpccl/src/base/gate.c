/* gate.c - see gate.h. */
#include "base/gate.h"

#include <stdlib.h>
#include <string.h>

uint32_t gate_key_of(const ccoip_inet_address_t *a) {
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    uint32_t k;
    if (a->protocol == inetIPv4) {
        memcpy(&k, a->ipv4.data, 4);
        return k;
    }
    if (memcmp(a->ipv6.data, mapped, 12) == 0) {
        memcpy(&k, a->ipv6.data + 12, 4);
        return k;
    }
    uint32_t h = 2166136261u; /* FNV-1a over the /64 */
    for (int i = 0; i < 8; i++) h = (h ^ a->ipv6.data[i]) * 16777619u;
    return h;
}

void gate_init(gate_t *g, const gate_limits_t *lim) {
    memset(g, 0, sizeof *g);
    g->lim = *lim;
}

void gate_free(gate_t *g) {
    free(g->v);
    memset(g, 0, sizeof *g);
}

static gate_ent_t *find(const gate_t *g, uint64_t id) {
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].id == id) return &g->v[i];
    return NULL;
}

static void remove_at(gate_t *g, size_t i) {
    g->bytes -= g->v[i].bytes;
    memmove(g->v + i, g->v + i + 1, (g->n - i - 1) * sizeof *g->v);
    g->n--;
}

static void addr_use(const gate_t *g, uint32_t addr, size_t *count, size_t *bytes) {
    *count = *bytes = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].addr == addr) {
            (*count)++;
            *bytes += g->v[i].bytes;
        }
}

/* Index of the oldest stranger (other than skip, and holding bytes when by_bytes) of the address
 * holding the most: strangers when by_bytes is 0, bytes otherwise; -1 when there is none. Quadratic, over at most lim.total. */
static long pick_victim(const gate_t *g, uint64_t skip, int by_bytes) {
    long best = -1;
    size_t best_use = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (g->v[i].id == skip || (by_bytes && !g->v[i].bytes)) continue;
        size_t count, bytes;
        addr_use(g, g->v[i].addr, &count, &bytes);
        size_t use = by_bytes ? bytes : count;
        if (best < 0 || use > best_use) { /* strict: the first (oldest) of that address wins */
            best = (long)i;
            best_use = use;
        }
    }
    return best;
}

int gate_admit(gate_t *g, uint64_t id, uint32_t addr, uint64_t now_ms, uint64_t *evict) {
    *evict = 0;
    size_t count, bytes;
    addr_use(g, addr, &count, &bytes);
    if (count >= g->lim.per_addr) {
        g->refused++;
        return -PERR_REFUSED;
    }
    if (g->n >= g->lim.total) {
        long v = pick_victim(g, 0, 0);
        if (v < 0) {
            g->refused++;
            return -PERR_REFUSED;
        }
        *evict = g->v[v].id;
        remove_at(g, (size_t)v);
        g->evicted++;
    }
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 64;
        gate_ent_t *nv = realloc(g->v, cap * sizeof *nv);
        if (!nv) {
            g->refused++;
            return -PERR_REFUSED;
        }
        g->v = nv;
        g->cap = cap;
    }
    g->v[g->n++] = (gate_ent_t){.id = id, .addr = addr, .since_ms = now_ms};
    return 0;
}

int gate_reserve(gate_t *g, uint64_t id, size_t want, uint64_t evict[GATE_EVICT_MAX], size_t *nevict) {
    *nevict = 0;
    gate_ent_t *e = find(g, id);
    if (!e || want <= e->bytes) return 0;
    size_t count, bytes;
    addr_use(g, e->addr, &count, &bytes);
    size_t extra = want - e->bytes;
    if (bytes + extra > g->lim.bytes_per_addr || want > g->lim.bytes_total) goto refuse;
    while (g->bytes + extra > g->lim.bytes_total) {
        long v = pick_victim(g, id, 1);
        if (v < 0 || *nevict == GATE_EVICT_MAX || g->v[v].bytes == 0) goto refuse;
        evict[(*nevict)++] = g->v[v].id;
        remove_at(g, (size_t)v);
        g->evicted++;
    }
    e = find(g, id); /* removals moved it */
    g->bytes += extra;
    e->bytes = want;
    return 0;
refuse:
    g->refused++;
    gate_remove(g, id);
    return -PERR_REFUSED;
}

int gate_hold(gate_t *g, uint64_t id, size_t bytes, uint64_t evict[GATE_EVICT_MAX], size_t *nevict) {
    *nevict = 0;
    gate_ent_t *e = find(g, id);
    if (!e) return 0;
    e->held = 1;
    if (bytes >= e->bytes) return gate_reserve(g, id, bytes, evict, nevict);
    g->bytes -= e->bytes - bytes;
    e->bytes = bytes;
    return 0;
}

int gate_evict_one(gate_t *g, uint64_t *id) {
    long v = pick_victim(g, 0, 0);
    if (v < 0) return -PERR_INVALID;
    *id = g->v[v].id;
    remove_at(g, (size_t)v);
    g->evicted++;
    return 0;
}

void gate_remove(gate_t *g, uint64_t id) {
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].id == id) {
            remove_at(g, i);
            return;
        }
}

size_t gate_expire(gate_t *g, uint64_t now_ms, uint64_t *out, size_t max) {
    size_t k = 0, i = 0;
    /* Oldest first: stop at the first one (not held) still within its deadline. */
    while (k < max && i < g->n) {
        if (g->v[i].held) {
            i++;
            continue;
        }
        if (now_ms - g->v[i].since_ms <= g->lim.deadline_ms) break;
        out[k++] = g->v[i].id;
        remove_at(g, i);
        g->expired++;
    }
    return k;
}

int gate_is_stranger(const gate_t *g, uint64_t id) { return find(g, id) != NULL; }
