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

/* The end of a wait for the socket: ms from now (0: BW_MAX_DURATION_MS). */
static uint64_t after_ms(int ms) { return net_now_ms() + (uint64_t)(ms > 0 ? ms : BW_MAX_DURATION_MS); }

/* Streams for duration_ms, then half-closes; a socket that takes nothing for silence_ms fails it. @return 0, or
 * link_send_until's code. */
static int send_for(sec_link_t *l, int fd, int duration_ms, int silence_ms, const net_cancel_t *cancel) {
    static const uint8_t zeros[BW_CHUNK];
    uint64_t end = now_ns() + (uint64_t)duration_ms * 1000000u;
    while (now_ns() < end) {
        int rc = link_send_until(l, fd, zeros, sizeof zeros, after_ms(silence_ms), cancel);
        if (rc != 0) return rc;
    }
    shutdown(fd, SHUT_WR);
    return 0;
}

/* Receives until EOF (failing past end_ns unless it is 0); bytes and time between the first and the last byte.
 * @return 0; -PERR_IO (an error, or no byte at all); -PERR_TIMEOUT (still sending past end_ns, or silent for
 * silence_ms); -PERR_CANCELLED; -PERR_NOMEM; link_recv_until's other codes. */
static int receive_all(sec_link_t *l, int fd, uint64_t end_ns, int silence_ms, const net_cancel_t *cancel,
                       uint64_t *bytes, uint64_t *ns) {
    uint8_t *buf = malloc(BW_CHUNK);
    if (!buf) return -PERR_NOMEM;
    uint64_t first = 0, last = 0, total = 0;
    int rc = 0;
    for (;;) {
        ssize_t n = link_recv_until(l, fd, buf, BW_CHUNK, after_ms(silence_ms), cancel);
        if (n == 0) break;
        if (n < 0) {
            rc = (int)n;
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

void bw_serve_connection(sec_link_t *l, int fd, int timeout_ms, int max_ms, int may_send, const pwait_t *w) {
    net_cancel_t cancel = {.wait = w};
    uint8_t req[5];
    net_set_nonblock(fd, 1);
    if (link_recv_all_until(l, fd, req, sizeof req, after_ms(timeout_ms), &cancel) != 0) return;
    uint32_t duration = wire_get_u32(req + 1);
    if (duration == 0 || duration > (uint32_t)max_ms || (req[0] == BW_SERVER_SENDS && !may_send)) return;
    if (req[0] == BW_SERVER_SENDS) {
        if (send_for(l, fd, (int)duration, timeout_ms, &cancel) != 0) return;
        /* The client closes once it read everything; a client that does not is cut off at the deadline. */
        uint64_t end = after_ms(timeout_ms);
        uint8_t b;
        while (net_now_ms() < end && link_recv_until(l, fd, &b, 1, end, &cancel) > 0) {
        }
    } else if (req[0] == BW_CLIENT_SENDS) {
        uint64_t bytes, ns;
        uint64_t end = now_ns() + ((uint64_t)duration + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0)) * 1000000u;
        if (receive_all(l, fd, end, timeout_ms, &cancel, &bytes, &ns) != 0) return;
        uint8_t res[16];
        wire_put_u64(res, bytes);
        wire_put_u64(res + 8, ns);
        link_send_until(l, fd, res, sizeof res, after_ms(timeout_ms), &cancel);
    }
}

typedef struct stream_arg {
    pwait_t *w; /* the measurement's: the first stream that fails ends it, which ends the others */
    const ccoip_socket_address_t *to;
    const uint8_t *uuid, *peer_uuid;
    const sec_cfg_t *sec;
    bw_dial_fn dial; /* NULL: p2p_dial to `to` */
    void *dial_ctx;
    int direction, duration_ms, timeout_ms;
    uint64_t bytes, ns;
} stream_arg_t;

/* The request, then the bytes one way; the server's count when the client sent. @return 0 or a code. */
static int stream_exchange(stream_arg_t *a, sec_link_t *l, int fd, const net_cancel_t *cancel) {
    uint8_t req[5];
    req[0] = (uint8_t)a->direction;
    wire_put_u32(req + 1, (uint32_t)a->duration_ms);
    /* The server may be busy sending or counting for the whole duration before it answers. */
    int silence = a->duration_ms + a->timeout_ms;
    int rc = link_send_until(l, fd, req, sizeof req, after_ms(silence), cancel);
    if (rc != 0) return rc;
    if (a->direction == BW_SERVER_SENDS) return receive_all(l, fd, 0, silence, cancel, &a->bytes, &a->ns);
    if ((rc = send_for(l, fd, a->duration_ms, silence, cancel)) != 0) return rc;
    uint8_t res[16];
    if ((rc = link_recv_all_until(l, fd, res, sizeof res, after_ms(silence), cancel)) != 0) return rc;
    a->bytes = wire_get_u64(res);
    a->ns = wire_get_u64(res + 8);
    return a->ns ? 0 : -PERR_PROTOCOL;
}

static void *one_stream(void *p) {
    stream_arg_t *a = p;
    p2p_intro_t me = {.kind = P2P_KIND_BENCH};
    memcpy(me.uuid, a->uuid, 16);
    sec_link_t *l = NULL;
    char err[160];
    net_cancel_t cancel = {.wait = a->w};
    int fd = a->dial ? a->dial(a->dial_ctx, &me, a->timeout_ms, &cancel, &l, err, sizeof err)
                     : p2p_dial(a->to, a->sec, &me, a->peer_uuid, a->timeout_ms, &cancel, &l, err, sizeof err);
    if (fd < 0) {
        if (!pwait_result(a->w)) pccl_log(PCCL_LOG_WARN, "bandwidth", "probe: %s", err);
        pwait_cancel(a->w, fd);
        return NULL;
    }
    net_set_nonblock(fd, 1);
    int rc = stream_exchange(a, l, fd, &cancel);
    if (rc != 0) pwait_cancel(a->w, rc);
    sec_link_free(l);
    close(fd);
    return NULL;
}

/* The streams of one measurement under w; the first failure's code, else 0. */
static int run_streams(stream_arg_t *args, int streams) {
    pthread_t th[BW_MAX_STREAMS];
    int started = 0;
    if (streams == 1) {
        one_stream(&args[0]);
    } else {
        for (; started < streams; started++)
            if (pthread_create(&th[started], NULL, one_stream, &args[started]) != 0) {
                pwait_cancel(args[0].w, -PERR_FAILED);
                break;
            }
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    }
    return pwait_result(args[0].w);
}

static int measure(const stream_arg_t *proto, int streams, pwait_t *w, bw_result_t *out) {
    memset(out, 0, sizeof *out);
    if (streams < 1 || streams > BW_MAX_STREAMS || proto->duration_ms <= 0 || proto->duration_ms > BW_MAX_DURATION_MS)
        return -PERR_INVALID;
    pthread_mutex_t mu;
    pwait_t own;
    if (!w) {
        pthread_mutex_init(&mu, NULL);
        if (pwait_init(&own, &mu, NULL, 1) != 0) {
            pthread_mutex_destroy(&mu);
            return -PERR_FAILED;
        }
    }
    stream_arg_t args[BW_MAX_STREAMS];
    for (int i = 0; i < streams; i++) {
        args[i] = *proto;
        args[i].w = w ? w : &own;
    }
    int rc = run_streams(args, streams);
    if (!w) {
        pwait_destroy(&own);
        pthread_mutex_destroy(&mu);
    }
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

int bw_measure(const ccoip_socket_address_t *to, const uint8_t uuid[16], const sec_cfg_t *sec,
               const uint8_t peer_uuid[16], int direction, int duration_ms, int streams, int timeout_ms,
               pwait_t *w, bw_result_t *out) {
    stream_arg_t a = {.to = to, .uuid = uuid, .peer_uuid = peer_uuid, .sec = sec, .direction = direction,
                      .duration_ms = duration_ms, .timeout_ms = timeout_ms};
    return measure(&a, streams, w, out);
}

int bw_measure_via(bw_dial_fn dial, void *ctx, const uint8_t uuid[16], int direction, int duration_ms, int streams,
                   int timeout_ms, pwait_t *w, bw_result_t *out) {
    stream_arg_t a = {.dial = dial, .dial_ctx = ctx, .uuid = uuid, .direction = direction,
                      .duration_ms = duration_ms, .timeout_ms = timeout_ms};
    return measure(&a, streams, w, out);
}
