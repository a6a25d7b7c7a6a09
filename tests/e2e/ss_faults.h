/*
 * ss_faults.h - the faulty shared-state sources of ss_peer.c, made from the
 * real library without hooks in it:
 *  - a liar: a thread changes one byte of a tensor after the sync hashed it,
 *    so the bytes this peer serves no longer match the hash it announced;
 *  - a dying source: the process SIGKILLs itself once its send() calls have
 *    passed a given number of bytes to the kernel, i.e. in the middle of
 *    serving more than that.
 */
#ifndef PCCL_E2E_SS_FAULTS_H
#define PCCL_E2E_SS_FAULTS_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "pccl.h"

static void sleep_ms(long ms) { nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}, NULL); }

typedef struct {
    const pcclComm_t *comm;
    uint8_t *byte;
    long delay_ms;
    pthread_t th;
} liar_t;

static void *liar_main(void *arg) {
    liar_t *l = arg;
    sleep_ms(l->delay_ms);
    /* pcclGetAttribute takes the communicator's lock, which the sync took after hashing and the
     * p2p server takes before it reads the tensor: the write is ordered between the two (also
     * for ThreadSanitizer), the delay puts it after the hash in time. */
    int ws;
    pcclGetAttribute(l->comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &ws);
    *l->byte ^= 0xA5;
    pcclGetAttribute(l->comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &ws);
    return NULL;
}

/* Flips *byte delay_ms from now; liar_end waits for that and flips it back (the honest content). */
static int liar_start(liar_t *l, const pcclComm_t *comm, uint8_t *byte, long delay_ms) {
    *l = (liar_t){.comm = comm, .byte = byte, .delay_ms = delay_ms};
    return pthread_create(&l->th, NULL, liar_main, l);
}

static void liar_end(liar_t *l) {
    pthread_join(l->th, NULL);
    *l->byte ^= 0xA5;
}

/* ss_peer links with -Wl,--wrap=send (tests/CMakeLists.txt): every send() of the process, the
 * library's own included, passes here, so the count is exact whatever the connections. */
ssize_t __real_send(int fd, const void *buf, size_t len, int flags);
ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags);
static atomic_uint_fast64_t die_sent, die_limit; /* limit 0: disarmed */

ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags) {
    ssize_t n = __real_send(fd, buf, len, flags);
    uint64_t limit = atomic_load(&die_limit);
    if (n > 0 && limit && atomic_fetch_add(&die_sent, (uint64_t)n) + (uint64_t)n >= limit) kill(getpid(), SIGKILL);
    return n;
}

/* Until die_disarm: SIGKILL this process once it has sent limit bytes (the sends' return values). */
static void die_arm(uint64_t limit) {
    atomic_store(&die_sent, 0);
    atomic_store(&die_limit, limit);
}

static void die_disarm(void) { atomic_store(&die_limit, 0); }

#endif
