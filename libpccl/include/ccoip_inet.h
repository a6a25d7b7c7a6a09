/*
 * ccoip_inet.h - socket address types of the PCCL C API (C99).
 *
 * Addresses are stored in network order: ipv4.data[0] is the first octet
 * ("127" of 127.0.0.1); port is a host-order number. Layout and values are
 * PCCL 1.0's (tests/unit/test_abi.c pins them): sizeof(ccoip_socket_address_t)
 * is 28, port at offset 24.
 */
#ifndef CCOIP_INET_H
#define CCOIP_INET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ccoip_inet_protocol_t {
    inetIPv4,
    inetIPv6
} ccoip_inet_protocol_t;

typedef struct ccoip_ipv4_address_t {
    uint8_t data[4];
} ccoip_ipv4_address_t;

typedef struct ccoip_ipv6_address_t {
    uint8_t data[16];
} ccoip_ipv6_address_t;

/* Both fields exist side by side (24 bytes, as in PCCL 1.0); protocol says which one is meant. */
typedef struct ccoip_inet_address_t {
    ccoip_inet_protocol_t protocol;
    ccoip_ipv4_address_t ipv4;
    ccoip_ipv6_address_t ipv6;
} ccoip_inet_address_t;

typedef struct ccoip_socket_address_t {
    ccoip_inet_address_t inet;
    uint16_t port;
} ccoip_socket_address_t;

#ifdef __cplusplus
}
#endif

#endif /* CCOIP_INET_H */
