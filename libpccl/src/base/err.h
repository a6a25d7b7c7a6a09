/*
 * err.h - the one error convention of the library's and the master's internal functions.
 *
 * An internal function returns 0 on success or a negative code, -PERR_<NAME>, from PCCL_ERRORS below; a
 * count or a size is returned as a value >= 0 with the same negative codes for failure. Functions that
 * return a pointer return NULL on failure and say in their header which code explains it (errno-free).
 * There are no private result enums and no bare -1/-2 literals: a new failure mode gets a row here.
 *
 * The public pcclResult_t is produced once, at the API edge (api/ and the entry points of op/ and ss/),
 * by perr_result(), whose default per code is the second column; an entry point that knows better (an
 * I/O failure towards a ring neighbour rather than the master) maps that code itself, in one place.
 */
#ifndef PCCL_ERR_H
#define PCCL_ERR_H

#include "pccl.h"

/* X(NAME, default pcclResult_t at the API edge, one-line description) */
#define PCCL_ERRORS(X)                                                                                    \
    X(FAILED, pcclInternalError, "failed (the reason was logged)")                                    \
    X(NOMEM, pcclInternalError, "out of memory")                                                        \
    X(INVALID, pcclInvalidArgument, "invalid argument")                                                 \
    X(IO, pcclRankConnectionLost, "connection failed or closed")                                        \
    X(TIMEOUT, pcclRankConnectionLost, "deadline passed")                                                 \
    X(CANCELLED, pcclRankConnectionLost, "cancelled (abort, leave, shutdown or destroy)")                \
    X(ABORTED, pcclRankConnectionLost, "the master aborted the operation")                               \
    X(PROTOCOL, pcclRankConnectionLost, "the other side broke the protocol")                              \
    X(REFUSED, pcclMasterConnectionFailed, "refused (key proof, identity, or the other side said no)")    \
    X(LOST, pcclMasterConnectionFailed, "the master is gone for good")                                    \
    X(RESTARTED, pcclMasterConnectionFailed, "the master connection moved to a new epoch")                \
    X(SYNTAX, pcclInvalidArgument, "malformed address")                                                  \
    X(UNRESOLVED, pcclInvalidArgument, "the name does not resolve")                                      \
    X(MISMATCH, pcclInvalidUsage, "the master rejected the operation: its members' parameters differ")     \
    X(TOO_FEW_PEERS, pcclTooFewPeers, "too few peers for the operation")                                  \
    X(BUSY, pcclInvalidUsage, "the tag already has an operation in flight")

enum perr_code {
    PERR_OK_ = 0,
#define PERR_ENUM_(name, result, text) PERR_##name,
    PCCL_ERRORS(PERR_ENUM_)
#undef PERR_ENUM_
    PERR_COUNT_
};

/* The description of rc (0: "success"; a code outside the table: "unknown error"). */
const char *perr_str(int rc);
/* rc's default pcclResult_t (0: pcclSuccess; outside the table: pcclInternalError). */
pcclResult_t perr_result(int rc);

#endif
