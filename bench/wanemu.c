/*
 * wanemu.c - a userspace WAN emulator over TUN interfaces (bench/wan.sh, tests/e2e/test_wanemu.sh).
 *
 * usage: wanemu --link NAME=A.B.C.D [--link ...] [--delay MS] [--rate MBIT] [--queue BYTES]
 *               [--loss PCT] [--seed N]
 *
 * Why: some kernels (Firecracker guests among them) are built without sch_netem, so tc cannot add
 * delay. wanemu creates one TUN interface per --link (IFF_TUN | IFF_NO_PI), prints "READY K" on
 * stdout, and forwards IPv4 packets between them; the caller moves each TUN into a network
 * namespace (the open fd keeps working there) and routes the subnet through it.
 *
 * A packet read from link S for the address of link D goes through:
 *   loss    dropped with probability PCT/100 (seeded PRNG, so runs repeat);
 *   uplink  S's serialization queue at RATE (drop-tail past --queue bytes of backlog);
 *   delay   MS one way (an RTT is twice --delay);
 *   downlink D's serialization queue at RATE (drop-tail likewise), then written to D's TUN.
 * The queues are virtual clocks (the time each link becomes idle), so no packet is touched until
 * it is due. The default queue limit is one bandwidth-delay product (RATE x 2 x MS), so TCP sees
 * the losses of a real bottleneck instead of an unbounded buffer. RATE 0 means no rate limit.
 *
 * One thread: ppoll on the TUN fds with a timeout to the next due packet (CLOCK_MONOTONIC);
 * SIGTERM/SIGINT are blocked except inside ppoll, so they end the loop cleanly. At exit the
 * counters go to stderr. Exit status: 0 after a signal, 1 on a system error, 2 on bad arguments.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* ppoll */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINKS 64
#define MAX_PKT 65536
#define READ_BATCH 64                  /* packets read per fd per wake-up: no link starves the others */
#define MAX_BUFFERED (512u << 20)      /* all packets held at once, a bound also for --rate 0 */
#define MIN_QUEUE 65536                /* a queue must hold at least a few full-size packets */

struct pkt {
    struct pkt *next;
    int64_t t;  /* when it leaves its current stage (ns, CLOCK_MONOTONIC) */
    int dst;
    uint32_t len;
    unsigned char data[];
};

struct fifo {
    struct pkt *head, *tail;
};

struct link {
    char name[IFNAMSIZ];
    uint32_t addr;      /* network byte order */
    int fd;
    int64_t up_free;    /* when this link's uplink finishes sending its backlog */
    int64_t down_free;  /* same for the downlink */
    struct fifo transit;  /* sent by this link's uplink, propagating (ordered by arrival) */
    struct fifo down;     /* on the destination's downlink (ordered by release) */
};

static struct link links[MAX_LINKS];
static int nlinks;
static int64_t delay_ns;
static double rate_bps;   /* 0: unlimited */
static uint64_t queue_limit;
static double loss_p;
static uint64_t rng_state;
static uint64_t buffered;
static uint64_t n_fwd, n_fwd_bytes, n_loss, n_queue, n_malformed, n_unroutable, n_write_err;
static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* splitmix64: tiny, seedable, good enough for Bernoulli losses */
static double rng_uniform(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static void fifo_push(struct fifo *f, struct pkt *p) {
    p->next = NULL;
    if (f->tail)
        f->tail->next = p;
    else
        f->head = p;
    f->tail = p;
}

static struct pkt *fifo_pop(struct fifo *f) {
    struct pkt *p = f->head;
    f->head = p->next;
    if (!f->head) f->tail = NULL;
    return p;
}

static void pkt_free(struct pkt *p) {
    buffered -= p->len;
    free(p);
}

static int64_t tx_ns(uint32_t len) {
    return rate_bps > 0 ? (int64_t)((double)len * 8e9 / rate_bps) : 0;
}

/* Serialization on a link whose sender is idle from *free_at: false (drop) when the backlog
 * already waiting at time t plus this packet exceeds the queue limit; else the departure time. */
static int serialize(int64_t *free_at, int64_t t, uint32_t len, int64_t *depart) {
    if (rate_bps <= 0) {
        *depart = t;
        return 1;
    }
    int64_t start = *free_at > t ? *free_at : t;
    double backlog = (double)(start - t) * rate_bps / 8e9;
    if (backlog + len > (double)queue_limit) return 0;
    *free_at = start + tx_ns(len);
    *depart = *free_at;
    return 1;
}

static int find_link(uint32_t addr) {
    for (int i = 0; i < nlinks; i++)
        if (links[i].addr == addr) return i;
    return -1;
}

/* A packet read from link src at time t: validate, route, lose, queue on the uplink. */
static void ingress(int src, const unsigned char *b, uint32_t len, int64_t t) {
    if (len < 20 || (b[0] >> 4) != 4) {
        n_malformed++;
        return;
    }
    uint32_t ihl = (uint32_t)(b[0] & 15) * 4, total = (uint32_t)b[2] << 8 | b[3];
    if (ihl < 20 || ihl > len || total < ihl || total > len) {
        n_malformed++;
        return;
    }
    uint32_t dst_addr;
    memcpy(&dst_addr, b + 16, 4);
    int dst = find_link(dst_addr);
    if (dst < 0 || dst == src) {
        n_unroutable++;
        return;
    }
    if (loss_p > 0 && rng_uniform() < loss_p) {
        n_loss++;
        return;
    }
    int64_t depart;
    if (buffered + total > MAX_BUFFERED || !serialize(&links[src].up_free, t, total, &depart)) {
        n_queue++;
        return;
    }
    struct pkt *p = malloc(sizeof *p + total);
    if (!p) {
        n_queue++;
        return;
    }
    memcpy(p->data, b, total);  /* trailing bytes past the IP total length are not forwarded */
    p->len = total;
    p->dst = dst;
    p->t = depart + delay_ns;
    buffered += total;
    fifo_push(&links[src].transit, p);
}

/* Moves every packet that has reached its destination's downlink (in arrival order across
 * sources, so the downlink is FIFO) and writes every packet that has left a downlink. */
static void release(int64_t now) {
    int64_t horizon = now; /* never early: an RTT is at least 2 x --delay (ppoll's timer slack makes it late) */
    for (;;) {  /* bounded: each pass removes one packet from a transit queue */
        int best = -1;
        for (int i = 0; i < nlinks; i++) {
            struct pkt *h = links[i].transit.head;
            if (h && h->t <= horizon && (best < 0 || h->t < links[best].transit.head->t)) best = i;
        }
        if (best < 0) break;
        struct pkt *p = fifo_pop(&links[best].transit);
        struct link *d = &links[p->dst];
        int64_t depart;
        if (!serialize(&d->down_free, p->t, p->len, &depart)) {
            n_queue++;
            pkt_free(p);
            continue;
        }
        p->t = depart;
        fifo_push(&d->down, p);
    }
    for (int i = 0; i < nlinks; i++) {
        struct link *l = &links[i];
        while (l->down.head && l->down.head->t <= horizon) {  /* bounded by the queue's length */
            struct pkt *p = fifo_pop(&l->down);
            if (write(l->fd, p->data, p->len) == (ssize_t)p->len) {
                n_fwd++;
                n_fwd_bytes += p->len;
            } else {
                n_write_err++;
            }
            pkt_free(p);
        }
    }
}

static int64_t next_due(void) {
    int64_t t = INT64_MAX;
    for (int i = 0; i < nlinks; i++) {
        if (links[i].transit.head && links[i].transit.head->t < t) t = links[i].transit.head->t;
        if (links[i].down.head && links[i].down.head->t < t) t = links[i].down.head->t;
    }
    return t;
}

static void usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "wanemu: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "usage: wanemu --link NAME=A.B.C.D [--link ...] [--delay MS] [--rate MBIT] "
                    "[--queue BYTES] [--loss PCT] [--seed N]\n");
    exit(2);
}

/* strtod with the whole string consumed and a range check; an optional trailing '%' for --loss */
static double parse_num(const char *opt, const char *s, double lo, double hi, int allow_pct) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (allow_pct && *end == '%') end++;
    if (errno || end == s || *end || !(v >= lo && v <= hi)) usage_error("bad value for", opt);
    return v;
}

static void parse_args(int argc, char **argv) {
    double delay_ms = 0, rate_mbit = 0, queue = -1, loss_pct = 0, seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) usage_error("missing value or unknown option", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--link")) {
            if (nlinks == MAX_LINKS) usage_error("too many links", v);
            const char *eq = strchr(v, '=');
            size_t n = eq ? (size_t)(eq - v) : 0;
            if (!eq || n == 0 || n >= IFNAMSIZ) usage_error("--link wants NAME=A.B.C.D (name < 16 chars)", v);
            struct link *l = &links[nlinks];
            memcpy(l->name, v, n);
            l->name[n] = 0;
            struct in_addr ia;
            if (inet_pton(AF_INET, eq + 1, &ia) != 1) usage_error("bad IPv4 address in --link", v);
            l->addr = ia.s_addr;
            for (int j = 0; j < nlinks; j++)
                if (links[j].addr == l->addr || !strcmp(links[j].name, l->name))
                    usage_error("duplicate link name or address", v);
            nlinks++;
        } else if (!strcmp(a, "--delay")) {
            delay_ms = parse_num(a, v, 0, 60000, 0);
        } else if (!strcmp(a, "--rate")) {
            rate_mbit = parse_num(a, v, 0, 1e6, 0);
        } else if (!strcmp(a, "--queue")) {
            queue = parse_num(a, v, 1500, 1 << 30, 0);
        } else if (!strcmp(a, "--loss")) {
            loss_pct = parse_num(a, v, 0, 100, 1);
        } else if (!strcmp(a, "--seed")) {
            seed = parse_num(a, v, 0, 1e18, 0);
        } else {
            usage_error("unknown option", a);
        }
    }
    if (nlinks < 2) usage_error("need at least two --link", NULL);
    delay_ns = (int64_t)(delay_ms * 1e6);
    rate_bps = rate_mbit * 1e6;
    loss_p = loss_pct / 100;
    rng_state = (uint64_t)seed;
    if (queue < 0) { /* one bandwidth-delay product of the round trip */
        queue = rate_bps * 2 * delay_ms / 1e3 / 8;
        if (queue < MIN_QUEUE) queue = MIN_QUEUE;
    }
    queue_limit = (uint64_t)queue;
}

static int open_tun(struct link *l) {
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    memcpy(ifr.ifr_name, l->name, strlen(l->name) + 1);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int main(int argc, char **argv) {
    parse_args(argc, argv);

    sigset_t block, waitmask;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &waitmask);  /* waitmask: the old mask, signals open in ppoll */
    sigdelset(&waitmask, SIGTERM);
    sigdelset(&waitmask, SIGINT);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    struct pollfd pfd[MAX_LINKS];
    for (int i = 0; i < nlinks; i++) {
        links[i].fd = open_tun(&links[i]);
        if (links[i].fd < 0) {
            fprintf(stderr, "wanemu: cannot create TUN %s: %s\n", links[i].name, strerror(errno));
            return 1;
        }
        pfd[i].fd = links[i].fd;
        pfd[i].events = POLLIN;
    }
    printf("READY %d\n", nlinks);
    fflush(stdout);

    static unsigned char buf[MAX_PKT];
    int rc = 0;
    while (!stop) {
        int64_t now = now_ns(), due = next_due();
        struct timespec ts, *tsp = NULL;
        if (due != INT64_MAX) {
            int64_t w = due > now ? due - now : 0;
            ts.tv_sec = (time_t)(w / 1000000000);
            ts.tv_nsec = (long)(w % 1000000000);
            tsp = &ts;
        }
        int n = ppoll(pfd, (nfds_t)nlinks, tsp, &waitmask);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "wanemu: ppoll: %s\n", strerror(errno));
            rc = 1;
            break;
        }
        now = now_ns();
        for (int i = 0; n > 0 && i < nlinks; i++) {
            if (pfd[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
                fprintf(stderr, "wanemu: TUN %s went away\n", links[i].name);
                rc = 1;
                stop = 1;
            }
            if (!(pfd[i].revents & POLLIN)) continue;
            for (int k = 0; k < READ_BATCH; k++) {
                ssize_t r = read(links[i].fd, buf, sizeof buf);
                if (r <= 0) break;  /* EAGAIN: drained */
                ingress(i, buf, (uint32_t)r, now);
            }
        }
        release(now_ns());
    }

    for (int i = 0; i < nlinks; i++) {
        struct fifo *fs[2] = {&links[i].transit, &links[i].down};
        for (int k = 0; k < 2; k++)
            while (fs[k]->head) pkt_free(fifo_pop(fs[k]));
        close(links[i].fd);
    }
    fprintf(stderr,
            "wanemu: forwarded %" PRIu64 " packets (%" PRIu64 " bytes), dropped: loss %" PRIu64 ", queue %" PRIu64
            ", malformed %" PRIu64 ", unroutable %" PRIu64 ", write errors %" PRIu64 "\n",
            n_fwd, n_fwd_bytes, n_loss, n_queue, n_malformed, n_unroutable, n_write_err);
    return rc;
}
