/* addr.c - see addr.h. */
#include "base/addr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_ip4(ccoip_inet_address_t *ip, const void *b) {
    memset(ip, 0, sizeof *ip);
    ip->protocol = inetIPv4;
    memcpy(ip->ipv4.data, b, 4);
}

static void set_ip6(ccoip_inet_address_t *ip, const uint8_t b[16]) {
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(b, mapped, 12) == 0) {
        set_ip4(ip, b + 12);
        return;
    }
    memset(ip, 0, sizeof *ip);
    ip->protocol = inetIPv6;
    memcpy(ip->ipv6.data, b, 16);
}

/* RFC 1123 host name: labels of letters, digits and '-', not starting or ending with '-'. */
static int valid_host_name(const char *h) {
    size_t label = 0;
    if (!*h || strlen(h) > 253) return 0;
    for (const char *p = h; *p; p++) {
        if (*p == '.') {
            if (label == 0 || p[-1] == '-') return 0;
            label = 0;
        } else if (isalnum((unsigned char)*p) || (*p == '-' && label > 0)) {
            if (++label > 63) return 0;
        } else {
            return 0;
        }
    }
    if (label == 0 || h[strlen(h) - 1] == '-') return 0;
    /* Digits and dots only is a malformed IPv4 address, not a name. */
    return strspn(h, "0123456789.") != strlen(h);
}

/* @return 0, or -PERR_SYNTAX. */
static int parse_port(const char *s, uint16_t *out) {
    if (!*s || strlen(s) > 5) return -PERR_SYNTAX;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p)) return -PERR_SYNTAX;
    long v = strtol(s, NULL, 10);
    if (v > 65535) return -PERR_SYNTAX;
    *out = (uint16_t)v;
    return 0;
}

/* The addresses of host in the order getaddrinfo gives them (RFC 6724), duplicates dropped, at most max.
 * @return how many (at least 1), or -PERR_UNRESOLVED. */
static int resolve(const char *host, ccoip_inet_address_t *ips, int max, char *err, size_t errlen) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
        return -PERR_UNRESOLVED;
    }
    int n = 0;
    for (struct addrinfo *r = res; r && n < max; r = r->ai_next) {
        ccoip_inet_address_t ip;
        if (r->ai_family == AF_INET) set_ip4(&ip, &((struct sockaddr_in *)r->ai_addr)->sin_addr);
        else if (r->ai_family == AF_INET6) set_ip6(&ip, ((struct sockaddr_in6 *)r->ai_addr)->sin6_addr.s6_addr);
        else continue;
        int seen = 0;
        for (int i = 0; i < n && !seen; i++) seen = addr_ip_equal(&ips[i], &ip);
        if (!seen) ips[n++] = ip;
    }
    freeaddrinfo(res);
    if (!n) {
        snprintf(err, errlen, "cannot resolve '%s': no IPv4 or IPv6 address", host);
        return -PERR_UNRESOLVED;
    }
    return n;
}

/* addr_parse with every address of a name (getaddrinfo's order) in out[0, max). @return how many, or as addr_parse. */
static int parse_all(const char *s, uint16_t default_port, int require_port, ccoip_socket_address_t *out, int max,
                     char *err, size_t errlen) {
    char host[256];
    const char *port = NULL;
    int bracketed = 0;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || (close[1] && close[1] != ':')) goto syntax;
        if ((size_t)(close - s - 1) >= sizeof host) goto syntax;
        memcpy(host, s + 1, (size_t)(close - s - 1));
        host[close - s - 1] = 0;
        if (close[1] == ':') port = close + 2;
        bracketed = 1;
    } else {
        const char *colon = strchr(s, ':');
        if (colon && strchr(colon + 1, ':')) {
            /* Two colons and no brackets: a bare IPv6 address, which cannot carry a port. */
            if (strlen(s) >= sizeof host) goto syntax;
            strcpy(host, s);
            bracketed = 1;
        } else {
            size_t hl = colon ? (size_t)(colon - s) : strlen(s);
            if (hl >= sizeof host) goto syntax;
            memcpy(host, s, hl);
            host[hl] = 0;
            if (colon) port = colon + 1;
        }
    }
    ccoip_socket_address_t a;
    memset(&a, 0, sizeof a);
    if (port) {
        if (parse_port(port, &a.port) != 0) goto syntax;
    } else {
        if (require_port) goto syntax;
        a.port = default_port;
    }
    uint8_t b[16];
    if (bracketed) {
        if (inet_pton(AF_INET6, host, b) != 1) goto syntax;
        set_ip6(&a.inet, b);
    } else if (inet_pton(AF_INET, host, b) == 1) {
        set_ip4(&a.inet, b);
    } else {
        if (!valid_host_name(host)) goto syntax;
        ccoip_inet_address_t ips[ADDR_MAX_RESOLVED];
        int n = resolve(host, ips, max < ADDR_MAX_RESOLVED ? max : ADDR_MAX_RESOLVED, err, errlen);
        for (int i = 0; i < n; i++) {
            out[i] = a;
            out[i].inet = ips[i];
        }
        return n;
    }
    *out = a;
    return 1;
syntax:
    snprintf(err, errlen, "bad address '%s' (want HOST:PORT, IPV4:PORT or [IPV6]:PORT)", s);
    return -PERR_SYNTAX;
}

int addr_parse(const char *s, uint16_t default_port, int require_port, ccoip_socket_address_t *out, char *err,
               size_t errlen) {
    ccoip_socket_address_t all[ADDR_MAX_RESOLVED];
    int n = parse_all(s, default_port, require_port, all, ADDR_MAX_RESOLVED, err, errlen);
    if (n < 0) return n;
    /* One address for a name: its first IPv4 one, which a dual-stack listener (0.0.0.0, [::]) takes as well as
     * an IPv4-only one, else its first IPv6 one. Dialling every address is addr_resolve_all's. */
    int pick = 0;
    while (pick < n && all[pick].inet.protocol != inetIPv4) pick++;
    *out = all[pick < n ? pick : 0];
    return 0;
}

int addr_resolve_all(const char *s, uint16_t default_port, ccoip_socket_address_t *out, int max, char *err,
                     size_t errlen) {
    return parse_all(s, default_port, 0, out, max, err, errlen);
}

int addr_parse_advertised(const char *s, ccoip_socket_address_t *out, char *err, size_t errlen) {
    int rc = addr_parse(s, 0, 0, out, err, errlen);
    if (rc == 0 && addr_ip_is_any(&out->inet)) {
        snprintf(err, errlen, "'%s' is the any address, which other peers cannot dial", s);
        return -PERR_SYNTAX;
    }
    return rc;
}

socklen_t addr_to_sockaddr(const ccoip_socket_address_t *a, struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof *ss);
    if (a->inet.protocol == inetIPv6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(a->port);
        memcpy(s6->sin6_addr.s6_addr, a->inet.ipv6.data, 16);
        return sizeof *s6;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons(a->port);
    memcpy(&s4->sin_addr.s_addr, a->inet.ipv4.data, 4);
    return sizeof *s4;
}

int addr_from_sockaddr(const struct sockaddr *sa, ccoip_socket_address_t *out) {
    memset(out, 0, sizeof *out);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        set_ip4(&out->inet, &s4->sin_addr.s_addr);
        out->port = ntohs(s4->sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        set_ip6(&out->inet, s6->sin6_addr.s6_addr);
        out->port = ntohs(s6->sin6_port);
        return 0;
    }
    return -PERR_INVALID;
}

void addr_ip_str(const ccoip_inet_address_t *ip, char out[ADDR_STRLEN]) {
    if (ip->protocol == inetIPv6) inet_ntop(AF_INET6, ip->ipv6.data, out, ADDR_STRLEN);
    else inet_ntop(AF_INET, ip->ipv4.data, out, ADDR_STRLEN);
}

void addr_str(const ccoip_socket_address_t *a, char out[ADDR_STRLEN]) {
    char ip[ADDR_STRLEN];
    addr_ip_str(&a->inet, ip);
    if (a->inet.protocol == inetIPv6) snprintf(out, ADDR_STRLEN, "[%.46s]:%u", ip, a->port);
    else snprintf(out, ADDR_STRLEN, "%.46s:%u", ip, a->port);
}

int addr_ip_equal(const ccoip_inet_address_t *a, const ccoip_inet_address_t *b) {
    if (a->protocol != b->protocol) return 0;
    return a->protocol == inetIPv6 ? memcmp(a->ipv6.data, b->ipv6.data, 16) == 0
                                   : memcmp(a->ipv4.data, b->ipv4.data, 4) == 0;
}

int addr_ip_is_loopback(const ccoip_inet_address_t *a) {
    if (a->protocol == inetIPv6) return IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)a->ipv6.data);
    return a->ipv4.data[0] == 127;
}

int addr_ip_is_any(const ccoip_inet_address_t *a) {
    static const uint8_t zero[16];
    return a->protocol == inetIPv6 ? memcmp(a->ipv6.data, zero, 16) == 0 : memcmp(a->ipv4.data, zero, 4) == 0;
}

int addr_listen_dual(const ccoip_socket_address_t *a, ccoip_socket_address_t *v6, ccoip_socket_address_t *v4) {
    if (!addr_ip_is_any(&a->inet)) return 0;
    memset(v6, 0, sizeof *v6);
    memset(v4, 0, sizeof *v4);
    v6->inet.protocol = inetIPv6;
    v4->inet.protocol = inetIPv4;
    v6->port = v4->port = a->port;
    return 1;
}
