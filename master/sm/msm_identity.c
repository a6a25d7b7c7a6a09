/*
 * msm_identity.c - who a peer is (docs/protocol.md "Identity"). Every control connection starts with the
 * master's CHALLENGE (a fresh nonce from the server); the HELLO or RESUME that follows signs it with the
 * peer's Ed25519 key, and the peer's uuid is derived from that key. So nobody can register, resume or
 * take over a uuid without its key, in open and keyed runs alike; a replayed HELLO signs an old nonce.
 * With an allow-list (pccl master --allow-keys) only listed keys register at all.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sm/msm_internal.h"

static msm_peer_t *find_registered_uuid(msm_t *m, const uint8_t uuid[16], uint64_t except) {
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].hello && m->peers[i].conn != except && memcmp(m->peers[i].uuid, uuid, 16) == 0)
            return &m->peers[i];
    return NULL;
}

int msm_check_identity(msm_t *m, msm_peer_t **pp, uint16_t type, const wire_identity_t *id, const uint8_t *uuid) {
    msm_peer_t *p = *pp;
    const char *what = wire_type_name(type);
    if (ident_verify(id->pubkey, p->nonce, id->digest, id->sig) != 0) {
        msm_kick(m, p, "%s signature does not verify: the peer does not hold the key it claims, or replayed an "
                 "old message", what);
        return -PERR_REFUSED;
    }
    uint8_t derived[16];
    ident_uuid(id->pubkey, derived);
    if (uuid && memcmp(uuid, derived, 16) != 0) {
        msm_kick(m, p, "%s claims a uuid that is not its public key's", what);
        return -PERR_REFUSED;
    }
    if (m->allow_on && !ident_keys_has(&m->allow, id->pubkey)) {
        char pk[IDENT_PK_STRLEN];
        ident_pk_str(id->pubkey, pk);
        msm_kick(m, p, "public key %s is not in the master's allow-keys list", pk);
        return -PERR_REFUSED;
    }
    /* The signature proves this is the uuid's owner: a registered connection with the same uuid is its
     * own stale one (a half-open connection, a restarted process), never someone else's. */
    uint64_t conn = p->conn;
    msm_peer_t *old = find_registered_uuid(m, derived, conn);
    if (old) {
        char name[MSM_NAME_MAX];
        PLOG_WARN("master", "%s: a new connection proved its identity; it replaces this one",
                  msm_peer_name(old, name));
        msm_kick(m, old, "replaced by a newer connection of the same peer identity");
        p = msm_find(m, conn); /* the table moved */
        if (!p) return -PERR_REFUSED;
        *pp = p;
    }
    memcpy(p->uuid, derived, 16);
    memcpy(p->pubkey, id->pubkey, 32);
    memcpy(p->name, id->name, sizeof p->name);
    p->name[sizeof p->name - 1] = 0;
    return 0;
}

int msm_set_allowed_keys(msm_t *m, const uint8_t (*keys)[32], int n) {
    if (!keys) {
        ident_keys_free(&m->allow);
        m->allow_on = 0;
        return 0;
    }
    ident_keys_t k = {0};
    if (n > 0) {
        k.pk = malloc((size_t)n * 32);
        if (!k.pk) return -PERR_NOMEM;
        memcpy(k.pk, keys, (size_t)n * 32);
        k.n = n;
    }
    ident_keys_free(&m->allow);
    m->allow = k;
    m->allow_on = 1;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (!p->hello || ident_keys_has(&m->allow, p->pubkey)) continue;
        msm_kick(m, p, "its public key was removed from the master's allow-keys list");
        i = -1; /* the removal shifts the table and may end operations: rescan */
    }
    msm_finish_leaves(m);
    return 0;
}
