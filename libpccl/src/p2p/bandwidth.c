/* bandwidth.c - see bandwidth.h. */
#include "p2p/bandwidth.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "p2p/p2p_hello.h"

#define BW_CHUNK (128u << 10)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Streams for duration_ms, then half-closes. */
static int send_for(sec_link_t *l, int fd, int duration_ms) {
    static const uint8_t zeros[BW_CHUNK];
    uint64_t end = now_ns() + (uint64_t)duration_ms * 1000000u;
    while (now_ns() < end)
        if (link_send_all(l, fd, zeros, sizeof zeros) != 0) return -1;
    shutdown(fd, SHUT_WR);
    return 0;
}

/* Receives until EOF (failing past end_ns unless it is 0); bytes and time between the first and
 * the last byte. */
static int receive_all(sec_link_t *l, int fd, uint64_t end_ns, uint64_t *bytes, uint64_t *ns) {
    uint8_t *buf = malloc(BW_CHUNK);
    if (!buf) return -1;
    uint64_t first = 0, last = 0, total = 0;
    for (;;) {
        ssize_t n = sec_link_recv(l, fd, buf, BW_CHUNK);
        if (n == 0) break;
        if (n < 0) {
            free(buf);
            return -1;
        }
        last = now_ns();
        if (end_ns && last > end_ns) {
            free(buf);
            return -1;
        }
        if (!total) first = last;
        total += (uint64_t)n;
    }
    free(buf);
    *bytes = total;
    *ns = last > first ? last - first : 1;
    return total ? 0 : -1;
}

void bw_serve_connection(sec_link_t *l, int fd, int timeout_ms, int max_ms, int may_send) {
    uint8_t req[5];
    net_set_timeouts(fd, timeout_ms);
    if (link_recv_all(l, fd, req, sizeof req) != 0) return;
    uint32_t duration = wire_get_u32(req + 1);
    if (duration == 0 || duration > (uint32_t)max_ms || (req[0] == BW_SERVER_SENDS && !may_send)) return;
    if (req[0] == BW_SERVER_SENDS) {
        send_for(l, fd, (int)duration);
        uint8_t b;
        while (sec_link_recv(l, fd, &b, 1) > 0) { /* wait for the client to finish reading */ }
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

typedef struct stream_arg {
    const ccoip_socket_address_t *to;
    const uint8_t *uuid, *peer_uuid;
    const sec_cfg_t *sec;
    int direction, duration_ms, timeout_ms, rc;
    uint64_t bytes, ns;
} stream_arg_t;

static void *one_stream(void *p) {
    stream_arg_t *a = p;
    a->rc = -1;
    p2p_intro_t me = {.kind = P2P_KIND_BENCH};
    memcpy(me.uuid, a->uuid, 16);
    sec_link_t *l = NULL;
    char err[160];
    int fd = p2p_dial(a->to, a->sec, &me, a->peer_uuid, a->timeout_ms, NULL, &l, err, sizeof err);
    if (fd < 0) {
        pccl_log(PCCL_LOG_WARN, "bandwidth", "probe to port %u: %s", a->to->port, err);
        return NULL;
    }
    net_set_timeouts(fd, a->duration_ms + a->timeout_ms);
    uint8_t req[5];
    req[0] = (uint8_t)a->direction;
    wire_put_u32(req + 1, (uint32_t)a->duration_ms);
    if (link_send_all(l, fd, req, sizeof req) == 0) {
        if (a->direction == BW_SERVER_SENDS) {
            if (receive_all(l, fd, 0, &a->bytes, &a->ns) == 0) a->rc = 0;
        } else if (send_for(l, fd, a->duration_ms) == 0) {
            uint8_t res[16];
            if (link_recv_all(l, fd, res, sizeof res) == 0) {
                a->bytes = wire_get_u64(res);
                a->ns = wire_get_u64(res + 8);
                a->rc = a->ns ? 0 : -1;
            }
        }
    }
    sec_link_free(l);
    close(fd);
    return NULL;
}

int bw_measure(const ccoip_socket_address_t *to, const uint8_t uuid[16], const sec_cfg_t *sec,
               const uint8_t peer_uuid[16], int direction, int duration_ms, int streams, int timeout_ms,
               bw_result_t *out) {
    if (streams < 1 || streams > 64 || duration_ms <= 0 || duration_ms > BW_MAX_DURATION_MS) return -1;
    stream_arg_t args[64];
    pthread_t th[64];
    int started = 0;
    for (int i = 0; i < streams; i++) {
        args[i] = (stream_arg_t){.to = to, .uuid = uuid, .peer_uuid = peer_uuid, .sec = sec,
                                 .direction = direction,
                                 .duration_ms = duration_ms, .timeout_ms = timeout_ms, .rc = -1};
        if (streams == 1) {
            one_stream(&args[0]);
            started = 1;
        } else if (pthread_create(&th[i], NULL, one_stream, &args[i]) == 0) {
            started++;
        } else {
            break;
        }
    }
    if (streams > 1)
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    memset(out, 0, sizeof *out);
    if (started != streams) return -1;
    for (int i = 0; i < streams; i++) {
        if (args[i].rc != 0) return -1;
        out->bytes += args[i].bytes;
        if (args[i].ns > out->ns) out->ns = args[i].ns;
    }
    /* All bytes over the longest stream's receive window: never overstates a link whose
     * streams did not fully overlap. */
    out->mbps = (double)out->bytes * 8.0 / ((double)out->ns / 1e9) / 1e6;
    return 0;
}
