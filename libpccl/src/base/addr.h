/*
 * addr.h - socket addresses of every family (internal): the one parser of "HOST:PORT" for the CLI's flags and the
 * library's environment, and conversions between ccoip_socket_address_t (the public type) and sockaddr.
 *
 * Accepted spellings: "1.2.3.4:P", "[v6]:P", "name:P" (resolved with getaddrinfo), and without ":P" (the
 * caller's default port) "1.2.3.4", "[v6]", "v6" and "name". Port 0 is allowed (an ephemeral port for listen
 * addresses). An IPv4-mapped IPv6 address (::ffff:a.b.c.d, what a dual-stack socket reports for an IPv4 peer)
 * is always turned into the IPv4 address, so one peer has one spelling.
 */
#ifndef PCCL_ADDR_H
#define PCCL_ADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/err.h"
#include "ccoip_inet.h"

/* "[ffff:...:ffff]:65535" and a NUL. */
#define ADDR_STRLEN 56

/* Most addresses of one name that are kept (addr_resolve_all). */
#define ADDR_MAX_RESOLVED 16

/**
 * Parses and resolves s into out (for a name, the first IPv4 address getaddrinfo gives, else its first IPv6 one:
 * an address to bind or announce; one to dial is addr_resolve_all's). Without a port, default_port is
 * used, unless it is 0 and require_port is set, which makes a missing port a syntax error.
 * @return 0; -PERR_SYNTAX for a spelling no host or port can have (a usage error); -PERR_UNRESOLVED for a
 *         well-formed host name that does not resolve (a runtime failure: DNS may come back, so a supervisor
 *         should retry). A failure leaves a one-line reason in err.
 */
int addr_parse(const char *s, uint16_t default_port, int require_port, ccoip_socket_address_t *out, char *err,
               size_t errlen);

/* Every address of s (as addr_parse; a port is not required) in the order getaddrinfo gives them, duplicates
 * dropped, into out[0, max): what a dialler tries in turn until one connects, as curl and ssh do. An IP literal
 * is one address. @return how many (at least 1), or as addr_parse. */
int addr_resolve_all(const char *s, uint16_t default_port, ccoip_socket_address_t *out, int max, char *err,
                     size_t errlen);

/* An address other peers dial ("HOST[:PORT]", port 0 when missing): addr_parse, and the any address (0.0.0.0, ::)
 * is refused as -PERR_SYNTAX, since nobody can dial it. @return as addr_parse. */
int addr_parse_advertised(const char *s, ccoip_socket_address_t *out, char *err, size_t errlen);

/* sockaddr of a, in *ss; returns its length. */
socklen_t addr_to_sockaddr(const ccoip_socket_address_t *a, struct sockaddr_storage *ss);
/* Address and port of sa (AF_INET or AF_INET6, v4-mapped made IPv4). @return 0, or -PERR_INVALID for another family. */
int addr_from_sockaddr(const struct sockaddr *sa, ccoip_socket_address_t *out);
/* "1.2.3.4" or "::1" (no port). */
void addr_ip_str(const ccoip_inet_address_t *ip, char out[ADDR_STRLEN]);
/* "1.2.3.4:P" or "[::1]:P". */
void addr_str(const ccoip_socket_address_t *a, char out[ADDR_STRLEN]);
/* 1 when both name the same IP (ports ignored). */
int addr_ip_equal(const ccoip_inet_address_t *a, const ccoip_inet_address_t *b);
/* 1 for 127/8 and ::1. */
int addr_ip_is_loopback(const ccoip_inet_address_t *a);
/* 1 for 0.0.0.0 and ::. */
int addr_ip_is_any(const ccoip_inet_address_t *a);
/* Where a listener on a binds: the any address of either family (0.0.0.0, [::]) is one dual-stack socket on [::]
 * (IPV6_V6ONLY off) serving IPv4 and IPv6, or 0.0.0.0 on a host without IPv6. @return 1 with *v6 = [::]:port and
 * *v4 = 0.0.0.0:port for an any address, else 0 (a listens on itself alone). */
int addr_listen_dual(const ccoip_socket_address_t *a, ccoip_socket_address_t *v6, ccoip_socket_address_t *v4);

#endif /* PCCL_ADDR_H */
