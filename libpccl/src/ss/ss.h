/*
 * ss/ - the shared state: pcclSynchronizeSharedState's vote and hashes, serving the state to peers that
 * need it (one serving thread per p2p connection that asks, from p2p/'s acceptor), and fetching it from
 * several sources at once (ss_fetch.h), for host and device memory (ss_device.h).
 *
 * Depends on comm/, p2p/ and op/ (no synchronization while operations are outstanding).
 */
#ifndef PCCL_SS_H
#define PCCL_SS_H

#include "comm/comm.h"
#include "sec/sec.h"
#include "ss/ss_device.h"
#include "ss/ss_fetch.h"

/* Serves shared-state requests on an accepted p2p connection until it closes (p2p/'s acceptor hands it
 * over through p2p_set_ss_server); owns fd and link. */
void ss_serve_connection(pcclComm_t *c, sec_link_t *link, int fd);

#endif
