/*
 * run_end_peer.c - a library peer of test_shutdown_run.sh: connects (PCCL_CONNECT_RETRY_MS lets it
 * start before its master), prints "accepted", then votes pcclUpdateTopology every 50 ms until a call
 * returns pcclExtRunShutDown (a vote the master's departure interrupts fails, and an application retries
 * it, so other failures are logged and retried), and checks what a run the master ended looks like to the library: the call returned
 * pcclExtRunShutDown, pcclExtGetDeparture says pcclExtShutDown, the next call returns it again, and
 * pcclResultString names it. It is the only peer of group 1, so the run's other peers (group 0) never
 * wait for its syncs or collectives. Usage: run_end_peer PORT. Prints "shut down" and exits 0, or names the
 * first check that failed and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pccl.h"
#include "pccl_leave.h"

#define EXPECT(cond)                                                    \
    do {                                                                \
        if (!(cond)) {                                                  \
            fprintf(stderr, "run_end_peer: failed: %s\n", #cond);       \
            return 1;                                                   \
        }                                                               \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: run_end_peer PORT\n");
        return 2;
    }
    EXPECT(pcclInit() == pcclSuccess);
    pcclCommCreateParams_t params = {.master_address = {.inet.protocol = inetIPv4, .inet.ipv4.data = {127, 0, 0, 1},
                                                        .port = (uint16_t)atoi(argv[1])},
                                     .peer_group = 1, .p2p_connection_pool_size = 1};
    pcclComm_t *comm;
    EXPECT(pcclCreateCommunicator(&params, &comm) == pcclSuccess);
    EXPECT(pcclConnect(comm) == pcclSuccess);
    printf("accepted\n");
    fflush(stdout);
    pcclResult_t r = pcclSuccess;
    for (int i = 0; i < 6000 && r != pcclExtRunShutDown; i++) { /* at most 5 minutes */
        r = pcclUpdateTopology(comm);
        if (r != pcclSuccess && r != pcclExtRunShutDown)
            fprintf(stderr, "run_end_peer: pcclUpdateTopology: %s; retrying\n", pcclResultString(r));
        usleep(50000);
    }
    pcclExtDeparture_t how = pcclExtInRun;
    EXPECT(r == pcclExtRunShutDown);
    EXPECT(pcclExtGetDeparture(comm, &how) == pcclSuccess && how == pcclExtShutDown);
    bool pending;
    EXPECT(pcclArePeersPending(comm, &pending) == pcclExtRunShutDown);
    EXPECT(strstr(pcclResultString(pcclExtRunShutDown), "shut down") != NULL);
    EXPECT(pcclExtLeave(comm) == pcclExtRunShutDown);
    EXPECT(pcclDestroyCommunicator(comm) == pcclSuccess);
    printf("shut down\n");
    return 0;
}
