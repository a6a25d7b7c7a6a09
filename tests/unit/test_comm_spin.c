/* test_comm_spin.c - when a peer spins before it sleeps (comm_spin_until, which the waits for the master's
 * answers and the ring use): only while the group's peers on this host are known and do not outnumber the
 * CPUs; p2p_local_peers_fit gives the same answer for known peers. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "p2p/p2p.h"
#include "tinytest.h"

static wire_peer_t peer(uint8_t id, uint8_t last) {
    wire_peer_t p = {.ip = {.protocol = inetIPv4, .ipv4.data = {127, 0, 0, last}}, .port = 1000};
    memset(p.uuid, id, 16);
    return p;
}

static void test_spin_only_where_peers_fit(void) {
    pcclComm_t *c = calloc(1, sizeof *c);
    pthread_mutex_init(&c->p2p.mu, NULL);
    memset(c->uuid, 1, 16);
    c->ncpus = 2;
    CHECK(comm_spin_until(c) == 0); /* no peer list yet: nothing is known to fit */
    wire_peer_t two[2] = {peer(1, 1), peer(2, 2)}, three[3] = {peer(1, 1), peer(2, 2), peer(3, 3)};
    p2p_set_peers(c, two, 2);
    uint64_t before = pwait_now_us(), until = comm_spin_until(c);
    CHECK(until >= before + COMM_SPIN_US && until <= pwait_now_us() + COMM_SPIN_US);
    CHECK(p2p_local_peers_fit(c));
    p2p_set_peers(c, three, 3); /* three peers on two CPUs: a spinning waiter would hold back another */
    CHECK(comm_spin_until(c) == 0);
    CHECK(!p2p_local_peers_fit(c));
    c->ncpus = 3;
    CHECK(comm_spin_until(c) != 0 && p2p_local_peers_fit(c));
    free(c->p2p.peers);
    pthread_mutex_destroy(&c->p2p.mu);
    free(c);
}

int main(void) {
    RUN_TEST(test_spin_only_where_peers_fit);
    TEST_MAIN_END();
}
