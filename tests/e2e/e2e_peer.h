/* e2e_peer.h - what the end-to-end peer programs share: joining the master on loopback. */
#ifndef PCCL_E2E_PEER_H
#define PCCL_E2E_PEER_H

#include <stdint.h>
#include <stdlib.h>

#include "pccl.h"

/* Initializes the library and connects to the master at 127.0.0.1:port (accepted); NULL on failure. */
static pcclComm_t *e2e_connect(const char *port, uint32_t group, uint32_t pool) {
    pcclInit();
    pcclCommCreateParams_t params = {.master_address = {.inet.protocol = inetIPv4, .inet.ipv4.data = {127, 0, 0, 1},
                                                        .port = (uint16_t)atoi(port)},
                                     .peer_group = group, .p2p_connection_pool_size = pool};
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return NULL;
    if (pcclConnect(comm) == pcclSuccess) return comm;
    pcclDestroyCommunicator(comm);
    return NULL;
}

#endif
