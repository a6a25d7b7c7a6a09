/*
 * round_peer.c - one peer of test_round_stop.sh: an accept round whose member
 * is stopped (SIGSTOP) while a newcomer wires its ring connection to it.
 * Usage: round_peer PORT ROLE DIR
 *   first:    connects (bootstrap), accepts the second peer, then waits for
 *             DIR/go_first, prints "voting" and votes once more (the vote the
 *             harness stops it in);
 *   second:   connects, waits for DIR/go_second, prints "voting", then votes
 *             until the world holds it and the newcomer (world size 2 again
 *             after the first is kicked), at most 30 s;
 *   newcomer: connects and prints "accepted" once it is in.
 * Every line carries the CLOCK_MONOTONIC time in ms, so the harness can time
 * the round. Exit 0 on success, 1 on any failure or timeout.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pccl.h"

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void say(const char *what, int value) {
    printf("%s %d %lld\n", what, value, now_ms());
    fflush(stdout);
}

/* Waits (bounded: 30 s) for DIR/name to exist. */
static int wait_file(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (int i = 0; i < 3000; i++) {
        if (access(path, F_OK) == 0) return 0;
        usleep(10 * 1000);
    }
    return -1;
}

static int world(pcclComm_t *c) {
    int w = 0;
    pcclGetAttribute(c, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &w);
    return w;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: round_peer PORT first|second|newcomer DIR\n");
        return 2;
    }
    const char *role = argv[2], *dir = argv[3];
    if (pcclInit() != pcclSuccess) return 1;
    pcclCommCreateParams_t params = {0};
    params.master_address.inet.protocol = inetIPv4;
    params.master_address.inet.ipv4.data[0] = 127;
    params.master_address.inet.ipv4.data[3] = 1;
    params.master_address.port = (uint16_t)atoi(argv[1]);
    params.p2p_connection_pool_size = 1;
    pcclComm_t *c = NULL;
    if (pcclCreateCommunicator(&params, &c) != pcclSuccess || pcclConnect(c) != pcclSuccess) return 1;
    say("connected", world(c));
    long long deadline = now_ms() + 30000;
    if (strcmp(role, "first") == 0) {
        while (world(c) < 2 && now_ms() < deadline) pcclUpdateTopology(c);
        say("world", world(c));
        if (world(c) < 2 || wait_file(dir, "go_first") != 0) return 1;
        say("voting", world(c));
        pcclResult_t r = pcclUpdateTopology(c);
        say("vote_result", (int)r);
        return 0;
    }
    if (strcmp(role, "second") == 0) {
        if (wait_file(dir, "go_second") != 0) return 1;
        say("voting", world(c));
        /* Fails while the round with the stopped peer lasts; then the newcomer gets in. */
        while (now_ms() < deadline) {
            pcclResult_t r = pcclUpdateTopology(c);
            say("vote_result", (int)r);
            if (r == pcclSuccess && world(c) == 2) {
                say("world", world(c));
                return 0;
            }
        }
        return 1;
    }
    say("accepted", world(c));
    /* Stay in the run until the second peer has seen this one (its last vote needs no reply of ours). */
    sleep(1);
    pcclDestroyCommunicator(c);
    return 0;
}
