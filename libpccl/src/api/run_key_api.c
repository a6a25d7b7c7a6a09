/* run_key_api.c - the communicator's run-key extension of pccl_ext.h (the master's: server/master_run_key.c). */
#include <stdatomic.h>

#include "api/api.h"
#include "pccl_ext.h"
#include "sec/sec.h"

pcclResult_t pcclExtCommSetRunKey(pcclComm_t *c, const void *key, size_t len) {
    if (!c) return pcclInvalidArgument;
    if (comm_state(c) >= PEER_REGISTERED) return pcclInvalidUsage;
    sec_cfg_t sec;
    if (sec_key_from_api(key, len, &sec) != 0) return pcclInvalidArgument;
    c->sec = sec;
    return pcclSuccess;
}
