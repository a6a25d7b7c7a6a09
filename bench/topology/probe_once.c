/*
 * probe_once.c - one directed bandwidth probe with the library's own probe code (bw_measure, the
 * code a peer runs for the master's BENCH_REQUEST), for a duration the CLI cannot take (the master
 * uses 300 ms; `pccl bench-bandwidth --seconds` starts at 1 s).
 * Usage: probe_once SERVER_IP PORT DURATION_MS   (server: `pccl bench-bandwidth --server`)
 * Prints the client -> server rate in Mbit/s.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>

#include "p2p/bandwidth.h"

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    uint8_t ip[4], uuid[16] = {0};
    if (inet_pton(AF_INET, argv[1], ip) != 1) return 2;
    bw_result_t r;
    if (bw_measure(ip, (uint16_t)atoi(argv[2]), uuid, BW_CLIENT_SENDS, atoi(argv[3]), 1, 10000, &r) != 0) return 1;
    printf("%.1f\n", r.mbps);
    return 0;
}
