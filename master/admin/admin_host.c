/* admin_host.c - the admin port's Host header rules (see admin_host.h). */
#include "admin/admin_host.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

/* name[0..len) lower-cased into out[ADMIN_HOST_NAME_MAX + 1] without a trailing dot. @return 0, or -PERR_INVALID
 * if not a host name. */
static int normalize(const char *name, size_t len, char *out) {
    if (len && name[len - 1] == '.') len--;
    if (len == 0 || len > ADMIN_HOST_NAME_MAX) return -PERR_INVALID;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && c != '-' && c != '.' && c != '_') return -PERR_INVALID;
        out[i] = (char)tolower(c);
    }
    out[len] = 0;
    return 0;
}

int admin_host_add(admin_host_rules_t *r, const char *name) {
    if (r->nnames == ADMIN_HOSTS_MAX) return -PERR_INVALID;
    int rc = normalize(name, strlen(name), r->names[r->nnames]);
    if (rc != 0) return rc;
    r->nnames++;
    return 0;
}

static int is_any(const ccoip_inet_address_t *a) {
    static const uint8_t zero[16];
    return a->protocol == inetIPv4 ? memcmp(a->ipv4.data, zero, 4) == 0 : memcmp(a->ipv6.data, zero, 16) == 0;
}

int admin_host_allowed(const admin_host_rules_t *r, const char *host) {
    if (!host) return 1;
    char lit[64];
    uint8_t ip[16];
    if (host[0] == '[') { /* [IPv6]:port */
        const char *end = strchr(host, ']');
        size_t len = end ? (size_t)(end - host - 1) : 0;
        if (!end || len == 0 || len >= sizeof lit || (end[1] && end[1] != ':')) return 0;
        memcpy(lit, host + 1, len);
        lit[len] = 0;
        if (inet_pton(AF_INET6, lit, ip) != 1) return 0;
        static const uint8_t loop6[16] = {[15] = 1};
        if (memcmp(ip, loop6, 16) == 0 || is_any(&r->listen)) return 1;
        return r->listen.protocol == inetIPv6 && memcmp(r->listen.ipv6.data, ip, 16) == 0;
    }
    size_t len = strcspn(host, ":");
    if (host[len] == ':' && strchr(host + len + 1, ':')) return 0; /* an IPv6 literal needs brackets */
    char name[ADMIN_HOST_NAME_MAX + 1];
    if (normalize(host, len, name) != 0) return 0;
    if (inet_pton(AF_INET, name, ip) == 1) {
        if (ip[0] == 127 || is_any(&r->listen)) return 1;
        return r->listen.protocol == inetIPv4 && memcmp(r->listen.ipv4.data, ip, 4) == 0;
    }
    if (strcmp(name, "localhost") == 0) return 1;
    for (int i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i], name) == 0) return 1;
    return 0;
}
