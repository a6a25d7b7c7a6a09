/*
 * base/ - what every other layer of the library and the master stand on: logging (log.h), sockets with
 * deadlines and cancellation (net.h), the cancellable wait a peer's blocking paths wait through (wait.h),
 * address parsing and formatting (addr.h), the buffer pool (bufpool.h), the stranger gate (gate.h), the wire
 * codec of the control protocol (wire.h), and the one internal error convention (err.h: 0 or -PERR_<NAME>,
 * mapped to pcclResult_t at the API edge).
 *
 * Owns no threads and no global state beyond the log sink. Every function here is safe to call from any
 * thread on distinct objects; a gate or a buffer pool is guarded by its owner. Nothing here includes a header
 * from another folder of the library (only libpccl/include and kernels/).
 *
 * Cycle: wire <-> wire_spec: wire_msgs.def is read twice, by wire.h for the message structs and by wire_spec.c
 * for the field tables built on those structs, and wire.c's codec walks the tables; the spec is the codec's.
 */
#ifndef PCCL_BASE_H
#define PCCL_BASE_H

#include "base/addr.h"
#include "base/bufpool.h"
#include "base/err.h"
#include "base/gate.h"
#include "base/log.h"
#include "base/net.h"
#include "base/wait.h"
#include "base/wire.h"

#endif
