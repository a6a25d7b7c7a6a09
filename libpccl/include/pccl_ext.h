/*
 * pccl_ext.h - pccl's extensions to the PCCL 1.0 API. Extra functions only:
 * pccl.h keeps PCCL 1.0's names, values and layouts (tests/unit/test_abi.c).
 *
 * Run keys in memory. A keyed run admits only processes that prove its key on
 * every connection (docs/security.md); PCCL_KEY_FILE gives the key from a
 * file, these calls from memory (e.g. a secret manager), replacing the
 * environment for that one object. The key is at least 32 secret bytes; a
 * trailing newline is not part of it, so the bytes of a key file work as they
 * are. Only a digest is kept; the caller may wipe its copy afterwards.
 */
#ifndef PCCL_EXT_H
#define PCCL_EXT_H

#include "pccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Sets the run key of a communicator; between pcclCreateCommunicator and pcclConnect.
 * key NULL with len 0 makes it join open runs only.
 * @return pcclSuccess, pcclInvalidArgument (fewer than 32 bytes), or pcclInvalidUsage (already connected).
 */
PCCL_EXPORT pcclResult_t pcclExtCommSetRunKey(pcclComm_t *communicator, const void *key, size_t len);

/**
 * Sets the run key of a master and whether every connection of its run is encrypted; between
 * pcclCreateMaster and pcclRunMaster. key NULL with len 0 makes the run open (encrypt must be false).
 * @return pcclSuccess, pcclInvalidArgument (fewer than 32 bytes, or encryption without a key), or
 *         pcclInvalidUsage (already running).
 */
PCCL_EXPORT pcclResult_t pcclExtMasterSetRunKey(pcclMasterInstance_t *master, const void *key, size_t len,
                                                bool encrypt);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_EXT_H */
