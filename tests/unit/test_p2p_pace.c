/* test_p2p_pace.c - the same-host tuning of ring streams: counted peers on this
 * host; the unsent-bytes cap of ring sends (p2p_pace_tx), applied to a real
 * loopback connection whatever the CPUs, removed again for a remote successor or
 * when PCCL_LOCAL_NOTSENT_BYTES is 0; the bounded receive buffer of ring streams
 * from the first spliced all-reduce on, and spliced same-host sends, only while
 * those peers do not outnumber the CPUs (p2p_local_peers_fit, net_bound_local_rcvbuf,
 * p2p_bound_rx, p2p_splices). */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/comm.h"
#include "loopback_pair.h"
#include "base/net.h"
#include "p2p/p2p.h"
#include "tinytest.h"

static wire_peer_t peer(uint8_t id, uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    wire_peer_t p = {.ip = {.protocol = inetIPv4, .ipv4.data = {a, b, c, d}}, .port = 1000};
    memset(p.uuid, id, 16);
    return p;
}

static pcclComm_t *comm_stub(void) {
    pcclComm_t *c = calloc(1, sizeof *c);
    pthread_mutex_init(&c->p2p.mu, NULL);
    memset(c->uuid, 1, 16);
    c->local_notsent_bytes = 64 << 10;
    return c;
}

static void comm_stub_free(pcclComm_t *c) {
    free(c->p2p.peers);
    pthread_mutex_destroy(&c->p2p.mu);
    free(c);
}

static void test_local_peers_counted(void) {
    pcclComm_t *c = comm_stub();
    wire_peer_t lan[4] = {peer(2, 10, 0, 0, 5), peer(1, 10, 0, 0, 5), peer(3, 10, 0, 0, 6), peer(4, 10, 0, 0, 5)};
    p2p_set_peers(c, lan, 4);
    CHECK(c->p2p.local_peers == 3); /* this peer and two more on 10.0.0.5 */
    wire_peer_t lo[3] = {peer(1, 127, 0, 0, 1), peer(2, 127, 0, 0, 2), peer(3, 192, 168, 1, 9)};
    p2p_set_peers(c, lo, 3);
    CHECK(c->p2p.local_peers == 2); /* any 127/8 address is this host */
    p2p_set_peers(c, lo + 1, 2);
    CHECK(c->p2p.local_peers == 0); /* not in the group */
    comm_stub_free(c);
}

static int notsent_lowat(int fd) {
    int v = -1;
    socklen_t len = sizeof v;
    return getsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, &len) == 0 ? v : -1;
}

static void test_cap_same_host(void) {
    int ls, cfd, afd;
    CHECK(loopback_pair(&ls, &cfd, &afd) == 0);
    if (ls < 0 || afd < 0) return;
    pcclComm_t *c = comm_stub();
    wire_peer_t two[2] = {peer(1, 127, 0, 0, 1), peer(2, 127, 0, 0, 1)};
    p2p_set_peers(c, two, 2);
    p2p_conn_t k = {.fd = cfd, .dir = P2P_TX, .same_host = net_fd_same_host(cfd)};
    CHECK(k.same_host == 1);

    c->ncpus = 2; /* a CPU per local peer: capped */
    p2p_pace_tx(c, &k);
    CHECK(notsent_lowat(cfd) == 64 << 10);
    CHECK(k.notsent_cap == 64 << 10);

    c->ncpus = 1; /* oversubscribed: still capped */
    p2p_pace_tx(c, &k);
    CHECK(notsent_lowat(cfd) == 64 << 10);
    CHECK(k.notsent_cap == 64 << 10);

    c->ncpus = 4;
    c->local_notsent_bytes = 0; /* turned off */
    p2p_pace_tx(c, &k);
    CHECK(notsent_lowat(cfd) == 0);

    c->local_notsent_bytes = 32 << 10;
    k.same_host = 0; /* a remote successor keeps the default whatever the CPUs */
    p2p_pace_tx(c, &k);
    CHECK(notsent_lowat(cfd) == 0);
    k.same_host = 1;
    p2p_pace_tx(c, &k);
    CHECK(notsent_lowat(cfd) == 32 << 10);

    comm_stub_free(c);
    close(afd);
    close(cfd);
    close(ls);
}

static int rcvbuf(int fd) {
    int v = -1;
    socklen_t len = sizeof v;
    return getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 ? v : -1;
}

static void test_rcvbuf_follows_cpus(void) {
    pcclComm_t *c = comm_stub();
    wire_peer_t four[4] = {peer(1, 127, 0, 0, 1), peer(2, 127, 0, 0, 1), peer(3, 127, 0, 0, 1), peer(4, 127, 0, 0, 1)};
    p2p_set_peers(c, four, 4);
    c->ncpus = 4;
    CHECK(p2p_local_peers_fit(c) == 1);
    c->ncpus = 2; /* four local peers on two CPUs: the stream keeps the kernel's autotuning */
    CHECK(p2p_local_peers_fit(c) == 0);
    p2p_set_peers(c, four, 2);
    CHECK(p2p_local_peers_fit(c) == 1);

    int ls, cfd, afd;
    CHECK(loopback_pair(&ls, &cfd, &afd) == 0);
    if (ls >= 0 && afd >= 0) {
        int before = rcvbuf(afd);
        CHECK(net_bound_local_rcvbuf(afd) == 1);
        int after = rcvbuf(afd); /* the kernel doubles what it is given, up to net.core.rmem_max */
        CHECK(after > 0 && after <= 2 * NET_LOCAL_RCVBUF && after != before);
        close(afd);
        close(cfd);
        close(ls);
    }
    comm_stub_free(c);
}

/* The bound waits for the first all-reduce whose sends the predecessor splices, then stays. */
static void test_rcvbuf_bound_by_op(void) {
    pcclComm_t *c = comm_stub();
    wire_peer_t four[4] = {peer(1, 127, 0, 0, 1), peer(2, 127, 0, 0, 1), peer(3, 127, 0, 0, 1), peer(4, 127, 0, 0, 1)};
    c->zerocopy_min_bytes = 48 << 20;
    int ls, cfd, afd;
    CHECK(loopback_pair(&ls, &cfd, &afd) == 0);
    if (ls < 0 || afd < 0) {
        comm_stub_free(c);
        return;
    }
    p2p_conn_t rx = {.fd = afd, .dir = P2P_RX};
    const int autotuned = rcvbuf(afd);
    const size_t big = (size_t)48 << 20, small = big - 4;

    p2p_set_peers(c, four, 4);
    c->ncpus = 2; /* more local peers than CPUs: never bounded */
    p2p_bound_rx(c, &rx, big, P2P_SPLICE_ALL_REDUCE);
    CHECK(rx.rcv_bound == 0 && rcvbuf(afd) == autotuned);

    c->ncpus = 4;
    p2p_bound_rx(c, &rx, small, P2P_SPLICE_ALL_REDUCE); /* copied sends: autotuned */
    CHECK(rx.rcv_bound == 0 && rcvbuf(afd) == autotuned);
    c->zerocopy_min_bytes = -1; /* splicing off */
    p2p_bound_rx(c, &rx, big, P2P_SPLICE_ALL_REDUCE);
    CHECK(rx.rcv_bound == 0 && rcvbuf(afd) == autotuned);

    c->zerocopy_min_bytes = 48 << 20;
    const size_t mid = P2P_SPLICE_ONE_WAY_MIN_BYTES;
    p2p_bound_rx(c, &rx, mid, P2P_SPLICE_ALL_REDUCE); /* an all-reduce this size copies */
    p2p_bound_rx(c, &rx, mid, P2P_SPLICE_NEVER);      /* so does a reduce-scatter */
    CHECK(rx.rcv_bound == 0 && rcvbuf(afd) == autotuned);
    p2p_bound_rx(c, &rx, mid, P2P_SPLICE_ONE_WAY); /* the first spliced op (a broadcast) bounds it */
    CHECK(rx.rcv_bound == 1);
    const int bounded = rcvbuf(afd);
    CHECK(bounded > 0 && bounded <= 2 * NET_LOCAL_RCVBUF && bounded != autotuned);
    int v = 4 << 20; /* what a second bounding would overwrite: it must not happen */
    CHECK(setsockopt(afd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == 0);
    const int marked = rcvbuf(afd);
    p2p_bound_rx(c, &rx, big, P2P_SPLICE_ALL_REDUCE);
    p2p_bound_rx(c, &rx, small, P2P_SPLICE_ALL_REDUCE);
    CHECK(rcvbuf(afd) == marked);

    p2p_conn_t unconnected = {.fd = socket(AF_INET, SOCK_STREAM, 0), .dir = P2P_RX};
    p2p_bound_rx(c, &unconnected, big, P2P_SPLICE_ALL_REDUCE); /* not a same-host stream: remembered, not retried */
    CHECK(unconnected.rcv_bound == -1);
    close(unconnected.fd);

    close(afd);
    close(cfd);
    close(ls);
    comm_stub_free(c);
}

static void test_splice_follows_cpus(void) {
    pcclComm_t *c = comm_stub();
    wire_peer_t four[4] = {peer(1, 127, 0, 0, 1), peer(2, 127, 0, 0, 1), peer(3, 127, 0, 0, 1), peer(4, 127, 0, 0, 1)};
    p2p_set_peers(c, four, 4);
    c->zerocopy_min_bytes = 48 << 20;
    p2p_conn_t k = {.fd = -1, .dir = P2P_TX, .same_host = 1};
    size_t big = (size_t)64 << 20;
    c->ncpus = 4;
    CHECK(p2p_splices(c, &k, big, P2P_SPLICE_ALL_REDUCE) == 1);
    CHECK(p2p_splices(c, &k, (size_t)32 << 20, P2P_SPLICE_ALL_REDUCE) == 0); /* below the threshold */
    CHECK(p2p_splices(c, &k, big, P2P_SPLICE_NEVER) == 0);                    /* a kind that copies */
    /* A one-way kind (broadcast, all-gather) splices same-host sends from 16 MiB with a CPU per peer. */
    const size_t one_way = P2P_SPLICE_ONE_WAY_MIN_BYTES;
    CHECK(p2p_splice_min(c, 1, P2P_SPLICE_ONE_WAY) == (long)one_way);
    CHECK(p2p_splices(c, &k, one_way, P2P_SPLICE_ONE_WAY) == 1);
    CHECK(p2p_splices(c, &k, one_way - 1, P2P_SPLICE_ONE_WAY) == 0);
    CHECK(p2p_splice_min(c, 0, P2P_SPLICE_ONE_WAY) == 48 << 20); /* a remote successor: unchanged */
    c->ncpus = 8; /* two CPUs per peer: the lower threshold of every kind */
    CHECK(p2p_splice_min(c, 1, P2P_SPLICE_ONE_WAY) == P2P_SPLICE_SPARE_MIN_BYTES);
    c->ncpus = 2; /* four local peers on two CPUs: same-host sends copy */
    CHECK(p2p_splices(c, &k, big, P2P_SPLICE_ALL_REDUCE) == 0);
    CHECK(p2p_splices(c, &k, big, P2P_SPLICE_ONE_WAY) == 0);
    k.same_host = 0; /* a remote successor still gets the pages */
    CHECK(p2p_splices(c, &k, big, P2P_SPLICE_ALL_REDUCE) == 1);
    k.same_host = 1;
    c->zerocopy_every_edge = 1; /* PCCL_ZEROCOPY_MIN_BYTES set: as given, on every edge */
    CHECK(p2p_splices(c, &k, big, P2P_SPLICE_ALL_REDUCE) == 1);
    c->zerocopy_min_bytes = -1;
    CHECK(p2p_splices(c, &k, big, P2P_SPLICE_ALL_REDUCE) == 0);
    comm_stub_free(c);
}

/* Two CPUs per local peer: same-host edges splice from 4 MiB; remote edges and a set variable keep
 * their threshold. */
static void test_splice_min_with_spare_cpus(void) {
    pcclComm_t *c = comm_stub();
    wire_peer_t four[4] = {peer(1, 127, 0, 0, 1), peer(2, 127, 0, 0, 1), peer(3, 127, 0, 0, 1), peer(4, 127, 0, 0, 1)};
    const size_t spare = P2P_SPLICE_SPARE_MIN_BYTES;
    c->zerocopy_min_bytes = 48 << 20;
    p2p_conn_t k = {.fd = -1, .dir = P2P_TX, .same_host = 1};
    p2p_set_peers(c, four, 4);
    c->ncpus = 8;
    CHECK(p2p_splice_min(c, 1, P2P_SPLICE_ALL_REDUCE) == (long)spare);
    CHECK(p2p_splices(c, &k, spare, P2P_SPLICE_ALL_REDUCE) == 1);
    CHECK(p2p_splices(c, &k, spare - 1, P2P_SPLICE_ALL_REDUCE) == 0);
    CHECK(p2p_splice_min(c, 0, P2P_SPLICE_ALL_REDUCE) == 48 << 20); /* a remote successor: unmeasured, unchanged */
    k.same_host = 0;
    CHECK(p2p_splices(c, &k, spare, P2P_SPLICE_ALL_REDUCE) == 0);
    k.same_host = 1;
    c->ncpus = 7; /* fewer than two CPUs per local peer */
    CHECK(p2p_splice_min(c, 1, P2P_SPLICE_ALL_REDUCE) == 48 << 20);
    CHECK(p2p_splices(c, &k, spare, P2P_SPLICE_ALL_REDUCE) == 0);
    c->ncpus = 3; /* the peers outnumber the CPUs */
    CHECK(p2p_splice_min(c, 1, P2P_SPLICE_ALL_REDUCE) == -1);
    c->ncpus = 8;
    c->zerocopy_every_edge = 1; /* PCCL_ZEROCOPY_MIN_BYTES set: as given */
    CHECK(p2p_splice_min(c, 1, P2P_SPLICE_ALL_REDUCE) == 48 << 20);
    c->zerocopy_every_edge = 0;
    c->zerocopy_min_bytes = -1;
    CHECK(p2p_splice_min(c, 1, P2P_SPLICE_ALL_REDUCE) == -1);
    CHECK(p2p_splices(c, &k, (size_t)64 << 20, P2P_SPLICE_ALL_REDUCE) == 0);
    c->zerocopy_min_bytes = 48 << 20;

    int ls, cfd, afd; /* the receiving end bounds its buffer at the same size */
    CHECK(loopback_pair(&ls, &cfd, &afd) == 0);
    if (ls >= 0 && afd >= 0) {
        p2p_conn_t rx = {.fd = afd, .dir = P2P_RX};
        p2p_bound_rx(c, &rx, spare - 1, P2P_SPLICE_ALL_REDUCE);
        CHECK(rx.rcv_bound == 0);
        p2p_bound_rx(c, &rx, spare, P2P_SPLICE_ALL_REDUCE);
        CHECK(rx.rcv_bound == 1);
        close(afd);
        close(cfd);
        close(ls);
    }
    comm_stub_free(c);
}

int main(void) {
    RUN_TEST(test_local_peers_counted);
    RUN_TEST(test_cap_same_host);
    RUN_TEST(test_rcvbuf_follows_cpus);
    RUN_TEST(test_rcvbuf_bound_by_op);
    RUN_TEST(test_splice_follows_cpus);
    RUN_TEST(test_splice_min_with_spare_cpus);
    TEST_MAIN_END();
}
