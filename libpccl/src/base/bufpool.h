/*
 * bufpool.h - a small caching allocator for per-operation buffers (internal).
 *
 * Every all-reduce needs a staging buffer and a backup of the caller's buffer.
 * Fresh malloc'd memory of that size comes from mmap and is page-faulted in on
 * first touch, which costs more than a small all-reduce itself; the pool keeps
 * released buffers and hands the smallest one that fits back out. Thread-safe.
 *
 * Release policy: the pool is bounded: BUFPOOL_SLOTS buffers and a byte total of
 * BUFPOOL_MAX_BYTES or twice the largest request since the pool was last empty,
 * whichever is larger (so the backup of a tensor above 1 GiB is kept too: a fresh
 * one page-faults the whole buffer on every all-reduce; bench/analysis.md,
 * "The buffer pool's bound");
 * and bufpool_trim frees buffers unused for longer than a given time; the
 * communicator's heartbeat thread calls it every beat with BUFPOOL_IDLE_MS, so
 * a run that stops all-reducing (or switches to smaller tensors) gives the
 * memory back within about 30 s instead of keeping it until destroy.
 */
#ifndef PCCL_BUFPOOL_H
#define PCCL_BUFPOOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define BUFPOOL_SLOTS 16
#define BUFPOOL_MAX_BYTES ((size_t)1 << 30)
#define BUFPOOL_IDLE_MS 30000

typedef struct bufpool {
    pthread_mutex_t mu;
    void *buf[BUFPOOL_SLOTS];
    size_t size[BUFPOOL_SLOTS];
    uint64_t used_ms[BUFPOOL_SLOTS]; /* monotonic time it was returned */
    size_t total;
    size_t peak; /* largest request since the pool was last empty */
    int out;     /* buffers handed out and not yet returned */
} bufpool_t;

void bufpool_init(bufpool_t *p);
void bufpool_destroy(bufpool_t *p);
/* A buffer of at least `size` bytes (NULL when out of memory); *cap receives its real size. */
void *bufpool_get(bufpool_t *p, size_t size, size_t *cap);
/* Returns a buffer of capacity cap obtained from bufpool_get (or frees it if the pool is full). */
void bufpool_put(bufpool_t *p, void *buf, size_t cap);
/* Frees cached buffers that were returned more than idle_ms ago. */
void bufpool_trim(bufpool_t *p, uint64_t idle_ms);

#endif
