/* test_addr.c - the one parser of HOST:PORT (libpccl/src/base/addr.c): every spelling, the errors that are usage errors
 * and the ones that are resolution failures, IPv4-mapped addresses, and listening dual-stack. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/net.h"
#include "tinytest.h"

static int parse(const char *s, uint16_t def, ccoip_socket_address_t *a) {
    char err[320] = "";
    int rc = addr_parse(s, def, 0, a, err, sizeof err);
    if (rc != 0) CHECK(err[0] != 0); /* every failure says why */
    return rc;
}

static void check_str(const char *s, const char *want) {
    ccoip_socket_address_t a;
    char out[ADDR_STRLEN] = "";
    CHECK(parse(s, 48148, &a) == 0);
    addr_str(&a, out);
    CHECK(strcmp(out, want) == 0);
    if (strcmp(out, want) != 0) fprintf(stderr, "  '%s' -> '%s', want '%s'\n", s, out, want);
}

static void test_spellings(void) {
    check_str("10.1.2.3:4000", "10.1.2.3:4000");
    check_str("10.1.2.3", "10.1.2.3:48148");             /* the default port */
    check_str("[::1]:4000", "[::1]:4000");
    check_str("[2001:db8::7]", "[2001:db8::7]:48148");
    check_str("2001:db8::7", "[2001:db8::7]:48148");      /* bare IPv6: no port possible */
    check_str("[::ffff:10.0.0.9]:5", "10.0.0.9:5");      /* v4-mapped is IPv4 */
    check_str("0.0.0.0:0", "0.0.0.0:0");
    check_str("localhost:65535", "127.0.0.1:65535");     /* a name (from /etc/hosts) */
    ccoip_socket_address_t a;
    CHECK(parse("[::1]:9", 1, &a) == 0 && a.inet.protocol == inetIPv6 && a.inet.ipv6.data[15] == 1 &&
          a.port == 9);
    CHECK(parse("192.0.2.1:7", 1, &a) == 0 && a.inet.protocol == inetIPv4 && a.inet.ipv4.data[0] == 192);
}

static void test_syntax_errors(void) {
    const char *bad[] = {"", ":48148", "10.0.0.1:", "10.0.0.1:65536", "10.0.0.1:-1", "10.0.0.1:x", "10.0.0.1:1:2",
                         "[::1", "[::1]x", "[::1]:", "[10.0.0.1]:5", "[nothost]:5", "1.2.3.400:5", "999.1.1.1",
                         "bad host:1", "host_name:1", "-lead:1", "trail-:1", "a..b:1", "x/y", "::1:xyz"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ccoip_socket_address_t a = {.port = 4242};
        int rc = parse(bad[i], 1, &a);
        CHECK(rc == -PERR_SYNTAX);
        CHECK_EQ_U64(a.port, 4242); /* nothing written on failure */
        if (rc != -PERR_SYNTAX) fprintf(stderr, "  '%s' was not a syntax error (%d)\n", bad[i], rc);
    }
    char err[320];
    ccoip_socket_address_t a;
    CHECK(addr_parse("10.0.0.1", 0, 1, &a, err, sizeof err) == -PERR_SYNTAX); /* a port is required */
}

/* .invalid never resolves (RFC 6761): a well-formed name that does not resolve is no usage error. */
static void test_unresolved(void) {
    ccoip_socket_address_t a;
    char err[320] = "";
    CHECK(addr_parse("no-such-host.invalid:5", 1, 0, &a, err, sizeof err) == -PERR_UNRESOLVED);
    CHECK(strstr(err, "cannot resolve 'no-such-host.invalid'") != NULL);
}

static void test_advertised(void) {
    ccoip_socket_address_t a;
    char err[320];
    CHECK(addr_parse_advertised("198.51.100.4", &a, err, sizeof err) == 0 && a.port == 0);
    CHECK(addr_parse_advertised("198.51.100.4:50000", &a, err, sizeof err) == 0 && a.port == 50000);
    CHECK(addr_parse_advertised("0.0.0.0:5", &a, err, sizeof err) == -PERR_SYNTAX);
    CHECK(addr_parse_advertised("[::]", &a, err, sizeof err) == -PERR_SYNTAX);
}

static void test_sockaddr_roundtrip(void) {
    const char *in[] = {"10.9.8.7:1234", "[fe80::1:2]:65535"};
    for (int i = 0; i < 2; i++) {
        ccoip_socket_address_t a, b;
        struct sockaddr_storage ss;
        CHECK(parse(in[i], 1, &a) == 0);
        socklen_t len = addr_to_sockaddr(&a, &ss);
        CHECK(len == (ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)));
        CHECK(addr_from_sockaddr((struct sockaddr *)&ss, &b) == 0);
        CHECK(addr_ip_equal(&a.inet, &b.inet) && a.port == b.port);
    }
    struct sockaddr_in6 m = {.sin6_family = AF_INET6, .sin6_port = htons(7)};
    inet_pton(AF_INET6, "::ffff:127.0.0.5", &m.sin6_addr);
    ccoip_socket_address_t c;
    CHECK(addr_from_sockaddr((struct sockaddr *)&m, &c) == 0 && c.inet.protocol == inetIPv4 &&
          c.inet.ipv4.data[3] == 5 && addr_ip_is_loopback(&c.inet) && c.port == 7);
    struct sockaddr un = {.sa_family = AF_UNIX};
    CHECK(addr_from_sockaddr(&un, &c) == -PERR_INVALID);
}

/* 0.0.0.0 listens dual-stack: the same port answers over 127.0.0.1 and ::1 (when this host has IPv6). */
/* 0.0.0.0 and [::] alike: one socket that IPv4 and IPv6 clients reach. */
static void check_dual_stack(const char *listen_at) {
    uint16_t port = 0;
    ccoip_socket_address_t at;
    CHECK(parse(listen_at, 0, &at) == 0);
    int ls = net_listen(&at, &port);
    CHECK(ls >= 0 && port != 0);
    const char *to[] = {"127.0.0.1", "[::1]"};
    int have6 = socket(AF_INET6, SOCK_STREAM, 0);
    for (int i = 0; i < (have6 >= 0 ? 2 : 1); i++) {
        ccoip_socket_address_t a;
        CHECK(parse(to[i], port, &a) == 0);
        int fd = net_connect(&a, 2000);
        CHECK(fd >= 0);
        int c = fd >= 0 ? accept(ls, NULL, NULL) : -1;
        CHECK(c >= 0);
        if (c >= 0) close(c);
        if (fd >= 0) close(fd);
    }
    if (have6 >= 0) close(have6);
    if (ls >= 0) close(ls);
}

static void test_dual_stack_listen(void) {
    check_dual_stack("0.0.0.0:0");
    check_dual_stack("[::]:0");
}

/* Every address of a spelling, in order: a literal is one; the dialler takes the first that accepts. */
static void test_resolve_all_and_dial_in_order(void) {
    ccoip_socket_address_t a[ADDR_MAX_RESOLVED];
    char err[320] = "";
    CHECK(addr_resolve_all("127.0.0.1:5", 1, a, ADDR_MAX_RESOLVED, err, sizeof err) == 1 && a[0].port == 5);
    CHECK(addr_resolve_all("[::1]", 7, a, ADDR_MAX_RESOLVED, err, sizeof err) == 1 && a[0].port == 7 &&
          a[0].inet.protocol == inetIPv6);
    int n = addr_resolve_all("localhost:9", 1, a, ADDR_MAX_RESOLVED, err, sizeof err);
    CHECK(n >= 1 && a[0].port == 9);
    for (int i = 0; i < n; i++) CHECK(addr_ip_is_loopback(&a[i].inet));
    CHECK(addr_resolve_all("bad host:1", 1, a, ADDR_MAX_RESOLVED, err, sizeof err) == -PERR_SYNTAX);
    CHECK(addr_resolve_all("no-such-host.invalid", 1, a, ADDR_MAX_RESOLVED, err, sizeof err) == -PERR_UNRESOLVED);
    /* A closed port first (refused), then a listener: the second connects. */
    uint16_t open_port = 0, closed_port = 0;
    int ls = net_listen_any(0, &open_port), gone = net_listen_any(0, &closed_port);
    CHECK(ls >= 0 && gone >= 0);
    if (gone >= 0) close(gone);
    ccoip_socket_address_t to[2];
    CHECK(parse("127.0.0.1", closed_port, &to[0]) == 0 && parse("127.0.0.1", open_port, &to[1]) == 0);
    int which = -1, fd = net_connect_first(to, 2, 2000, NULL, &which);
    CHECK(fd >= 0 && which == 1);
    if (fd >= 0) close(fd);
    CHECK(net_connect_first(to, 1, 2000, NULL, &which) == -PERR_IO); /* the closed one alone: its failure */
    if (ls >= 0) close(ls);
}

/* The parser speaks err.h: a usage error and a resolution failure are two codes, each with its own text and the
 * pcclResult_t an API entry point reports by default. */
static void test_error_codes(void) {
    ccoip_socket_address_t a;
    char err[320] = "";
    int syntax = addr_parse("10.0.0.1:65536", 1, 0, &a, err, sizeof err);
    CHECK(syntax == -PERR_SYNTAX && strstr(err, "bad address") != NULL);
    CHECK(addr_parse("[::1", 1, 0, &a, err, sizeof err) == -PERR_SYNTAX);
    int unresolved = addr_parse("no-such-host.invalid", 1, 0, &a, err, sizeof err);
    CHECK(unresolved == -PERR_UNRESOLVED && strstr(err, "cannot resolve") != NULL);
    CHECK(syntax != unresolved && strcmp(perr_str(syntax), perr_str(unresolved)) != 0);
    CHECK_EQ_U64(perr_result(syntax), pcclInvalidArgument);
    CHECK(addr_parse_advertised("0.0.0.0", &a, err, sizeof err) == -PERR_SYNTAX);
}

int main(void) {
    RUN_TEST(test_spellings);
    RUN_TEST(test_syntax_errors);
    RUN_TEST(test_unresolved);
    RUN_TEST(test_advertised);
    RUN_TEST(test_sockaddr_roundtrip);
    RUN_TEST(test_dual_stack_listen);
    RUN_TEST(test_resolve_all_and_dial_in_order);
    RUN_TEST(test_error_codes);
    TEST_MAIN_END();
}
