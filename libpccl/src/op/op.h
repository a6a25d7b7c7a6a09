/*
 * op/ - the collective operations a peer runs: each operation's vote through the master, its ring,
 * its verdict and the restore of the caller's buffer on failure (allreduce.h). Owns the operation records
 * and the worker threads of async operations (one per operation at most, joined by the communicator).
 *
 * Depends on comm/ (the master link), p2p/ (connections to ring neighbours) and ring/ (data movement).
 */
#ifndef PCCL_OP_H
#define PCCL_OP_H

#include "op/allreduce.h"

#endif
