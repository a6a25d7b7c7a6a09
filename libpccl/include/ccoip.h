/*
 * ccoip.h - the protocol's well-known TCP ports (C99), with PCCL 1.0's names
 * and values, so that programs written for PCCL compile unchanged.
 * Only the master's port is a default that pccl itself uses; a pccl peer
 * serves ring, shared-state and bandwidth-probe connections on one port the
 * kernel picks, which the master passes on to the other peers.
 */
#ifndef CCOIP_H
#define CCOIP_H

/** The master's control listener; peers keep this connection for the whole run. */
#define CCOIP_PROTOCOL_PORT_MASTER 48148

/** PCCL 1.0's shared-state port (pccl: the peer's p2p port). Never pccl's admin port. */
#define CCOIP_PROTOCOL_PORT_SHARED_STATE 48149

/** PCCL 1.0's ring (p2p) port (pccl: a port the kernel picks). */
#define CCOIP_PROTOCOL_PORT_P2P 48150

/** PCCL 1.0's bandwidth-probe port (pccl: the peer's p2p port). */
#define CCOIP_PROTOCOL_PORT_BANDWIDTH_BENCHMARK 48151

#endif /* CCOIP_H */
