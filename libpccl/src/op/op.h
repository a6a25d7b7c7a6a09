/*
 * op/ - the collective operations a peer runs, of every kind (pccl.h's all-reduce and pccl_coll.h's
 * collectives): each operation's vote through the master, its data movement over the ring, its verdict and the
 * restore of the caller's buffer on failure. Owns the operation records (op_record.h: one record for every kind,
 * a small table for what differs) and the worker threads of async operations (one per operation at most, joined
 * by the communicator).
 *
 * Depends on comm/ (the master link), p2p/ (connections to ring neighbours) and ring/ (data movement).
 */
#ifndef PCCL_OP_H
#define PCCL_OP_H

#include "op/allreduce.h"

#endif
