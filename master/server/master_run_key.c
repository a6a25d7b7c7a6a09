/* master_run_key.c - the master's run key: pccl_ext.h's call, and the key file of `pccl master`. */
#include <stdatomic.h>
#include <stdio.h>

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

int pccl__master_set_key_file(pcclMasterInstance_t *m, const char *path, int encrypt, char *err, size_t errlen) {
    sec_cfg_t sec = {0};
    int rc = path ? sec_key_from_file(path, &sec, err, errlen) : sec_key_from_env(&sec, err, errlen);
    if (rc < 0) return rc;
    if (encrypt && !sec.keyed) {
        snprintf(err, errlen, "--encrypt needs a run key (--key-file FILE)");
        return -PERR_MISUSE;
    }
    sec.encrypt = encrypt;
    if (pccl__master_set_security(m, &sec) != 0) {
        snprintf(err, errlen, "cannot set the run key");
        return -PERR_FAILED;
    }
    return 0;
}
