/*
 * ss_fetch.c - see ss_fetch.h. The request on a SHARED_STATE connection lists
 * ranges (shared_state.c serves them):
 *   requester: u32 n, then n times: u8 key length, key, u64 offset, u64 length
 *   server:    per range: u8 status (0 ok, 1 unavailable), u64 byte count, bytes
 */
#include "ss/ss_fetch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "p2p/p2p.h"
#include "pccl_kernels.h"
#include "ss/ss_device.h"

typedef struct job {
    uint32_t t; /* fetch entry */
    uint8_t src;
    uint64_t off, len, got; /* got: bytes already in the staging buffer */
} job_t;

typedef struct fetch_ctx {
    pcclComm_t *c;
    const wire_msg_t *plan;
    const pcclTensorInfo_t **tens; /* per fetch entry */
    uint64_t *size;                /* per fetch entry, bytes */
    uint64_t *at;                  /* per fetch entry, offset in its stage's buffer */
    uint32_t dead;                 /* sources that broke off */
    int fd[WIRE_MAX_SS_SOURCES];   /* each source's connection, -1 when none; its worker's (set under fd_mu) */
    sec_link_t *link[WIRE_MAX_SS_SOURCES];
    job_t *jobs;
    size_t njobs, cap;
    uint32_t next_range;
    /* A leave or destroy ends the fetch at once, a lost master does not: watch, one of the communicator's
     * waits (under c->mu, with its own cv), wakes the waiting thread for both; on a leave or destroy that
     * thread cancels w and shuts every connection down (fd_mu keeps a worker's fd from closing under it),
     * on a lost master it watches again. w's eventfd ends a worker's dial; a connection dialled after w
     * ended is shut down at once. */
    pthread_mutex_t fd_mu;
    pwait_t w;     /* the fetch's own wait (fd_mu, with an eventfd): ended only by a leave or destroy */
    pwait_t watch; /* in c->waits; its cv also tells the waiting thread that a worker finished */
    int finished;  /* workers of the round that finished (c->mu) */
} fetch_ctx_t;

typedef struct worker {
    fetch_ctx_t *f;
    int src;
    uint8_t *buf;
    size_t *idx; /* jobs of this source in this round */
    size_t nidx;
    int failed;
    pthread_t th;
} worker_t;

typedef struct verifier {
    fetch_ctx_t *f;
    uint32_t a, b; /* fetch entries [a, b) */
    const uint8_t *buf;
    int failed;
    pthread_t th;
} verifier_t;

static int push_job(fetch_ctx_t *f, job_t j) {
    if (f->njobs == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 64;
        job_t *n = realloc(f->jobs, cap * sizeof *n);
        if (!n) return -PERR_NOMEM;
        f->jobs = n;
        f->cap = cap;
    }
    f->jobs[f->njobs++] = j;
    return 0;
}

/* The request for this worker's jobs in one piece: one write, and one frame per 256 KiB when the run
 * encrypts. NULL when out of memory. */
static uint8_t *build_request(const worker_t *w, size_t *len) {
    const fetch_ctx_t *f = w->f;
    uint8_t *req = malloc(4 + w->nidx * (1 + WIRE_MAX_KEY + 16));
    if (!req) return NULL;
    size_t rl = 4;
    wire_put_u32(req, (uint32_t)w->nidx);
    for (size_t i = 0; i < w->nidx; i++) {
        const job_t *j = &f->jobs[w->idx[i]];
        const char *key = f->tens[j->t]->name;
        size_t kl = strlen(key);
        req[rl++] = (uint8_t)kl;
        memcpy(req + rl, key, kl);
        rl += kl;
        wire_put_u64(req + rl, j->off + j->got);
        wire_put_u64(req + rl + 8, j->len - j->got);
        rl += 16;
    }
    *len = rl;
    return req;
}

/* Sends the request on the source's connection and receives the answers; bytes count in job->got as
 * they arrive, so a transfer that breaks off leaves exactly what was delivered. *answered: a header
 * came back. @return 0 when every job is complete, link_*_all's code, or -PERR_REFUSED (the source
 * cannot provide a range). */
static int exchange(worker_t *w, const uint8_t *req, size_t rl, const char *ip, int *answered) {
    fetch_ctx_t *f = w->f;
    sec_link_t *link = f->link[w->src];
    int fd = f->fd[w->src];
    int rc = link_send_all(link, fd, req, rl);
    if (rc != 0) return rc;
    for (size_t i = 0; i < w->nidx; i++) {
        job_t *j = &f->jobs[w->idx[i]];
        uint8_t hdr[9];
        if ((rc = link_recv_all(link, fd, hdr, sizeof hdr)) != 0) return rc;
        *answered = 1;
        uint64_t want = j->len - j->got;
        if (hdr[0] != 0 || wire_get_u64(hdr + 1) != want) {
            PLOG_WARN(f->c->log_name, "shared-state source %s cannot provide '%s' [%llu, +%llu)", ip,
                      f->tens[j->t]->name,
                      (unsigned long long)(j->off + j->got), (unsigned long long)want);
            return -PERR_REFUSED;
        }
        uint8_t *dst = w->buf + f->at[j->t] + j->off;
        while (j->got < j->len) {
            size_t k = j->len - j->got < SS_CHUNK ? (size_t)(j->len - j->got) : SS_CHUNK;
            if ((rc = link_recv_all(link, fd, dst + j->got, k)) != 0) return rc;
            j->got += k;
        }
    }
    return 0;
}

static void close_conn(fetch_ctx_t *f, int s) {
    pthread_mutex_lock(&f->fd_mu);
    if (f->fd[s] >= 0) {
        sec_link_free(f->link[s]);
        close(f->fd[s]);
        f->fd[s] = -1;
        f->link[s] = NULL;
    }
    pthread_mutex_unlock(&f->fd_mu);
}

/* Ends every transfer of the fetch (a leave or a destroy): blocked receives return at once. */
static void cancel_fetch(fetch_ctx_t *f) {
    pthread_mutex_lock(&f->fd_mu);
    pwait_cancel_locked(&f->w, -PERR_CANCELLED);
    for (int s = 0; s < WIRE_MAX_SS_SOURCES; s++)
        if (f->fd[s] >= 0) shutdown(f->fd[s], SHUT_RDWR);
    pthread_mutex_unlock(&f->fd_mu);
}

/* Opens w as one of c's waits, as comm_wait_open does, but on its own condition variable: the fetch's
 * workers signal it as they finish, which must not wake the communicator's other waiters. */
static int watch_open(pcclComm_t *c, pwait_t *w) {
    if (pwait_init(w, &c->mu, NULL, 0) != 0) return -PERR_FAILED;
    pthread_mutex_lock(&c->mu);
    pwait_set_add_locked(&c->waits, w);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int ss_watch_again_locked(pcclComm_t *c, pwait_t *w) {
    if (comm_cancelled(c)) return -PERR_CANCELLED;
    pwait_set_remove_locked(w);
    pwait_reset(w);
    pwait_set_add_locked(&c->waits, w);
    return 0;
}

/* Receives one source's jobs of this round over its connection, kept from stage to stage so that a
 * stage costs one round trip and no new TCP slow start. A kept connection the source has closed
 * meanwhile (its idle timeout) is dialled again once. */
static void *worker_main(void *arg) {
    worker_t *w = arg;
    fetch_ctx_t *f = w->f;
    const wire_peer_t *peer = &f->plan->u.ss_plan.sources[w->src];
    char ip[ADDR_STRLEN], err[320];
    const ccoip_socket_address_t src = wire_peer_addr(peer);
    addr_str(&src, ip);
    w->failed = 1;
    size_t rl = 0;
    uint8_t *req = build_request(w, &rl);
    for (int attempt = 0; req && attempt < 2 && w->failed; attempt++) {
        int kept = f->fd[w->src] >= 0, answered = 0;
        if (!kept) {
            p2p_intro_t me = {.kind = P2P_KIND_SHARED_STATE};
            memcpy(me.uuid, f->c->uuid, 16);
            net_cancel_t cancel = {.wait = &f->w};
            sec_link_t *link = NULL;
            int how;
            int fd = p2p_dial_peer(f->c, peer, &me, f->c->connect_timeout_ms, &cancel, &link, &how, err, sizeof err);
            if (fd < 0) {
                PLOG_WARN(f->c->log_name, "cannot reach shared-state source %s: %s", ip, err);
                break;
            }
            pthread_mutex_lock(&f->fd_mu);
            f->fd[w->src] = fd;
            f->link[w->src] = link;
            if (pwait_result(&f->w)) shutdown(fd, SHUT_RDWR);
            pthread_mutex_unlock(&f->fd_mu);
            net_set_timeouts(f->fd[w->src], f->c->timeout_ms);
        }
        if (exchange(w, req, rl, ip, &answered) == 0) w->failed = 0;
        else close_conn(f, w->src);
        if (answered || !kept) break; /* a fresh connection's failure, or one mid-answer, is the source's */
    }
    if (w->failed && !comm_cancelled(f->c))
        PLOG_WARN(f->c->log_name, "shared-state source %s broke off; its remaining ranges go to the other sources",
                  ip);
    free(req);
    pthread_mutex_lock(&f->c->mu);
    f->finished++;
    pthread_cond_broadcast(f->watch.cv);
    pthread_mutex_unlock(&f->c->mu);
    return NULL;
}

/* Moves the unreceived bytes of every job of a dead source to the live holders of its tensor, split
 * evenly; what the dead source delivered stays. @return 0, -PERR_FAILED when a tensor has no live holder
 * left, or -PERR_NOMEM. */
static int reassign(fetch_ctx_t *f) {
    size_t n0 = f->njobs;
    for (size_t i = 0; i < n0; i++) {
        job_t j = f->jobs[i];
        if (j.got == j.len || !(f->dead >> j.src & 1)) continue;
        uint32_t alive = f->plan->u.ss_plan.holders[j.t] & ~f->dead;
        if (!alive) {
            PLOG_ERROR(f->c->log_name, "no shared-state source left for '%s'", f->tens[j.t]->name);
            return -PERR_FAILED;
        }
        f->jobs[i].len = j.got;
        uint64_t from = j.off + j.got, left = j.len - j.got, piece = left / (uint64_t)__builtin_popcount(alive);
        for (int s = 0; s < WIRE_MAX_SS_SOURCES && left; s++) {
            if (!(alive >> s & 1)) continue;
            uint64_t len = (alive >> s) == 1 ? left : piece; /* the last holder takes the rest */
            if (!len) continue;
            if (push_job(f, (job_t){.t = j.t, .src = (uint8_t)s, .off = from, .len = len}) != 0)
                return -PERR_NOMEM;
            from += len;
            left -= len;
        }
    }
    return 0;
}

/* Sleeps until nw workers of the round finished. A leave or destroy (watch ends for good) ends the fetch's
 * transfers; a lost master connection (watch ends for its epoch) does not: the fetch goes on and watches
 * again. */
static void wait_workers(fetch_ctx_t *f, int nw) {
    pcclComm_t *c = f->c;
    pthread_mutex_lock(&c->mu);
    while (f->finished < nw) {
        if (!pwait_result(&f->watch) || pwait_result(&f->w)) {
            pwait_cond_sleep(f->watch.cv, &c->mu, 0);
        } else if (ss_watch_again_locked(c, &f->watch) != 0) {
            pthread_mutex_unlock(&c->mu);
            cancel_fetch(f);
            pthread_mutex_lock(&c->mu);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* Receives the fetch entries up to b (those after the previous stage's) into buf from every source at once.
 * Each round either completes every job or loses at least one source, so there are at most nsrc + 1 rounds.
 * *rx: bytes received. @return 0, -PERR_CANCELLED (a leave or destroy), or reassign's code. */
static int stage_transfer(fetch_ctx_t *f, uint32_t b, uint8_t *buf, uint64_t *rx) {
    const __typeof__(f->plan->u.ss_plan) *p = &f->plan->u.ss_plan;
    f->njobs = 0;
    for (; f->next_range < p->nranges && p->ranges[f->next_range].tensor < b; f->next_range++) {
        const wire_ss_range_t *r = &p->ranges[f->next_range];
        if (push_job(f, (job_t){.t = r->tensor, .src = r->source, .off = r->offset, .len = r->length}) != 0)
            return -PERR_NOMEM;
    }
    int rc = -PERR_CANCELLED;
    size_t *idx = NULL;
    for (int round = 0; round <= p->nsrc && !comm_cancelled(f->c); round++) {
        if ((rc = reassign(f)) != 0) break;
        rc = -PERR_NOMEM;
        free(idx);
        idx = malloc((f->njobs ? f->njobs : 1) * sizeof *idx);
        if (!idx) break;
        rc = -PERR_FAILED; /* the last round left jobs undone */
        worker_t w[WIRE_MAX_SS_SOURCES];
        int nw = 0;
        f->finished = 0;
        size_t used = 0;
        for (int s = 0; s < p->nsrc; s++) {
            worker_t *x = &w[nw];
            *x = (worker_t){.f = f, .src = s, .buf = buf, .idx = idx + used};
            for (size_t i = 0; i < f->njobs; i++)
                if (f->jobs[i].src == s && f->jobs[i].got < f->jobs[i].len) x->idx[x->nidx++] = i;
            if (!x->nidx) continue;
            used += x->nidx;
            if (pthread_create(&x->th, NULL, worker_main, x) != 0) {
                f->dead |= 1u << s; /* its jobs move on in the next round */
                continue;
            }
            nw++;
        }
        if (!used) {
            rc = 0;
            break;
        }
        wait_workers(f, nw);
        for (int i = 0; i < nw; i++) {
            pthread_join(w[i].th, NULL);
            if (w[i].failed) f->dead |= 1u << w[i].src;
        }
    }
    free(idx);
    for (size_t i = 0; i < f->njobs; i++) *rx += f->jobs[i].got;
    return rc != 0 && comm_cancelled(f->c) ? -PERR_CANCELLED : rc;
}

/* Hashes each staged tensor of [a, b) and lands it only if the hash is the announced one. */
static void *verify_main(void *arg) {
    verifier_t *v = arg;
    fetch_ctx_t *f = v->f;
    for (uint32_t t = v->a; t < v->b && !v->failed; t++) {
        const pcclTensorInfo_t *ti = f->tens[t];
        const uint8_t *bytes = v->buf + f->at[t];
        uint64_t h = pccl_simplehash(bytes, f->size[t]); /* equal to the CUDA hash of the same bytes */
        uint64_t want = f->plan->u.ss_plan.fetch[t].hash;
        if (h != want) {
            PLOG_ERROR(f->c->log_name, "received '%s' hashes to %016llx, the master announced %016llx; the tensor "
                       "keeps its bytes", ti->name, (unsigned long long)h, (unsigned long long)want);
            v->failed = 1;
        } else if (ss_land(ti, bytes) != 0) {
            PLOG_ERROR(f->c->log_name, "cannot copy the received '%s' into its tensor", ti->name);
            v->failed = 1;
        }
    }
    return NULL;
}

/* The plan must name a tensor of st for every entry, and its ranges must cover each entry in order,
 * from offset 0 to its size, without gap or overlap. @return 0, or -PERR_PROTOCOL (logged). */
static int check_plan(fetch_ctx_t *f, const pcclSharedState_t *st) {
    const __typeof__(f->plan->u.ss_plan) *p = &f->plan->u.ss_plan;
    for (uint32_t t = 0; t < p->n; t++) {
        f->tens[t] = ss_find_tensor(st, p->fetch[t].key);
        if (!f->tens[t]) {
            PLOG_ERROR(f->c->log_name, "the shared-state plan names '%s', which this peer does not have",
                       p->fetch[t].key);
            return -PERR_PROTOCOL;
        }
        f->size[t] = ss_tensor_bytes(f->tens[t]);
    }
    uint32_t r = 0;
    for (uint32_t t = 0; t < p->n; t++) {
        uint64_t at = 0;
        for (; r < p->nranges && p->ranges[r].tensor == t; r++) {
            if (p->ranges[r].offset != at || p->ranges[r].length > f->size[t] - at) break;
            at += p->ranges[r].length;
        }
        if (at != f->size[t]) {
            PLOG_ERROR(f->c->log_name, "the shared-state plan's ranges do not cover '%s' exactly", p->fetch[t].key);
            return -PERR_PROTOCOL;
        }
    }
    if (r != p->nranges) {
        PLOG_ERROR(f->c->log_name, "the shared-state plan's ranges are out of order");
        return -PERR_PROTOCOL;
    }
    return 0;
}

int ss_fetch(pcclComm_t *c, pcclSharedState_t *st, const wire_msg_t *plan, uint64_t *rx) {
    const __typeof__(plan->u.ss_plan) *p = &plan->u.ss_plan;
    fetch_ctx_t f = {.c = c, .plan = plan};
    for (int i = 0; i < WIRE_MAX_SS_SOURCES; i++) f.fd[i] = -1;
    pthread_mutex_init(&f.fd_mu, NULL);
    if (pwait_init(&f.w, &f.fd_mu, NULL, 1) != 0) {
        pthread_mutex_destroy(&f.fd_mu);
        return -PERR_FAILED;
    }
    if (watch_open(c, &f.watch) != 0) {
        pwait_destroy(&f.w);
        pthread_mutex_destroy(&f.fd_mu);
        return -PERR_FAILED;
    }
    f.tens = calloc(p->n, sizeof *f.tens);
    f.size = calloc(p->n, sizeof *f.size);
    f.at = calloc(p->n, sizeof *f.at);
    uint8_t *buf[2] = {NULL, NULL};
    int rc = -PERR_NOMEM;
    if (!f.tens || !f.size || !f.at || (rc = check_plan(&f, st)) != 0) goto out;
    uint64_t total = 0, largest = 0;
    for (uint32_t t = 0; t < p->n; t++) {
        total += f.size[t];
        if (f.size[t] > largest) largest = f.size[t];
    }
    /* A stage is a sixteenth of the fetch within [SS_STAGE_MIN, SS_STAGE_MAX]: a small fetch is one
     * stage. Two buffers overlap landing with receiving; a tensor larger than a stage gets one buffer
     * of its size. So the fetch costs at most max(largest tensor, 2 * SS_STAGE_MAX) on top of the state,
     * and at most an eighth of it once it is over 16 * SS_STAGE_MIN. */
    uint64_t stage = total / 16 < SS_STAGE_MIN ? SS_STAGE_MIN : total / 16 > SS_STAGE_MAX ? SS_STAGE_MAX : total / 16;
    if (stage >= total) stage = total;
    int nbuf = largest <= stage && stage < total ? 2 : 1;
    size_t cap = (size_t)(largest > stage ? largest : stage);
    if (!cap) cap = 1;
    for (int i = 0; i < nbuf; i++)
        if (!(buf[i] = malloc(cap))) {
            PLOG_ERROR(c->log_name, "cannot allocate %zu bytes to receive shared state into", cap);
            rc = -PERR_NOMEM;
            goto out;
        }
    verifier_t v = {.f = &f};
    int vrun = 0, failed = 0;
    rc = 0;
    for (uint32_t a = 0, s = 0; a < p->n && !failed; s++) {
        uint32_t b = a;
        uint64_t used = 0;
        while (b < p->n && (b == a || used + f.size[b] <= cap)) {
            f.at[b] = used;
            used += f.size[b++];
        }
        uint8_t *into = buf[s % (uint32_t)nbuf];
        if (vrun && nbuf == 1) {
            pthread_join(v.th, NULL);
            vrun = 0;
            failed |= v.failed;
        }
        if (!failed && (rc = stage_transfer(&f, b, into, rx)) != 0) failed = 1;
        if (vrun) {
            pthread_join(v.th, NULL);
            vrun = 0;
            failed |= v.failed;
        }
        if (failed) break;
        v = (verifier_t){.f = &f, .a = a, .b = b, .buf = into};
        if (pthread_create(&v.th, NULL, verify_main, &v) == 0) vrun = 1;
        else verify_main(&v);
        failed |= !vrun && v.failed;
        a = b;
    }
    if (vrun) {
        pthread_join(v.th, NULL);
        failed |= v.failed;
    }
    if (failed && rc == 0) rc = -PERR_FAILED; /* a tensor that did not verify or land (logged) */
out:
    for (int i = 0; i < WIRE_MAX_SS_SOURCES; i++) close_conn(&f, i);
    comm_wait_close(c, &f.watch);
    pwait_destroy(&f.w);
    pthread_mutex_destroy(&f.fd_mu);
    free(buf[0]);
    free(buf[1]);
    free(f.jobs);
    free(f.tens);
    free(f.size);
    free(f.at);
    return rc;
}
