/* key_probe.c - asks a peer's p2p port for a short bandwidth probe (it receives for 200 ms and
 * answers what it measured, as for the master's probes) as a
 * client that claims the uuid UUIDHEX, holding the key in KEYFILE ("-": none, an open client).
 * Prints "served N bytes" (what the peer measured) and exits 0 when the peer served it, "refused" and exits 1 when not.
 * Used by test_keyed_refused.sh to knock on a keyed peer's port from outside the run.
 *   key_probe IP PORT KEYFILE|- UUIDHEX */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p/bandwidth.h"
#include "base/log.h"
#include "sec/sec_key.h"

int main(int argc, char **argv) {
    if (argc != 5 || strlen(argv[4]) != 32) {
        fprintf(stderr, "usage: key_probe IP PORT KEYFILE|- UUIDHEX\n");
        return 2;
    }
    uint8_t ip[4], uuid[16];
    unsigned a, b, c, d;
    if (sscanf(argv[1], "%u.%u.%u.%u", &a, &b, &c, &d) != 4) return 2;
    ip[0] = (uint8_t)a, ip[1] = (uint8_t)b, ip[2] = (uint8_t)c, ip[3] = (uint8_t)d;
    for (int i = 0; i < 16; i++) {
        unsigned x;
        if (sscanf(argv[4] + 2 * i, "%2x", &x) != 1) return 2;
        uuid[i] = (uint8_t)x;
    }
    sec_cfg_t sec = {0};
    char err[320];
    if (strcmp(argv[3], "-") != 0 && sec_key_from_file(argv[3], &sec, err, sizeof err) != 0) {
        fprintf(stderr, "key_probe: %s\n", err);
        return 2;
    }
    pccl_log_set_level(PCCL_LOG_ERROR);
    bw_result_t r;
    ccoip_socket_address_t to = {.inet = {.protocol = inetIPv4, .ipv4.data = {ip[0], ip[1], ip[2], ip[3]}},
                                 .port = (uint16_t)atoi(argv[2])};
    if (bw_measure(&to, uuid, &sec, NULL, BW_CLIENT_SENDS, 200, 1, 3000, NULL, &r) == 0 &&
        r.bytes > 0) {
        printf("served %llu bytes\n", (unsigned long long)r.bytes);
        return 0;
    }
    printf("refused\n");
    return 1;
}
