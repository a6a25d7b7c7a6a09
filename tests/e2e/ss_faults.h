/*
 * ss_faults.h - the faulty shared-state sources of ss_peer.c, made from the
 * real library without hooks in it:
 *  - a liar: a thread changes one byte of a tensor after the sync hashed it,
 *    so the bytes this peer serves no longer match the hash it announced;
 *  - a dying source: a watchdog SIGKILLs the process once its TCP sockets
 *    have had a given number of bytes acknowledged in all, i.e. in the middle
 *    of serving more than that.
 */
#ifndef PCCL_E2E_SS_FAULTS_H
#define PCCL_E2E_SS_FAULTS_H

#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
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

static atomic_int watchdog_armed;

/* Bytes acknowledged by the peers of this process's TCP sockets, summed over every socket seen since
 * the watchdog started: a source serves each stage of a fetch on a new connection. A socket is known
 * by its inode (fd numbers are reused); one closed between two polls counts with its last value. */
typedef struct {
    unsigned long long ino;
    uint64_t acked;
} seen_sock_t;
static seen_sock_t seen_socks[4096];
static int nseen_socks;

static uint64_t total_bytes_acked(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        struct tcp_info ti;
        socklen_t len = sizeof ti;
        char link[64];
        unsigned long long ino;
        /* the inode from the link's text "socket:[N]" (no call on the fd, which another thread owns);
         * non-sockets and non-TCP sockets fail; an fd closed meanwhile too */
        ssize_t ll = e->d_name[0] == '.' ? -1 : readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
        if (ll <= 0) continue;
        link[ll] = 0;
        if (sscanf(link, "socket:[%llu]", &ino) != 1 ||
            getsockopt(atoi(e->d_name), IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
            len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked)
            continue;
        int k = 0;
        while (k < nseen_socks && seen_socks[k].ino != ino) k++;
        if (k == nseen_socks) {
            if (nseen_socks == (int)(sizeof seen_socks / sizeof seen_socks[0])) continue;
            seen_socks[nseen_socks++] = (seen_sock_t){.ino = ino};
        }
        if (ti.tcpi_bytes_acked > seen_socks[k].acked) seen_socks[k].acked = ti.tcpi_bytes_acked;
    }
    closedir(d);
    uint64_t sum = 0;
    for (int k = 0; k < nseen_socks; k++) sum += seen_socks[k].acked;
    return sum;
}

static void *watchdog_main(void *arg) {
    uint64_t limit = *(uint64_t *)arg;
    /* Bounded: a source that never serves is disarmed when its sync returns, at the latest here. */
    for (int i = 0; i < 300000 && atomic_load(&watchdog_armed); i++) {
        if (total_bytes_acked() >= limit) kill(getpid(), SIGKILL);
        sleep_ms(1);
    }
    return NULL;
}

/* Until watchdog_disarm: SIGKILL this process once its TCP sockets had *limit bytes acknowledged. */
static int watchdog_start(pthread_t *th, uint64_t *limit) {
    atomic_store(&watchdog_armed, 1);
    return pthread_create(th, NULL, watchdog_main, limit);
}

static void watchdog_disarm(pthread_t th) {
    atomic_store(&watchdog_armed, 0);
    pthread_join(th, NULL);
}

#endif
