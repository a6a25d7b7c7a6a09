/* master_allow.c - the master's allow-keys file (pccl master --allow-keys): loaded before the run, read again
 * on the loop thread when the operator asks (SIGHUP), handed to the state machine (msm_set_allowed_keys). */
#include <stdlib.h>
#include <string.h>

#include "sec/sec.h"
#include "base/base.h"
#include "server/master_internal.h"

/* Loads the file and hands its keys to the state machine. @return 0, or ident_keys_load's code or
 * msm_set_allowed_keys's with a reason in err (the old list stays). */
static int load(pcclMasterInstance_t *m, char *err, size_t errlen) {
    static const uint8_t none[1][32];
    ident_keys_t k = {0};
    int rc = ident_keys_load(m->allow_keys_path, &k, err, errlen);
    if (rc != 0) return rc;
    rc = msm_set_allowed_keys(m->sm, k.n ? (const uint8_t (*)[32])k.pk : none, k.n);
    if (rc == 0) PLOG_INFO("master", "allow-keys '%s': %d public keys admitted", m->allow_keys_path, k.n);
    else snprintf(err, errlen, "out of memory loading '%s'", m->allow_keys_path);
    ident_keys_free(&k);
    return rc;
}

static void on_reload(uv_async_t *a) {
    pcclMasterInstance_t *m = a->data;
    char err[320];
    msm_set_time(m->sm, uv_now(&m->loop));
    if (load(m, err, sizeof err) != 0) PLOG_ERROR("master", "allow-keys not reloaded, the old list stays: %s", err);
}

int pccl__master_set_allow_keys(pcclMasterInstance_t *m, const char *path, char *err, size_t errlen) {
    if (!m || !path || atomic_load(&m->running) || m->allow_keys_path) {
        snprintf(err, errlen, "allow-keys: set once, before the master runs");
        return -PERR_INVALID;
    }
    if (!(m->allow_keys_path = strdup(path))) {
        snprintf(err, errlen, "out of memory");
        return -PERR_NOMEM;
    }
    int rc = load(m, err, errlen);
    if (rc != 0) {
        free(m->allow_keys_path);
        m->allow_keys_path = NULL;
        return rc;
    }
    uv_async_init(&m->loop, &m->allow_reload, on_reload);
    m->allow_reload.data = m;
    return 0;
}

void pccl__master_reload_allow_keys(pcclMasterInstance_t *m) {
    if (m && m->allow_keys_path) uv_async_send(&m->allow_reload);
}

void pccl__allow_on_stop(pcclMasterInstance_t *m) {
    if (m->allow_keys_path && !uv_is_closing((uv_handle_t *)&m->allow_reload))
        uv_close((uv_handle_t *)&m->allow_reload, NULL);
}
