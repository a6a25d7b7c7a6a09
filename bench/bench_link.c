/* bench_link.c - see bench_link.h. Plain TCP, no pccl: the floor a broadcast over the same link is held to. */
#include "bench_link.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_peer.h"

#define LINK_MAX_STREAMS 64
#define LINK_CHUNK (1u << 20)

static void *sink_conn(void *p) {
    int fd = (int)(intptr_t)p;
    static char buf[LINK_CHUNK]; /* contents are discarded: one buffer serves every connection */
    while (read(fd, buf, sizeof buf) > 0) {
    }
    char ack = 1;
    if (write(fd, &ack, 1) != 1) perror("sink: write");
    close(fd);
    return NULL;
}

static int link_sink(const char *ip) {
    struct sockaddr_in a = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t len = sizeof a;
    if (fd < 0 || inet_pton(AF_INET, ip, &a.sin_addr) != 1 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
        listen(fd, LINK_MAX_STREAMS) || getsockname(fd, (struct sockaddr *)&a, &len)) {
        perror("sink");
        return 1;
    }
    printf("PORT %u\n", (unsigned)ntohs(a.sin_port));
    fflush(stdout);
    for (;;) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        pthread_t th;
        if (pthread_create(&th, NULL, sink_conn, (void *)(intptr_t)c) == 0) pthread_detach(th);
        else close(c);
    }
}

struct stream {
    struct sockaddr_in to;
    size_t bytes;
    const char *data;
    int rc;
};

static void *send_stream(void *p) {
    struct stream *s = p;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    s->rc = -1;
    if (fd < 0 || connect(fd, (struct sockaddr *)&s->to, sizeof s->to)) goto out;
    for (size_t sent = 0; sent < s->bytes;) {
        size_t n = s->bytes - sent < LINK_CHUNK ? s->bytes - sent : LINK_CHUNK;
        ssize_t w = write(fd, s->data, n);
        if (w <= 0) goto out;
        sent += (size_t)w;
    }
    char ack;
    if (shutdown(fd, SHUT_WR) == 0 && read(fd, &ack, 1) == 1) s->rc = 0;
out:
    if (fd >= 0) close(fd);
    return NULL;
}

static int link_send(char **argv) {
    struct stream st[LINK_MAX_STREAMS];
    pthread_t th[LINK_MAX_STREAMS];
    int streams = atoi(argv[4]), reps = atoi(argv[6]);
    size_t bytes = (size_t)strtoull(argv[5], NULL, 10);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
    if (inet_pton(AF_INET, argv[2], &to.sin_addr) != 1 || streams < 1 || streams > LINK_MAX_STREAMS || reps < 1 ||
        bytes < (size_t)streams)
        return 2;
    char *data = calloc(1, LINK_CHUNK);
    double *t = calloc((size_t)reps, sizeof *t);
    if (!data || !t) return 1;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        for (int i = 0; i < streams; i++) {
            st[i] = (struct stream){.to = to, .data = data, .bytes = bytes / (size_t)streams +
                                                                      (i < (int)(bytes % (size_t)streams))};
            if (pthread_create(&th[i], NULL, send_stream, &st[i])) return 1;
        }
        int failed = 0;
        for (int i = 0; i < streams; i++) {
            pthread_join(th[i], NULL);
            failed |= st[i].rc;
        }
        if (failed) {
            fprintf(stderr, "send: a stream failed\n");
            return 1;
        }
        t[r] = bench_now_s() - t0;
    }
    printf("TIMES 0");
    for (int r = 0; r < reps; r++) printf(" %.6f", t[r]);
    printf("\n");
    free(data);
    free(t);
    return 0;
}

int link_main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "sink") == 0) return link_sink(argv[2]);
    if (argc == 7 && strcmp(argv[1], "send") == 0) return link_send(argv);
    fprintf(stderr, "usage: pccl_coll sink IP | pccl_coll send IP PORT STREAMS BYTES REPS\n");
    return 2;
}
