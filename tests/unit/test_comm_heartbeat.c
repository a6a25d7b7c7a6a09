/* test_comm_heartbeat.c - a peer's heartbeat on a real master over loopback: the heartbeat thread sleeps on its
 * own condition variable (the messages the reader delivers for control waits do not wake it) and sends nothing
 * before PCCL_HEARTBEAT_MS has passed, so a run of quick control calls costs the master one packet each, not a
 * heartbeat more. */
#include <stdlib.h>
#include <string.h>

#include "server/master_internal.h"
#include "pccl.h"
#include "tinytest.h"

#define CALLS 200

static void test_control_calls_send_no_heartbeat(void) {
    ccoip_socket_address_t at = {.inet = {.protocol = inetIPv4, .ipv4 = {{127, 0, 0, 1}}}, .port = 0};
    pcclMasterInstance_t *m = NULL;
    CHECK(pcclCreateMaster(at, &m) == pcclSuccess);
    if (!m) return;
    CHECK(pcclRunMaster(m) == pcclSuccess);
    pcclCommCreateParams_t p = {.master_address = {.inet = {.protocol = inetIPv4, .ipv4 = {{127, 0, 0, 1}}},
                                                   .port = pccl__master_port(m)},
                                .p2p_connection_pool_size = 1};
    pcclComm_t *c = NULL;
    CHECK(pcclCreateCommunicator(&p, &c) == pcclSuccess && pcclConnect(c) == pcclSuccess);
    int done = 0;
    for (int i = 0; i < CALLS; i++) {
        bool pending;
        done += pcclArePeersPending(c, &pending) == pcclSuccess;
    }
    CHECK_EQ_U64(done, CALLS);
    pcclDestroyCommunicator(c);
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    /* the votes, the HELLO and whatever the connect and the leave send; a heartbeat per call would double it */
    CHECK(m->packets_received >= CALLS && m->packets_received < CALLS + CALLS / 4);
    pcclDestroyMaster(m);
}

int main(void) {
    unsetenv("PCCL_KEY_FILE");
    unsetenv("PCCL_ENCRYPT");
    setenv("PCCL_HEARTBEAT_MS", "10000", 1);
    setenv("PCCL_CONNECT_TIMEOUT_MS", "3000", 1);
    pcclInit();
    RUN_TEST(test_control_calls_send_no_heartbeat);
    TEST_MAIN_END();
}
