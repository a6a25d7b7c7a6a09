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

/*
 * Peer identity and name. Every peer proves an Ed25519 key to the master when it registers; its uuid is
 * derived from the public key, so nobody else can claim it (docs/security.md). Without these calls a
 * communicator uses PCCL_IDENTITY_FILE, else a key pair made when it was created (a new uuid per process),
 * and is named by PCCL_NAME, else the host name. All of these are for the time between
 * pcclCreateCommunicator and pcclConnect.
 */

/**
 * Names this peer in the master's status, logs and `pccl kick`: at most 63 printable ASCII bytes (may be empty).
 * @return pcclSuccess, pcclInvalidArgument (NULL, too long, or a non-printable byte), or pcclInvalidUsage.
 */
PCCL_EXPORT pcclResult_t pcclExtCommSetName(pcclComm_t *communicator, const char *name);

/**
 * Uses the identity in the file at path, creating it (mode 0600) when missing, so that a restarted peer keeps
 * its uuid. A file that group or others may access, another user's file or a malformed one is refused.
 * @return pcclSuccess, pcclInvalidArgument (refused; the reason is logged), or pcclInvalidUsage.
 */
PCCL_EXPORT pcclResult_t pcclExtCommSetIdentityFile(pcclComm_t *communicator, const char *path);

/**
 * Uses the identity of a 32-byte Ed25519 seed held in memory (e.g. from a secret manager).
 * @return pcclSuccess, pcclInvalidArgument (len is not 32), or pcclInvalidUsage.
 */
PCCL_EXPORT pcclResult_t pcclExtCommSetIdentitySeed(pcclComm_t *communicator, const void *seed, size_t len);

/**
 * This peer's uuid and public key (base64, 44 characters and a NUL: the line an allow-keys file lists);
 * either may be NULL.
 */
PCCL_EXPORT pcclResult_t pcclExtCommGetIdentity(const pcclComm_t *communicator, uint8_t uuid[16],
                                                char public_key[45]);

/**
 * Names the master as "HOST[:PORT]" (a host name, an IPv4 address or a bracketed IPv6 one; without a port,
 * params.master_address's), between pcclCreateCommunicator and pcclConnect. pcclConnect and every reconnect
 * resolve it then and try each address getaddrinfo gives, in its order, until one connects (as curl and ssh
 * do), so "localhost:PORT" reaches a master listening on [::1] or on 127.0.0.1 alike; params.master_address
 * is then only the default port. A name that does not resolve is resolved again at each attempt.
 * @return pcclSuccess, pcclInvalidArgument (NULL, or a spelling no host can have), or pcclInvalidUsage.
 */
PCCL_EXPORT pcclResult_t pcclExtCommSetMasterHost(pcclComm_t *communicator, const char *host_port);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_EXT_H */
