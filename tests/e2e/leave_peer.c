/*
 * leave_peer.c - the library side of a leave, for test_leave.sh: pcclExtLeave's
 * refusals (no communicator, not connected, already left), a successful leave
 * and what the communicator answers afterwards (pcclExtGetDeparture, calls
 * refused). Usage: leave_peer PORT. Prints "ok" and exits 0, or names the
 * first check that failed and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>

#include "pccl.h"
#include "pccl_leave.h"

#define EXPECT(cond)                                                  \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "leave_peer: failed: %s\n", #cond);       \
            return 1;                                                 \
        }                                                             \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: leave_peer PORT\n");
        return 2;
    }
    EXPECT(pcclInit() == pcclSuccess);
    EXPECT(pcclExtLeave(NULL) == pcclInvalidArgument);
    pcclCommCreateParams_t params = {.master_address = {.inet.protocol = inetIPv4, .inet.ipv4.data = {127, 0, 0, 1},
                                                        .port = (uint16_t)atoi(argv[1])},
                                     .peer_group = 0, .p2p_connection_pool_size = 1};
    pcclComm_t *comm;
    EXPECT(pcclCreateCommunicator(&params, &comm) == pcclSuccess);
    pcclExtDeparture_t how = pcclExtLeft;
    EXPECT(pcclExtLeave(comm) == pcclInvalidUsage); /* not connected */
    EXPECT(pcclExtGetDeparture(comm, &how) == pcclSuccess && how == pcclExtInRun);
    EXPECT(pcclConnect(comm) == pcclSuccess);
    EXPECT(pcclExtGetDeparture(comm, &how) == pcclSuccess && how == pcclExtInRun);
    EXPECT(pcclExtLeave(comm) == pcclSuccess);
    EXPECT(pcclExtGetDeparture(comm, &how) == pcclSuccess && how == pcclExtLeft);
    EXPECT(pcclExtLeave(comm) == pcclInvalidUsage);
    EXPECT(pcclUpdateTopology(comm) == pcclInvalidUsage);
    bool pending;
    EXPECT(pcclArePeersPending(comm, &pending) == pcclInvalidUsage);
    EXPECT(pcclDestroyCommunicator(comm) == pcclSuccess);
    printf("ok\n");
    return 0;
}
