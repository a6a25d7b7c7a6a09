/* master_run_key.c - the master's run-key extension of pccl_ext.h. */
#include <stdatomic.h>

#include "pccl_ext.h"
#include "sec/sec.h"
#include "server/master_internal.h"

pcclResult_t pcclExtMasterSetRunKey(pcclMasterInstance_t *m, const void *key, size_t len, bool encrypt) {
    if (!m) return pcclInvalidArgument;
    if (atomic_load(&m->running)) return pcclInvalidUsage;
    sec_cfg_t sec;
    if (sec_key_from_api(key, len, &sec) != 0 || (encrypt && !sec.keyed)) return pcclInvalidArgument;
    sec.encrypt = encrypt;
    return pccl__master_set_security(m, &sec) == 0 ? pcclSuccess : pcclInvalidArgument;
}
