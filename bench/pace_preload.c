/*
 * pace_preload.c - LD_PRELOAD shim for bench/ss_join.sh: every TCP connection the process accepts
 * sends at most PCCL_BENCH_PACE_MBIT Mbit/s (SO_MAX_PACING_RATE; the kernel paces TCP itself when
 * no fq qdisc is installed). A shared-state source serves each receiver on connections it
 * accepted, so this makes the source's link to the receiver a rate-limited one, on kernels that
 * have neither sch_netem nor sch_tbf and without a userspace forwarder's CPU cost. Benchmark
 * only: nothing of it is linked into pccl.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/socket.h>

static void pace(int fd) {
    const char *v = getenv("PCCL_BENCH_PACE_MBIT");
    double mbit = v ? atof(v) : 0;
    if (fd < 0 || mbit <= 0) return;
    unsigned long long bps = (unsigned long long)(mbit * 1e6 / 8);
    unsigned int rate = bps > 0xffffffffull ? 0xffffffffu : (unsigned int)bps;
    setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof rate);
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
    static int (*real)(int, struct sockaddr *, socklen_t *, int);
    if (!real) real = (int (*)(int, struct sockaddr *, socklen_t *, int))dlsym(RTLD_NEXT, "accept4");
    int c = real(fd, addr, len, flags);
    pace(c);
    return c;
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
    static int (*real)(int, struct sockaddr *, socklen_t *);
    if (!real) real = (int (*)(int, struct sockaddr *, socklen_t *))dlsym(RTLD_NEXT, "accept");
    int c = real(fd, addr, len);
    pace(c);
    return c;
}
