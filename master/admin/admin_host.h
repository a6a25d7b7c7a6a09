/*
 * admin_host.h - which Host headers the admin port answers (DNS-rebinding protection): a web page an operator
 * opens can make the browser send requests to a name the attacker re-points at the admin port, but the browser
 * still sends the attacker's name as Host. The port answers only loopback names, the address it listens on
 * (any IP literal when it listens on a wildcard address: a literal cannot be re-pointed) and the names an
 * operator gave (pccl master --admin-host NAME).
 */
#ifndef PCCL_ADMIN_HOST_H
#define PCCL_ADMIN_HOST_H

#include "base/base.h"
#include "ccoip_inet.h"

#define ADMIN_HOSTS_MAX 16
#define ADMIN_HOST_NAME_MAX 253 /* a DNS name */

typedef struct admin_host_rules {
    ccoip_inet_address_t listen; /* the admin port's address; 0.0.0.0 or :: allow every IP literal */
    int nnames;
    char names[ADMIN_HOSTS_MAX][ADMIN_HOST_NAME_MAX + 1]; /* lower case, without a trailing dot */
} admin_host_rules_t;

/* Adds an allowed name (case-insensitive; a trailing dot ignored). @return 0, or -PERR_INVALID when the name is
 * empty, too long, holds characters a host name cannot, or ADMIN_HOSTS_MAX names are already set. */
int admin_host_add(admin_host_rules_t *r, const char *name);
/* Whether a request with this Host header value ("name", "name:port", "1.2.3.4:port", "[::1]:port") is answered.
 * NULL (no Host header: HTTP/1.0 clients; browsers always send one) is answered. */
int admin_host_allowed(const admin_host_rules_t *r, const char *host);

#endif
