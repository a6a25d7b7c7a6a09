/*
 * impostor.c - an attacker of test_master_restart_takeover.sh: it knows the members' uuids (anyone can read them
 * from /v1/status) and, for SECONDS, keeps connecting to a master's control port to RESUME with each of them,
 * with a key of its own (it has not the members' keys), claiming a ring of those uuids and a revision far ahead.
 * Started before the master restarts, it reaches the new master before the members do.
 * Usage: impostor PORT SECONDS UUIDHEX... Prints one line per answer ("refused: REASON", "accepted: TYPE")
 * and at the end "attempts N accepted M". Exit 0 when nothing was accepted, 1 otherwise, 2 on usage.
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

#define MAX_UUIDS 16

static int parse_uuid(const char *s, uint8_t u[16]) {
    if (strlen(s) != 32) return -1;
    for (int i = 0; i < 16; i++) {
        unsigned x;
        if (sscanf(s + 2 * i, "%2x", &x) != 1) return -1;
        u[i] = (uint8_t)x;
    }
    return 0;
}

/* One try: RESUME as uuids[k]. 1 accepted, 0 refused or closed, -1 no connection. */
static int attempt(const ccoip_socket_address_t *to, const ident_t *id, uint8_t (*uuids)[16], int n, int k) {
    int fd = net_connect(to, 200);
    if (fd < 0) return -1;
    net_set_timeouts(fd, 2000);
    wire_msg_t c, a;
    char err[160];
    int rc = 0;
    if (link_recv_msg(NULL, fd, &c, err, sizeof err) != 0 || c.type != M2C_CHALLENGE) {
        close(fd);
        return -1;
    }
    wire_msg_t m = {.type = C2M_RESUME};
    m.u.resume.magic = WIRE_MAGIC;
    m.u.resume.version = WIRE_VERSION;
    m.u.resume.p2p_port = 9;
    m.u.resume.pool_size = 1;
    memcpy(m.u.resume.id.pubkey, id->pk, 32);
    snprintf(m.u.resume.id.name, sizeof m.u.resume.id.name, "impostor");
    memcpy(m.u.resume.uuid, uuids[k], 16);
    m.u.resume.has_revision = 1;
    m.u.resume.revision = 1000000000ull;
    m.u.resume.nring = (uint32_t)n;
    m.u.resume.ring = uuids;
    wbuf_t b = {0};
    if (ident_encode_signed(id, c.u.challenge.nonce, &m, &b) == 0 && link_send_all(NULL, fd, b.data, b.len) == 0 &&
        link_recv_msg(NULL, fd, &a, err, sizeof err) == 0) {
        if (a.type == M2C_KICK) {
            printf("refused: %s\n", a.u.kick.reason);
        } else {
            printf("accepted: %s\n", wire_type_name(a.type));
            rc = 1;
        }
        wire_msg_free(&a);
    }
    fflush(stdout);
    wbuf_free(&b);
    wire_msg_free(&c);
    close(fd);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc - 3 > MAX_UUIDS) {
        fprintf(stderr, "usage: impostor PORT SECONDS UUIDHEX...\n");
        return 2;
    }
    uint8_t uuids[MAX_UUIDS][16];
    int n = argc - 3;
    for (int i = 0; i < n; i++)
        if (parse_uuid(argv[3 + i], uuids[i]) != 0) return 2;
    pccl_log_set_level(PCCL_LOG_ERROR);
    ident_t id;
    if (ident_generate(&id) != 0) return 2;
    ccoip_socket_address_t to = {.inet = {.protocol = inetIPv4, .ipv4.data = {127, 0, 0, 1}},
                                 .port = (uint16_t)atoi(argv[1])};
    time_t end = time(NULL) + atoi(argv[2]);
    int attempts = 0, accepted = 0;
    while (time(NULL) < end) {
        int any = 0;
        for (int k = 0; k < n; k++) {
            int r = attempt(&to, &id, uuids, n, k);
            if (r < 0) continue;
            any = 1;
            attempts++;
            accepted += r;
        }
        /* The master is down: knock again soon, to be first when it is back; it is up: every 20 ms. */
        usleep(any ? 20000 : 5000);
    }
    printf("attempts %d accepted %d\n", attempts, accepted);
    return accepted ? 1 : 0;
}
