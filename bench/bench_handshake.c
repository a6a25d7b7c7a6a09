/*
 * bench_handshake.c - what a keyed run adds to setting up one connection: the
 * time from connect(2) until the dialing side holds a usable connection
 * (p2p_dial: TCP connect, then the hello of an open run or the handshake of a
 * keyed one, and the cipher contexts of an encrypted one), plus one byte
 * answered through it, on 127.0.0.1. Each mode runs N connections one after
 * another against a server thread that greets them as a peer's p2p port does.
 *
 * usage: bench_handshake [N]   (default 200). Prints a markdown table of
 * median and 90th percentile milliseconds per mode, and each mode's median
 * minus the open run's.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/net.h"
#include "p2p/p2p_hello.h"
#include "sec/sec_key.h"
#include "sec/sec_link.h"

typedef struct server {
    int ls, n;
    const sec_cfg_t *sec;
} server_t;

static void *serve(void *p) {
    server_t *s = p;
    static const uint8_t self[16] = {0};
    for (int i = 0; i < s->n; i++) {
        int fd = accept(s->ls, NULL, NULL);
        if (fd < 0) continue;
        net_set_nodelay(fd);
        p2p_intro_t who;
        sec_link_t *l = NULL;
        char err[160];
        uint8_t b = 1;
        if (p2p_greet(fd, s->sec, self, NULL, &who, &l, err, sizeof err) == 0) link_send_all(l, fd, &b, 1);
        else fprintf(stderr, "greet: %s\n", err);
        sec_link_free(l);
        close(fd);
    }
    return NULL;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and 90th percentile of n connection setups under sec (NULL: open); -1 on a failure. */
static int measure(const sec_cfg_t *sec, int n, double *med, double *p90) {
    uint16_t port = 0;
    server_t s = {.ls = net_listen_any(0, &port), .n = n, .sec = sec};
    if (s.ls < 0) return -1;
    pthread_t t;
    pthread_create(&t, NULL, serve, &s);
    double *ms = calloc((size_t)n, sizeof *ms);
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        p2p_intro_t me = {.kind = P2P_KIND_BENCH};
        sec_link_t *l = NULL;
        char err[160];
        uint8_t b;
        double t0 = now_ms();
        const ccoip_socket_address_t to = {.inet = {.protocol = inetIPv4, .ipv4.data = {127, 0, 0, 1}}, .port = port};
        int fd = p2p_dial(&to, sec, &me, NULL, 5000, NULL, &l, err, sizeof err);
        ok = fd >= 0 && link_recv_all(l, fd, &b, 1) == 0;
        ms[i] = now_ms() - t0;
        if (!ok) fprintf(stderr, "dial: %s\n", fd < 0 ? err : "no answer");
        sec_link_free(l);
        if (fd >= 0) close(fd);
    }
    if (!ok) shutdown(s.ls, SHUT_RDWR); /* the server's accept returns */
    pthread_join(t, NULL);
    close(s.ls);
    qsort(ms, (size_t)n, sizeof *ms, cmp);
    *med = ms[n / 2];
    *p90 = ms[n * 9 / 10];
    free(ms);
    return ok ? 0 : -1;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200;
    if (n < 1 || n > 100000) {
        fprintf(stderr, "usage: %s [N]\n", argv[0]);
        return 2;
    }
    static const char key[] = "bench-handshake-key-0123456789abcdef0123456789";
    sec_cfg_t keyed = {0}, enc;
    char err[160];
    if (sec_key_from_bytes(key, sizeof key - 1, &keyed, err, sizeof err) != 0) return 1;
    enc = keyed;
    enc.encrypt = 1;
    struct {
        const char *name, *cipher;
        const sec_cfg_t *sec;
    } modes[] = {{"open", NULL, NULL},
                 {"keyed", NULL, &keyed},
                 {"encrypted, aes-256-gcm", "aes-256-gcm", &enc},
                 {"encrypted, chacha20-poly1305", "chacha20-poly1305", &enc}};
    double open_med = 0;
    printf("| mode | median ms | p90 ms | median - open |\n|---|---|---|---|\n");
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        /* Both ends of this process prefer the cipher: the handshake agrees on it. */
        if (modes[m].cipher) setenv("PCCL_CIPHER", modes[m].cipher, 1);
        double med, p90;
        if (measure(modes[m].sec, n, &med, &p90) != 0) {
            printf("| %s | failed | | |\n", modes[m].name);
            return 1;
        }
        if (m == 0) open_med = med;
        printf("| %s | %.3f | %.3f | %+.3f |\n", modes[m].name, med, p90, med - open_med);
    }
    return 0;
}
