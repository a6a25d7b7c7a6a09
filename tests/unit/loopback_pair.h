/* loopback_pair.h - a connected TCP pair on 127.0.0.1 for unit tests. */
#ifndef PCCL_TEST_LOOPBACK_PAIR_H
#define PCCL_TEST_LOOPBACK_PAIR_H

#include <sys/socket.h>
#include <unistd.h>

#include "base/net.h"

/* Fills the listening, connecting and accepted sockets; returns 0, or -1 with all of them closed. */
static inline int loopback_pair(int *ls, int *cfd, int *afd) {
    uint16_t port = 0;
    ccoip_socket_address_t to = {.inet = {.protocol = inetIPv4, .ipv4.data = {127, 0, 0, 1}}};
    *cfd = *afd = -1;
    if ((*ls = net_listen_any(0, &port)) < 0) return -1;
    to.port = port;
    if ((*cfd = net_connect(&to, 2000)) >= 0 && (*afd = accept(*ls, NULL, NULL)) >= 0) return 0;
    if (*cfd >= 0) close(*cfd);
    close(*ls);
    return -1;
}

#endif
