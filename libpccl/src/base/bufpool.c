/* bufpool.c - see bufpool.h. */
#include "base/bufpool.h"

#include <stdlib.h>
#include <time.h>

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void bufpool_init(bufpool_t *p) {
    pthread_mutex_init(&p->mu, NULL);
    for (int i = 0; i < BUFPOOL_SLOTS; i++) p->buf[i] = NULL, p->size[i] = 0;
    p->total = 0;
    p->peak = 0;
    p->out = 0;
}

static size_t cap_bytes(const bufpool_t *p) {
    return p->peak > BUFPOOL_MAX_BYTES / 2 ? 2 * p->peak : BUFPOOL_MAX_BYTES;
}

void bufpool_destroy(bufpool_t *p) {
    for (int i = 0; i < BUFPOOL_SLOTS; i++) free(p->buf[i]);
    pthread_mutex_destroy(&p->mu);
}

void *bufpool_get(bufpool_t *p, size_t size, size_t *cap) {
    pthread_mutex_lock(&p->mu);
    if (size > p->peak) p->peak = size;
    p->out++;
    int best = -1;
    for (int i = 0; i < BUFPOOL_SLOTS; i++)
        if (p->buf[i] && p->size[i] >= size && (best < 0 || p->size[i] < p->size[best])) best = i;
    if (best >= 0) {
        void *b = p->buf[best];
        *cap = p->size[best];
        p->total -= p->size[best];
        p->buf[best] = NULL;
        p->size[best] = 0;
        pthread_mutex_unlock(&p->mu);
        return b;
    }
    pthread_mutex_unlock(&p->mu);
    *cap = size;
    return malloc(size ? size : 1);
}

void bufpool_put(bufpool_t *p, void *buf, size_t cap) {
    if (!buf) return;
    pthread_mutex_lock(&p->mu);
    p->out--;
    if (p->total + cap <= cap_bytes(p))
        for (int i = 0; i < BUFPOOL_SLOTS; i++)
            if (!p->buf[i]) {
                p->buf[i] = buf;
                p->size[i] = cap;
                p->used_ms[i] = now_ms();
                p->total += cap;
                pthread_mutex_unlock(&p->mu);
                return;
            }
    /* Full: drop the smallest cached buffer if the new one is larger, else free the new one. */
    int small = 0;
    for (int i = 1; i < BUFPOOL_SLOTS; i++)
        if (p->size[i] < p->size[small]) small = i;
    if (p->buf[small] && p->size[small] < cap && p->total - p->size[small] + cap <= cap_bytes(p)) {
        void *old = p->buf[small];
        p->total = p->total - p->size[small] + cap;
        p->buf[small] = buf;
        p->size[small] = cap;
        p->used_ms[small] = now_ms();
        pthread_mutex_unlock(&p->mu);
        free(old);
        return;
    }
    pthread_mutex_unlock(&p->mu);
    free(buf);
}

void bufpool_trim(bufpool_t *p, uint64_t idle_ms) {
    void *drop[BUFPOOL_SLOTS];
    int n = 0;
    uint64_t now = now_ms();
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < BUFPOOL_SLOTS; i++)
        if (p->buf[i] && now - p->used_ms[i] >= idle_ms) {
            drop[n++] = p->buf[i];
            p->total -= p->size[i];
            p->buf[i] = NULL;
            p->size[i] = 0;
        }
    /* Idle and empty: a later run of small tensors gets the small bound back. */
    if (p->total == 0 && p->out == 0) p->peak = 0;
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < n; i++) free(drop[i]); /* unmapping a large buffer is slow: not under the lock */
}
