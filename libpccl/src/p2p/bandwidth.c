/* bandwidth.c - see bandwidth.h. */
#include "p2p/bandwidth.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "p2p/p2p_hello.h"

#define BW_CHUNK (128u << 10)
#define BW_MAX_STREAMS 64

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Streams for duration_ms, then half-closes. @return 0, or link_send_all's code. */
static int send_for(sec_link_t *l, int fd, int duration_ms) {
    static const uint8_t zeros[BW_CHUNK];
    uint64_t end = now_ns() + (uint64_t)duration_ms * 1000000u;
    while (now_ns() < end) {
        int rc = link_send_all(l, fd, zeros, sizeof zeros);
        if (rc != 0) return rc;
    }
    shutdown(fd, SHUT_WR);
    return 0;
}

/* Receives until EOF (failing past end_ns unless it is 0); bytes and time between the first and
 * the last byte. @return 0; -PERR_IO (an error, or no byte at all); -PERR_TIMEOUT (still sending past
 * end_ns, or silent past the socket timeout); -PERR_NOMEM. */
static int receive_all(sec_link_t *l, int fd, uint64_t end_ns, uint64_t *bytes, uint64_t *ns) {
    uint8_t *buf = malloc(BW_CHUNK);
    if (!buf) return -PERR_NOMEM;
    uint64_t first = 0, last = 0, total = 0;
    int rc = 0;
    for (;;) {
        ssize_t n = sec_link_recv(l, fd, buf, BW_CHUNK);
        if (n == 0) break;
        if (n < 0) {
            rc = errno == EAGAIN || errno == EWOULDBLOCK ? -PERR_TIMEOUT : -PERR_IO;
            break;
        }
        last = now_ns();
        if (end_ns && last > end_ns) {
            rc = -PERR_TIMEOUT;
            break;
        }
        if (!total) first = last;
        total += (uint64_t)n;
    }
    free(buf);
    if (rc != 0) return rc;
    *bytes = total;
    *ns = last > first ? last - first : 1;
    return total ? 0 : -PERR_IO;
}

void bw_serve_connection(sec_link_t *l, int fd, int timeout_ms, int max_ms, int may_send) {
    uint8_t req[5];
    net_set_timeouts(fd, timeout_ms);
    if (link_recv_all(l, fd, req, sizeof req) != 0) return;
    uint32_t duration = wire_get_u32(req + 1);
    if (duration == 0 || duration > (uint32_t)max_ms || (req[0] == BW_SERVER_SENDS && !may_send)) return;
    if (req[0] == BW_SERVER_SENDS) {
        if (send_for(l, fd, (int)duration) != 0) return;
        /* The client closes once it read everything; a client that does not is cut off at the deadline. */
        uint64_t end = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : BW_MAX_DURATION_MS);
        uint8_t b;
        while (net_wait_until(fd, POLLIN, end, NULL) == 0 && sec_link_recv(l, fd, &b, 1) > 0) {
        }
    } else if (req[0] == BW_CLIENT_SENDS) {
        uint64_t bytes, ns;
        uint64_t end = now_ns() + ((uint64_t)duration + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0)) * 1000000u;
        if (receive_all(l, fd, end, &bytes, &ns) != 0) return;
        uint8_t res[16];
        wire_put_u64(res, bytes);
        wire_put_u64(res + 8, ns);
        link_send_all(l, fd, res, sizeof res);
    }
}

/* One measurement: its streams' connections and the wait that ends them all. The first stream that fails
 * ends w: the others' dials end through its eventfd and their transfers because their connections are shut
 * down (mu keeps a stream's fd from closing under it), since the measurement has failed already. */
typedef struct bw_run {
    pthread_mutex_t mu;
    pwait_t w;
    int fd[BW_MAX_STREAMS]; /* each stream's connection, -1 when none (mu) */
} bw_run_t;

typedef struct stream_arg {
    bw_run_t *run;
    int i; /* this stream's slot in run->fd */
    const ccoip_socket_address_t *to;
    const uint8_t *uuid, *peer_uuid;
    const sec_cfg_t *sec;
    int direction, duration_ms, timeout_ms;
    uint64_t bytes, ns;
} stream_arg_t;

/* Ends the measurement with reason: every stream's connection is shut down and no dial goes on. */
static void run_fail(bw_run_t *r, int reason) {
    pthread_mutex_lock(&r->mu);
    pwait_cancel_locked(&r->w, reason);
    for (int i = 0; i < BW_MAX_STREAMS; i++)
        if (r->fd[i] >= 0) shutdown(r->fd[i], SHUT_RDWR);
    pthread_mutex_unlock(&r->mu);
}

/* The request, then the bytes one way; the server's count when the client sent. @return 0 or a code. */
static int stream_exchange(stream_arg_t *a, sec_link_t *l, int fd) {
    uint8_t req[5];
    req[0] = (uint8_t)a->direction;
    wire_put_u32(req + 1, (uint32_t)a->duration_ms);
    int rc = link_send_all(l, fd, req, sizeof req);
    if (rc != 0) return rc;
    if (a->direction == BW_SERVER_SENDS) return receive_all(l, fd, 0, &a->bytes, &a->ns);
    if ((rc = send_for(l, fd, a->duration_ms)) != 0) return rc;
    uint8_t res[16];
    if ((rc = link_recv_all(l, fd, res, sizeof res)) != 0) return rc;
    a->bytes = wire_get_u64(res);
    a->ns = wire_get_u64(res + 8);
    return a->ns ? 0 : -PERR_PROTOCOL;
}

static void *one_stream(void *p) {
    stream_arg_t *a = p;
    bw_run_t *r = a->run;
    p2p_intro_t me = {.kind = P2P_KIND_BENCH};
    memcpy(me.uuid, a->uuid, 16);
    sec_link_t *l = NULL;
    char err[160];
    net_cancel_t cancel = {.wait = &r->w};
    int fd = p2p_dial(a->to, a->sec, &me, a->peer_uuid, a->timeout_ms, &cancel, &l, err, sizeof err);
    if (fd < 0) {
        pccl_log(PCCL_LOG_WARN, "bandwidth", "probe to port %u: %s", a->to->port, err);
        run_fail(r, fd);
        return NULL;
    }
    pthread_mutex_lock(&r->mu);
    r->fd[a->i] = fd;
    if (pwait_result(&r->w)) shutdown(fd, SHUT_RDWR);
    pthread_mutex_unlock(&r->mu);
    net_set_timeouts(fd, a->duration_ms + a->timeout_ms);
    int rc = stream_exchange(a, l, fd);
    if (rc != 0) run_fail(r, rc);
    pthread_mutex_lock(&r->mu);
    r->fd[a->i] = -1;
    pthread_mutex_unlock(&r->mu);
    sec_link_free(l);
    close(fd);
    return NULL;
}

int bw_measure(const ccoip_socket_address_t *to, const uint8_t uuid[16], const sec_cfg_t *sec,
               const uint8_t peer_uuid[16], int direction, int duration_ms, int streams, int timeout_ms,
               bw_result_t *out) {
    memset(out, 0, sizeof *out);
    if (streams < 1 || streams > BW_MAX_STREAMS || duration_ms <= 0 || duration_ms > BW_MAX_DURATION_MS)
        return -PERR_INVALID;
    bw_run_t run;
    pthread_mutex_init(&run.mu, NULL);
    if (pwait_init(&run.w, &run.mu, NULL, 1) != 0) {
        pthread_mutex_destroy(&run.mu);
        return -PERR_FAILED;
    }
    for (int i = 0; i < BW_MAX_STREAMS; i++) run.fd[i] = -1;
    stream_arg_t args[BW_MAX_STREAMS];
    pthread_t th[BW_MAX_STREAMS];
    int started = 0;
    for (int i = 0; i < streams; i++) {
        args[i] = (stream_arg_t){.run = &run, .i = i, .to = to, .uuid = uuid, .peer_uuid = peer_uuid, .sec = sec,
                                 .direction = direction, .duration_ms = duration_ms, .timeout_ms = timeout_ms};
        if (streams == 1) {
            one_stream(&args[0]);
            started = 1;
        } else if (pthread_create(&th[i], NULL, one_stream, &args[i]) == 0) {
            started++;
        } else {
            run_fail(&run, -PERR_FAILED);
            break;
        }
    }
    if (streams > 1)
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    int rc = pwait_result(&run.w); /* the first failure's code: every failing stream ends the run */
    pwait_destroy(&run.w);
    pthread_mutex_destroy(&run.mu);
    if (rc != 0) return rc;
    for (int i = 0; i < streams; i++) {
        out->bytes += args[i].bytes;
        if (args[i].ns > out->ns) out->ns = args[i].ns;
    }
    /* All bytes over the longest stream's receive window: never overstates a link whose
     * streams did not fully overlap. */
    out->mbps = (double)out->bytes * 8.0 / ((double)out->ns / 1e9) / 1e6;
    return 0;
}
