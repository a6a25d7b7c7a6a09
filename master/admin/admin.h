/*
 * admin.h - the master's admin port: HTTP/1.1 + JSON served by libmicrohttpd on
 * its own thread. This module knows nothing about the state machine: the loop
 * thread publishes immutable snapshots (strings) and drains operator commands
 * (kick, shutdown) that HTTP handlers queue; handlers never touch master state,
 * and the loop never waits on HTTP clients.
 */
#ifndef PCCL_ADMIN_H
#define PCCL_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "admin/admin_host.h"
#include "ccoip_inet.h"

typedef struct admin_server admin_server_t;

typedef enum { ADMIN_CMD_KICK = 1, ADMIN_CMD_SHUTDOWN = 2 } admin_cmd_type_t;

typedef struct admin_cmd {
    admin_cmd_type_t type;
    uint8_t uuid[16]; /* ADMIN_CMD_KICK */
    char client[64];  /* the requesting client's address, for the master's log */
    int keep_run;     /* ADMIN_CMD_SHUTDOWN: the peers wait for a restarted master (?keep_run=1) */
} admin_cmd_t;

/* Called from the HTTP thread after a command was queued (e.g. wraps uv_async_send). */
typedef void (*admin_notify_fn)(void *ctx);

/*
 * Binds ip:port (IPv4, network order; port 0 = any) and starts serving.
 * token: bearer token for POST endpoints, NULL or "" = every POST is refused (403).
 * hosts: the Host header rules (admin_host.h; its listen address is set from addr), NULL = loopback names and
 * addr only. A request with any other Host is answered 421 Misdirected Request.
 * Returns NULL with a message in err on failure.
 */
admin_server_t *admin_server_start(const ccoip_socket_address_t *addr, const char *token,
                                   const admin_host_rules_t *hosts, admin_notify_fn notify, void *ctx, char *err,
                                   size_t errlen);
/* The bound port. */
uint16_t admin_server_port(const admin_server_t *s);
/*
 * Replaces the published snapshot; takes ownership of every pointer (malloc'd).
 * uuids: n known peer uuids (16 bytes each), so a kick of an unknown peer is a 404.
 */
void admin_server_publish(admin_server_t *s, char *status_json, char *topology_json, char *metrics_text,
                          uint8_t *uuids, int n);
/* Pops the oldest queued command into out; returns 1, or 0 when the queue is empty. */
int admin_server_take(admin_server_t *s, admin_cmd_t *out);
/* Stops serving and joins the HTTP thread (in-flight requests finish); idempotent. */
void admin_server_stop(admin_server_t *s);
void admin_server_free(admin_server_t *s);

/* Lower-case hex of a 16-byte uuid into out[33]. */
void admin_uuid_hex(const uint8_t uuid[16], char out[33]);

#endif
