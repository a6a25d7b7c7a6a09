/*
 * comm_identity.c - a communicator's identity (identity.h): its key pair and name, the CHALLENGE that
 * opens every control connection and the signed HELLO or RESUME that answers it (docs/protocol.md
 * "Identity"), and the identity extensions of pccl_ext.h.
 */
#include <errno.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "base/base.h"
#include "pccl_ext.h"

static void adopt(pcclComm_t *c, const ident_t *id) {
    c->ident = *id;
    ident_uuid(id->pk, c->uuid);
    const uint8_t *u = c->uuid;
    snprintf(c->log_name, sizeof c->log_name, "peer:%02x%02x%02x%02x", u[0], u[1], u[2], u[3]);
}

/* path's identity (created when missing); -1 logged. */
static int load_file(pcclComm_t *c, const char *path, const char *what) {
    ident_t id;
    char err[320];
    int created;
    int rc = ident_load_file(path, &id, &created, err, sizeof err);
    if (rc < 0) {
        PLOG_ERROR("pccl", "%s: %s", what, err);
        return -PERR_FAILED;
    }
    adopt(c, &id);
    if (created) PLOG_INFO(c->log_name, "created identity file '%s'", path);
    sodium_memzero(&id, sizeof id);
    return 0;
}

int comm_identity_init(pcclComm_t *c) {
    ident_default_name(c->name);
    const char *path = getenv("PCCL_IDENTITY_FILE");
    if (path && *path) return load_file(c, path, "PCCL_IDENTITY_FILE");
    ident_t id;
    if (ident_generate(&id) != 0) {
        PLOG_ERROR("pccl", "cannot make an identity key pair (libsodium failed to initialize)");
        return -PERR_FAILED;
    }
    adopt(c, &id);
    sodium_memzero(&id, sizeof id);
    return 0;
}

int comm_read_challenge(pcclComm_t *c, int fd, sec_link_t *link, uint64_t deadline_ms) {
    wire_msg_t m;
    char err[160];
    uint64_t t0 = net_now_ms();
    errno = 0;
    int rc = comm_master_recv(c, fd, link, deadline_ms, &m, err, sizeof err);
    if (rc == -PERR_CANCELLED) return rc;
    if (rc != 0) {
        /* Silence, or a close at a keyed master's handshake deadline: it waits for a handshake this peer
         * cannot start (or speaks another protocol). An earlier close: a master that is restarting or
         * whose limits on strangers closed it, worth another try. */
        int silent = rc == -PERR_TIMEOUT || (!c->sec.keyed && net_now_ms() - t0 + 500 >= SEC_HS_TIMEOUT_MS);
        if (silent)
            PLOG_ERROR(c->log_name, "the master sent no challenge (%s)%s", err,
                       c->sec.keyed ? "" : ": this run requires a run key (--key-file, PCCL_KEY_FILE), or the master "
                                           "does not speak protocol version " "6");
        else
            PLOG_INFO(c->log_name, "the master closed the connection before its challenge (%s)", err);
        errno = silent ? ETIME : ECONNRESET;
        return silent ? -PERR_TIMEOUT : -PERR_IO;
    }
    rc = -PERR_REFUSED;
    if (m.type == M2C_KICK) {
        PLOG_ERROR(c->log_name, "the master refused the connection: %s", m.u.kick.reason);
    } else if (m.type != M2C_CHALLENGE) {
        PLOG_ERROR(c->log_name, "the master opened the connection with %s, not CHALLENGE (protocol version %d "
                   "expected)", wire_type_name(m.type), WIRE_VERSION);
    } else {
        memcpy(c->master_nonce, m.u.challenge.nonce, sizeof c->master_nonce);
        rc = 0;
    }
    wire_msg_free(&m);
    return rc;
}

int comm_send_signed(pcclComm_t *c, int fd, sec_link_t *link, wire_msg_t *m) {
    wire_identity_t *id = m->type == C2M_HELLO ? &m->u.hello.id : &m->u.resume.id;
    memcpy(id->pubkey, c->ident.pk, sizeof id->pubkey);
    snprintf(id->name, sizeof id->name, "%s", c->name);
    wbuf_t b = {0};
    int rc = ident_encode_signed(&c->ident, c->master_nonce, m, &b);
    if (rc == 0) rc = link_send_all(link, fd, b.data, b.len);
    wbuf_free(&b);
    return rc;
}

pcclResult_t pcclExtCommSetName(pcclComm_t *c, const char *name) {
    if (!c || !name || !ident_name_valid(name)) return pcclInvalidArgument;
    if (comm_state(c) >= PEER_REGISTERED) return pcclInvalidUsage;
    snprintf(c->name, sizeof c->name, "%s", name);
    return pcclSuccess;
}

pcclResult_t pcclExtCommSetIdentityFile(pcclComm_t *c, const char *path) {
    if (!c || !path || !*path) return pcclInvalidArgument;
    if (comm_state(c) >= PEER_REGISTERED) return pcclInvalidUsage;
    return load_file(c, path, "identity") == 0 ? pcclSuccess : pcclInvalidArgument;
}

pcclResult_t pcclExtCommSetIdentitySeed(pcclComm_t *c, const void *seed, size_t len) {
    if (!c || !seed || len != 32) return pcclInvalidArgument;
    if (comm_state(c) >= PEER_REGISTERED) return pcclInvalidUsage;
    ident_t id;
    if (ident_from_seed(&id, seed) != 0) return pcclInternalError;
    adopt(c, &id);
    sodium_memzero(&id, sizeof id);
    return pcclSuccess;
}

pcclResult_t pcclExtCommGetIdentity(const pcclComm_t *c, uint8_t uuid[16], char public_key[45]) {
    if (!c) return pcclInvalidArgument;
    if (uuid) comm_uuid((pcclComm_t *)c, uuid);
    if (public_key) ident_pk_str(c->ident.pk, public_key);
    return pcclSuccess;
}
