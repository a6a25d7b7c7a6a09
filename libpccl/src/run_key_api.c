/* run_key_api.c - the run-key extensions of pccl_ext.h (communicator and master). */
#include <stdatomic.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "master_internal.h"
#include "pccl_ext.h"
#include "sec_key.h"

/* A key in memory, or none (NULL, 0); 0 and *out, or -1 (logged). */
static int key_of(const void *key, size_t len, sec_cfg_t *out) {
    char err[256];
    memset(out, 0, sizeof *out);
    if (!key && !len) return 0;
    if (!key || sec_key_from_bytes(key, len, out, err, sizeof err) != 0) {
        PLOG_ERROR("pccl", "run key refused: %s", key ? err : "NULL key");
        return -1;
    }
    return 0;
}

pcclResult_t pcclExtCommSetRunKey(pcclComm_t *c, const void *key, size_t len) {
    if (!c) return pcclInvalidArgument;
    if (atomic_load(&c->connected)) return pcclInvalidUsage;
    sec_cfg_t sec;
    if (key_of(key, len, &sec) != 0) return pcclInvalidArgument;
    c->sec = sec;
    return pcclSuccess;
}

pcclResult_t pcclExtMasterSetRunKey(pcclMasterInstance_t *m, const void *key, size_t len, bool encrypt) {
    if (!m) return pcclInvalidArgument;
    if (atomic_load(&m->running)) return pcclInvalidUsage;
    sec_cfg_t sec;
    if (key_of(key, len, &sec) != 0 || (encrypt && !sec.keyed)) return pcclInvalidArgument;
    sec.encrypt = encrypt;
    return pccl__master_set_security(m, &sec);
}
