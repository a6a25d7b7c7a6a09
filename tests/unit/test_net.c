/* test_net.c - the same-host rule that bounds a ring connection's receive
 * buffer: loopback and own-address peers are bounded, remote peers keep the
 * kernel's autotuning (a WAN window must be able to grow). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loopback_pair.h"
#include "base/net.h"
#include "tinytest.h"

static ccoip_inet_address_t addr(const char *ip) {
    ccoip_socket_address_t a;
    char err[128];
    CHECK(addr_parse(ip, 1, 0, &a, err, sizeof err) == 0);
    return a.inet;
}

static void test_same_host_rule(void) {
    ccoip_inet_address_t me = addr("10.0.0.5"), lo = addr("127.0.0.1"), lo2 = addr("127.3.2.1"),
                         self = addr("10.0.0.5"), other = addr("10.0.0.6"), far = addr("203.0.113.7");
    CHECK(net_same_host(&me, &lo));
    CHECK(net_same_host(&me, &lo2));
    CHECK(net_same_host(&me, &self));
    CHECK(!net_same_host(&me, &other));
    CHECK(!net_same_host(&me, &far));
    ccoip_inet_address_t me6 = addr("[2001:db8::5]"), lo6 = addr("[::1]"), other6 = addr("[2001:db8::6]");
    CHECK(net_same_host(&me6, &lo6));
    CHECK(net_same_host(&me6, &me6));
    CHECK(net_same_host(&me, &lo6));
    CHECK(!net_same_host(&me6, &other6));
    CHECK(!net_same_host(&me6, &me)); /* another family is another address */
}

/* A real loopback connection: the accepted end gets the bounded buffer
 * (Linux reports twice the requested size), the unconnected socket does not. */
static void test_loopback_connection_is_bounded(void) {
    int ls, cfd, afd;
    CHECK(loopback_pair(&ls, &cfd, &afd) == 0);
    if (ls < 0 || afd < 0) return;
    int unconnected = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(net_bound_local_rcvbuf(unconnected) == 0);
    CHECK(net_bound_local_rcvbuf(afd) == 1);
    int v = 0;
    socklen_t len = sizeof v;
    CHECK(getsockopt(afd, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0);
    CHECK(v == 2 * NET_LOCAL_RCVBUF);
    close(unconnected);
    close(afd);
    close(cfd);
    close(ls);
}

int main(void) {
    RUN_TEST(test_same_host_rule);
    RUN_TEST(test_loopback_connection_is_bounded);
    TEST_MAIN_END();
}
