/*
 * relay_peer.c - one side of an edge through `pccl relay` (tests/e2e/test_relay.sh), using the library's
 * relay_dial and tokens:
 *
 *   relay_peer HOST:PORT dialer|target NONCE_HEX32 MB [--key-file FILE] [--hold-ms MS] [--timeout-ms MS]
 *
 * mints the token of the nonce (under the run key of FILE, or unkeyed), connects through the relay and then
 * sends MB mebibytes of its role's pattern while it receives and checks the other role's, both at once, then
 * closes its half and waits for the other's. With --hold-ms it sends nothing and waits for the relay to close
 * the pair. Prints one line. Exit: 0 done (hold: the relay closed the pair), 3 relay_dial failed, 4 a byte
 * differs, 5 the connection broke before MB arrived, 6 hold: still open after MS, 2 usage.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "p2p/relay_client.h"

static uint8_t pattern(uint64_t i, int role) {
    uint32_t h = (uint32_t)(i >> 3) * 2654435761u;
    return (uint8_t)((h >> 24) ^ (i & 7) ^ (role ? 0xa5 : 0x3c));
}

static int hex_nonce(const char *s, uint8_t out[RELAY_NONCE_BYTES]) {
    if (strlen(s) != 2 * RELAY_NONCE_BYTES) return -PERR_INVALID;
    for (int i = 0; i < RELAY_NONCE_BYTES; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return -PERR_INVALID;
        out[i] = (uint8_t)v;
    }
    return 0;
}

/* Sends total bytes of role's pattern and receives total of the other's, at once, until deadline. Done only when
 * both halves are: the other side's end arrived and ours was sent (closing earlier would cut what we still send). */
static int exchange(int fd, int role, uint64_t total, uint64_t deadline) {
    static uint8_t buf[1 << 16];
    uint64_t sent = 0, got = 0;
    int eof = 0, sent_all = 0;
    net_set_nonblock(fd, 1);
    while (!(eof && sent_all) && net_now_ms() < deadline) {
        if (sent == total && !sent_all) {
            shutdown(fd, SHUT_WR);
            sent_all = 1;
            continue;
        }
        struct pollfd p = {.fd = fd, .events = (short)((eof ? 0 : POLLIN) | (sent_all ? 0 : POLLOUT))};
        if (poll(&p, 1, 100) <= 0) continue;
        if ((p.revents & (POLLOUT | POLLHUP | POLLERR)) && !sent_all) {
            size_t n = total - sent < sizeof buf ? (size_t)(total - sent) : sizeof buf;
            for (size_t i = 0; i < n; i++) buf[i] = pattern(sent + i, role);
            ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
            if (w > 0) sent += (uint64_t)w;
            else if (w < 0 && errno != EAGAIN) break;
        }
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && !eof) {
            ssize_t r = recv(fd, buf, sizeof buf, 0);
            if (r == 0) eof = 1;
            if (r < 0 && errno == EAGAIN) continue;
            if (r < 0) break;
            for (ssize_t i = 0; i < r; i++) {
                if (got + (uint64_t)i >= total || buf[i] != pattern(got + (uint64_t)i, !role)) {
                    printf("byte %llu differs\n", (unsigned long long)(got + (uint64_t)i));
                    return 4;
                }
            }
            got += (uint64_t)r;
        }
    }
    if (got == total && eof && sent_all) {
        printf("ok: sent and received %llu bytes\n", (unsigned long long)total);
        return 0;
    }
    printf("broken: sent %llu, received %llu of %llu bytes%s\n", (unsigned long long)sent, (unsigned long long)got,
           (unsigned long long)total, eof ? " (closed)" : "");
    return 5;
}

/* Waits for the other end to close, sending nothing. */
static int hold(int fd, int ms) {
    uint64_t t0 = net_now_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (net_now_ms() < t0 + (uint64_t)ms) {
        if (poll(&p, 1, 50) <= 0) continue;
        char c;
        if (recv(fd, &c, 1, 0) <= 0) {
            printf("closed after %llu ms\n", (unsigned long long)(net_now_ms() - t0));
            return 0;
        }
    }
    printf("still open after %d ms\n", ms);
    return 6;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s HOST:PORT dialer|target NONCE_HEX32 MB [--key-file F] [--hold-ms MS] "
                        "[--timeout-ms MS]\n", argv[0]);
        return 2;
    }
    const char *key_file = NULL;
    int hold_ms = 0, timeout_ms = 20000;
    for (int i = 5; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--key-file")) key_file = argv[i + 1];
        else if (!strcmp(argv[i], "--hold-ms")) hold_ms = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--timeout-ms")) timeout_ms = atoi(argv[i + 1]);
    }
    ccoip_socket_address_t relay;
    uint8_t nonce[RELAY_NONCE_BYTES], token[RELAY_TOKEN_BYTES];
    char err[256];
    int role = !strcmp(argv[2], "target") ? RELAY_ROLE_TARGET : RELAY_ROLE_DIALER;
    if (addr_parse(argv[1], 0, 1, &relay, err, sizeof err) != 0 || hex_nonce(argv[3], nonce) != 0) {
        fprintf(stderr, "bad relay address or nonce\n");
        return 2;
    }
    sec_cfg_t sec = {0};
    if (key_file && sec_key_from_file(key_file, &sec, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (relay_token_make(sec.keyed ? sec.psk : NULL, nonce, token) != 0) return 2;
    uint64_t deadline = net_now_ms() + (uint64_t)timeout_ms;
    int fd = relay_dial(&relay, token, role, timeout_ms, NULL, err, sizeof err);
    if (fd < 0) {
        printf("refused: %s\n", err);
        return 3;
    }
    printf("paired\n");
    fflush(stdout);
    int rc = hold_ms ? hold(fd, hold_ms) : exchange(fd, role, (uint64_t)atoll(argv[4]) << 20, deadline);
    close(fd);
    return rc;
}
