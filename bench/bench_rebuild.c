/*
 * bench_rebuild.c - what a restarted master's rebuild costs its event loop: the
 * pure state machine (master_sm.h) fed N RESUMEs of a run of N peers, each with
 * the whole ring, T tensor entries and OPS collectives without a verdict (half
 * finished, half not), then the tick that ends the collection, then each peer's
 * wiring report, until every peer has its RESUMED. Only the state machine runs:
 * no sockets, a send callback that counts. Each RESUME is signed over its
 * connection's CHALLENGE nonce beforehand (not timed); the master's check of the
 * signature is part of the RESUME's time.
 *
 * usage: bench_rebuild [OPS [T [N...]]]   (defaults 256, 256, and N = 64 256 512).
 * Prints a markdown table: per N, the total and longest single event of each
 * phase in milliseconds (the longest event is how long the loop cannot answer
 * anyone else, a heartbeat included).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sec/identity.h"
#include "base/log.h"
#include "sm/master_sm.h"
#include "base/wire.h"

static int resumed, nest;
static uint64_t *est; /* conns that got ESTABLISH_P2P and owe their report */

static void on_send(void *ctx, uint64_t conn, const wire_msg_t *msg) {
    (void)ctx;
    if (msg->type == M2C_RESUMED) resumed++;
    if (msg->type == M2C_ESTABLISH_P2P) est[nest++] = conn;
}
static void on_close(void *ctx, uint64_t conn, const char *reason) { (void)ctx, (void)conn, (void)reason; }

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct {
    double total, max;
} phase_t;

static void took(phase_t *p, double t0) {
    double d = now_ms() - t0;
    p->total += d;
    if (d > p->max) p->max = d;
}

/* Peer i's identity: a fixed seed, so its uuid is known before it connects. */
static void key_of(int i, ident_t *id) {
    uint8_t seed[32];
    for (int k = 0; k < 32; k++) seed[k] = (uint8_t)(i * 31 + k * 7 + 1);
    seed[0] = (uint8_t)i, seed[1] = (uint8_t)(i >> 8);
    ident_from_seed(id, seed);
}

static void nonce_of(int i, uint8_t n[32]) {
    memset(n, 0xf0, 32);
    n[0] = (uint8_t)i, n[1] = (uint8_t)(i >> 8);
}

static int run(int n, uint32_t nops, uint32_t nt) {
    msm_io_t io = {.send = on_send, .close = on_close};
    msm_t *m = msm_create(io);
    if (!m) return -1;
    est = malloc((size_t)n * 4 * sizeof *est);
    uint8_t(*ring)[16] = malloc((size_t)n * 16);
    wire_tensor_t *t = calloc(nt, sizeof *t);
    wire_op_outcome_t *ops = calloc(nops, sizeof *ops);
    ident_t *keys = malloc((size_t)n * sizeof *keys);
    if (!est || !ring || !t || !ops || !keys) return -1;
    for (int i = 0; i < n; i++) {
        key_of(i, &keys[i]);
        ident_uuid(keys[i].pk, ring[i]);
    }
    for (uint32_t i = 0; i < nt; i++) {
        snprintf(t[i].key, sizeof t[i].key, "layer.%u.weight", i);
        t[i].dtype = 5;
        t[i].count = 1u << 20;
        t[i].hash = 0x1234 + i;
    }
    uint64_t clock = 1000;
    msm_set_time(m, clock);
    resumed = nest = 0;
    phase_t ph[3] = {{0}};
    for (int i = 0; i < n; i++) {
        ccoip_inet_address_t ip = {.protocol = inetIPv4, .ipv4.data = {10, 1, (uint8_t)(i >> 8), (uint8_t)i}};
        uint8_t nonce[32];
        nonce_of(i, nonce);
        msm_on_connect(m, (uint64_t)i + 1, &ip, &ip, nonce);
        for (uint32_t k = 0; k < nops; k++)
            ops[k] = (wire_op_outcome_t){.tag = k, .op_seq = 100 + k, .finished = (uint8_t)(k % 2 == 0 || i % 7)};
        wire_msg_t r = {.type = C2M_RESUME};
        r.u.resume.magic = WIRE_MAGIC;
        r.u.resume.version = WIRE_VERSION;
        r.u.resume.p2p_port = 4000;
        memcpy(r.u.resume.uuid, ring[i], 16);
        memcpy(r.u.resume.id.pubkey, keys[i].pk, sizeof r.u.resume.id.pubkey);
        r.u.resume.has_revision = 1;
        r.u.resume.revision = 77;
        r.u.resume.nring = (uint32_t)n;
        r.u.resume.ring = ring;
        r.u.resume.n = nt;
        r.u.resume.tensors = t;
        r.u.resume.nops = nops;
        r.u.resume.ops = ops;
        /* As the server hands it over: encoded with its signature, then decoded. */
        wbuf_t b = {0};
        wire_msg_t d;
        char err[256];
        if (ident_encode_signed(&keys[i], nonce, &r, &b) != 0 || wire_decode(b.data + 4, b.len - 4, &d, err, sizeof err)) {
            fprintf(stderr, "bench_rebuild: cannot encode a signed RESUME\n");
            return -1;
        }
        wbuf_free(&b);
        double t0 = now_ms();
        msm_on_packet(m, (uint64_t)i + 1, &d);
        took(&ph[0], t0);
        wire_msg_free(&d);
    }
    clock += 250; /* the server's next tick ends the collection */
    msm_set_time(m, clock);
    double t0 = now_ms();
    msm_on_tick(m);
    took(&ph[1], t0);
    for (int k = 0; k < nest; k++) {
        wire_msg_t ok = {.type = C2M_P2P_ESTABLISHED};
        ok.u.flag.value = 1;
        t0 = now_ms();
        msm_on_packet(m, est[k], &ok);
        took(&ph[2], t0);
    }
    printf("| %d | %u | %u | %.1f | %.2f | %.1f | %.1f | %.2f | %.1f | %s |\n", n, nops, nt, ph[0].total, ph[0].max,
           ph[1].total, ph[2].total, ph[2].max, ph[0].total + ph[1].total + ph[2].total,
           resumed == n ? "yes" : "NO");
    msm_destroy(m);
    free(est), free(ring), free(t), free(ops), free(keys);
    return resumed == n ? 0 : -1;
}

int main(int argc, char **argv) {
    pccl_log_set_level(PCCL_LOG_ERROR);
    uint32_t nops = argc > 1 ? (uint32_t)atoi(argv[1]) : 256, nt = argc > 2 ? (uint32_t)atoi(argv[2]) : 256;
    int def[] = {64, 256, 512}, *ns = def, nn = 3;
    int *given = argc > 3 ? calloc((size_t)argc, sizeof *given) : NULL;
    if (given) {
        for (int i = 3; i < argc; i++) given[i - 3] = atoi(argv[i]);
        ns = given;
        nn = argc - 3;
    }
    printf("| peers | ops each | tensors each | RESUMEs ms | longest RESUME ms | collection end ms | wiring reports ms "
           "| longest report ms | total ms | all RESUMED |\n|---|---|---|---|---|---|---|---|---|---|\n");
    int rc = 0;
    for (int i = 0; i < nn; i++) rc |= run(ns[i], nops, nt);
    free(given);
    return rc ? 1 : 0;
}
