/* test_admin_host.c - the admin port's Host rules (admin_host.c): loopback names and literals, the listening
 * address (every literal on a wildcard address), names given with --admin-host; any other name is refused,
 * whatever its case or port, so a DNS-rebinding page cannot read the admin port. */
#include <string.h>

#include "admin/admin_host.h"
#include "tinytest.h"

static admin_host_rules_t rules_v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    admin_host_rules_t r;
    memset(&r, 0, sizeof r);
    r.listen.protocol = inetIPv4;
    r.listen.ipv4.data[0] = a;
    r.listen.ipv4.data[1] = b;
    r.listen.ipv4.data[2] = c;
    r.listen.ipv4.data[3] = d;
    return r;
}

static void test_loopback_listener(void) {
    admin_host_rules_t r = rules_v4(127, 0, 0, 1);
    const char *ok[] = {NULL, "localhost", "LOCALHOST:48152", "localhost.", "127.0.0.1", "127.0.0.1:48152",
                        "127.1.2.3:1", "[::1]", "[::1]:48152"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) CHECK(admin_host_allowed(&r, ok[i]));
    const char *refused[] = {"evil.example.com", "evil.example.com:48152", "10.0.0.5:48152", "", ":48152",
                             "[::2]:48152", "[::1", "::1", "localhost.evil.example.com", "127.0.0.1.nip.io",
                             "pccl", "[::1]x", "local host"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) CHECK(!admin_host_allowed(&r, refused[i]));
}

static void test_listen_address(void) {
    admin_host_rules_t r = rules_v4(10, 0, 0, 5);
    CHECK(admin_host_allowed(&r, "10.0.0.5:48152"));
    CHECK(!admin_host_allowed(&r, "10.0.0.6:48152"));
    CHECK(!admin_host_allowed(&r, "[fd00::5]:48152"));
    admin_host_rules_t any = rules_v4(0, 0, 0, 0); /* a wildcard: every literal, still no foreign name */
    CHECK(admin_host_allowed(&any, "10.0.0.6:48152"));
    CHECK(admin_host_allowed(&any, "[fd00::5]:48152"));
    CHECK(!admin_host_allowed(&any, "master.example.com:48152"));
    admin_host_rules_t v6;
    memset(&v6, 0, sizeof v6);
    v6.listen.protocol = inetIPv6;
    v6.listen.ipv6.data[0] = 0xfd;
    v6.listen.ipv6.data[15] = 5;
    CHECK(admin_host_allowed(&v6, "[fd00::5]:1"));
    CHECK(!admin_host_allowed(&v6, "[fd00::6]:1"));
    CHECK(!admin_host_allowed(&v6, "10.0.0.5"));
}

static void test_names(void) {
    admin_host_rules_t r = rules_v4(127, 0, 0, 1);
    CHECK(admin_host_add(&r, "Master.Example.COM.") == 0);
    CHECK(admin_host_allowed(&r, "master.example.com:48152"));
    CHECK(admin_host_allowed(&r, "MASTER.example.com"));
    CHECK(!admin_host_allowed(&r, "example.com"));
    CHECK(!admin_host_allowed(&r, "xmaster.example.com"));
    CHECK(admin_host_add(&r, "") == -PERR_INVALID);
    CHECK(admin_host_add(&r, "bad name") == -PERR_INVALID);
    CHECK(admin_host_add(&r, "a/b") == -PERR_INVALID);
    for (int i = 1; i < ADMIN_HOSTS_MAX; i++) CHECK(admin_host_add(&r, "n.example") == 0);
    CHECK(admin_host_add(&r, "one-too-many") == -PERR_INVALID);
}

int main(void) {
    RUN_TEST(test_loopback_listener);
    RUN_TEST(test_listen_address);
    RUN_TEST(test_names);
    TEST_MAIN_END();
}
