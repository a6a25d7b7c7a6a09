/* op_pool.c - launching and finishing operations of every kind: registration, the worker pool of async
 * operations, await (op_record.h). */
#include "op/op_record.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* A pool worker: runs queued async ops until the communicator stops it. Parked workers cost
 * nothing; keeping them saves a thread creation and join per operation. */
static void *worker_main(void *arg) {
    pcclComm_t *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->work_head && !c->workers_stop) {
            c->workers_idle++;
            pthread_cond_wait(&c->work_cv, &c->mu);
            c->workers_idle--;
        }
        pccl_op_t *o = c->work_head;
        if (!o) break; /* stopping, nothing queued */
        c->work_head = o->next_work;
        if (!c->work_head) c->work_tail = NULL;
        c->work_queued--;
        pthread_mutex_unlock(&c->mu);
        op_run(o);
        pthread_mutex_lock(&c->mu);
        o->finished = 1; /* the awaiter may free o as soon as mu is released */
        pthread_cond_broadcast(o->w.cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Queues o for a worker, starting one if every parked worker is already spoken for.
 * Caller holds mu. 0, or -PERR_NOMEM / -PERR_FAILED if no thread could be started (o is not queued then). */
static int enqueue_locked(pcclComm_t *c, pccl_op_t *o) {
    if (c->workers_idle <= c->work_queued) {
        /* Every op waiting for a COMMENCE needs its own thread (ops beyond the pool wait at the
         * master), so the pool grows to the largest number of ops in flight at once. */
        if (c->nworkers == c->workers_cap) {
            uint32_t cap = c->workers_cap ? 2 * c->workers_cap : 4;
            pthread_t *w = realloc(c->workers, cap * sizeof *w);
            if (!w) return -PERR_NOMEM;
            c->workers = w;
            c->workers_cap = cap;
        }
        if (pthread_create(&c->workers[c->nworkers], NULL, worker_main, c) != 0) return -PERR_FAILED;
        c->nworkers++;
    }
    o->next_work = NULL;
    if (c->work_tail) c->work_tail->next_work = o;
    else c->work_head = o;
    c->work_tail = o;
    c->work_queued++;
    return 0; /* the caller signals work_cv after unlocking: a woken worker does not block on mu */
}

/* Registers o (caller holds mu): 0, or why not (o is then neither registered nor queued). */
static int register_locked(pcclComm_t *c, pccl_op_t *o) {
    /* Alone as of the last topology: fail at launch, as PCCL 1.0 does, rather than at the await. */
    if (c->world.group_world_size < 2) return -PERR_TOO_FEW_PEERS;
    if (op_find_locked(c, o->tag)) {
        PLOG_ERROR(c->log_name, "%s tag %llu: the tag already has an operation in flight", o->kind->name,
                   (unsigned long long)o->tag);
        return -PERR_BUSY;
    }
    if (o->is_async) {
        if (c->workers_stop) return -PERR_FAILED;
        int rc = enqueue_locked(c, o);
        if (rc != 0) return rc;
    }
    o->next = c->ops;
    c->ops = o;
    return 0;
}

int op_validate(const pcclExtCollDescriptor_t *d, pcclExtCollDescriptor_t *out) {
    const op_kind_t *kind = op_kind_of((int)d->kind);
    if (!kind) {
        PLOG_ERROR("pccl", "collective tag %llu: unknown kind %d", (unsigned long long)d->tag, (int)d->kind);
        return -PERR_INVALID;
    }
    *out = *d;
    if (!out->sendbuf) out->sendbuf = out->recvbuf;
    return kind->validate(out);
}

int op_launch(pcclComm_t *c, const pcclExtCollDescriptor_t *d, int is_async, pccl_op_t **out) {
    pcclExtCollDescriptor_t nd;
    int rc = op_validate(d, &nd);
    if (rc != 0) return rc;
    const op_kind_t *kind = op_kind_of((int)nd.kind);
    pccl_op_t *o = op_get(c);
    if (!o) return -PERR_NOMEM;
    o->comm = c;
    o->tag = d->tag;
    o->d = nd;
    o->kind = kind;
    o->is_async = is_async;
    pthread_mutex_lock(&c->mu);
    rc = register_locked(c, o);
    pthread_mutex_unlock(&c->mu);
    if (rc != 0) {
        op_put(c, o);
        return rc;
    }
    if (is_async) pthread_cond_signal(&c->work_cv);
    *out = o;
    return 0;
}

/* Takes o out of the work queue if no worker has picked it up yet (caller holds mu). */
static int unqueue_locked(pcclComm_t *c, pccl_op_t *o) {
    pccl_op_t *prev = NULL;
    for (pccl_op_t *q = c->work_head; q; prev = q, q = q->next_work)
        if (q == o) {
            if (prev) prev->next_work = o->next_work;
            else c->work_head = o->next_work;
            if (c->work_tail == o) c->work_tail = prev;
            c->work_queued--;
            return 1;
        }
    return 0;
}

int op_finish(pcclComm_t *c, pccl_op_t *o, pcclExtCollInfo_t *info) {
    pthread_mutex_lock(&c->mu);
    if (o->is_async && unqueue_locked(c, o)) {
        /* Awaited before a worker woke up for it: run it here rather than wait for two hand-offs. */
        pthread_mutex_unlock(&c->mu);
        op_run(o);
        pthread_mutex_lock(&c->mu);
        o->finished = 1;
    }
    while (o->is_async && !o->finished) pwait_cond_sleep(o->w.cv, &c->mu, 0);
    op_unlink_locked(c, o);
    pthread_mutex_unlock(&c->mu);
    int rc = o->rc;
    if (info) *info = o->info;
    op_put(c, o);
    return rc;
}

int op_await(pcclComm_t *c, uint64_t tag, pcclExtCollInfo_t *info) {
    pthread_mutex_lock(&c->mu);
    pccl_op_t *o = op_find_locked(c, tag);
    pthread_mutex_unlock(&c->mu);
    return o && o->is_async ? op_finish(c, o, info) : -PERR_INVALID;
}

void allreduce_join_all(pcclComm_t *c) {
    for (;;) {
        pthread_mutex_lock(&c->mu);
        pccl_op_t *o = c->ops;
        while (o && !o->is_async) o = o->next; /* a blocking op belongs to its caller */
        pthread_mutex_unlock(&c->mu);
        if (!o) break;
        op_finish(c, o, NULL);
    }
    pthread_mutex_lock(&c->mu);
    c->workers_stop = 1;
    pthread_cond_broadcast(&c->work_cv);
    pthread_mutex_unlock(&c->mu);
    for (uint32_t i = 0; i < c->nworkers; i++) pthread_join(c->workers[i], NULL);
    free(c->workers);
    c->workers = NULL;
    c->nworkers = c->workers_cap = 0;
    while (c->op_free) {
        pccl_op_t *o = c->op_free;
        c->op_free = o->next_work;
        op_destroy(o);
    }
    c->nop_free = 0;
    op_grants_clear(c);
}
