/*
 * raw_hello.c - the stranger of test_vote_timeout.sh: it answers the master's CHALLENGE with a signed HELLO
 * of its own identity (a real registration), then sends only heartbeats, every 500 ms, and never wires its
 * ring. Usage: raw_hello PORT STOPFILE SECONDS. Prints "registered" after the WELCOME, then, when STOPFILE
 * exists or SECONDS passed, "still connected" if the master kept the connection. Exit 0, 1 if refused or cut.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sec/identity.h"
#include "base/log.h"
#include "base/net.h"
#include "sec/sec_link.h"
#include "base/wire.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: raw_hello PORT STOPFILE SECONDS\n");
        return 2;
    }
    pccl_log_set_level(PCCL_LOG_ERROR);
    ccoip_socket_address_t to = {.inet = {.protocol = inetIPv4, .ipv4.data = {127, 0, 0, 1}},
                                 .port = (uint16_t)atoi(argv[1])};
    int fd = net_connect(&to, 5000);
    ident_t id;
    wire_msg_t c, w;
    char err[160];
    if (fd < 0 || ident_generate(&id) != 0) return 1;
    net_set_timeouts(fd, 5000);
    if (link_recv_msg(NULL, fd, &c, err, sizeof err) != 0 || c.type != M2C_CHALLENGE) return 1;
    wire_msg_t h = {.type = C2M_HELLO};
    h.u.hello.magic = WIRE_MAGIC;
    h.u.hello.version = WIRE_VERSION;
    h.u.hello.p2p_port = 1;
    h.u.hello.pool_size = 1;
    memcpy(h.u.hello.id.pubkey, id.pk, 32);
    wbuf_t b = {0};
    if (ident_encode_signed(&id, c.u.challenge.nonce, &h, &b) != 0 || link_send_all(NULL, fd, b.data, b.len) != 0 ||
        link_recv_msg(NULL, fd, &w, err, sizeof err) != 0 || w.type != M2C_WELCOME)
        return 1;
    wbuf_free(&b);
    printf("registered\n");
    fflush(stdout);
    time_t end = time(NULL) + atoi(argv[3]);
    wire_msg_t hb = {.type = C2M_HEARTBEAT};
    while (time(NULL) < end && access(argv[2], F_OK) != 0) {
        if (link_send_msg(NULL, fd, &hb) != 0) return 1;
        usleep(500 * 1000);
    }
    printf("still connected\n");
    close(fd);
    return 0;
}
