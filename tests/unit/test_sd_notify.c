/* test_sd_notify.c - systemd's notify protocol as `pccl master` and `pccl join` speak it (cli/sd_notify.c,
 * compiled in here): datagrams reach an AF_UNIX datagram socket named by NOTIFY_SOCKET, by path and abstract
 * ('@'), intact; without NOTIFY_SOCKET nothing is sent; malformed or absent sockets are an error, not a crash;
 * a full receive queue makes a send fail instead of blocking; WATCHDOG_USEC and WATCHDOG_PID are honoured. */
#include "../../cli/sd_notify.c"

#include <fcntl.h>
#include <stdio.h>

#include "tinytest.h"

/* A bound datagram socket at name (a path, or '@' for abstract), with a receive timeout; -1 on failure. */
static int listener(const char *name) {
    struct sockaddr_un sa;
    socklen_t len;
    if (notify_addr(name, &sa, &len) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (bind(fd, (struct sockaddr *)&sa, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The next datagram, NUL-terminated; "" on timeout. */
static const char *next(int fd) {
    static char buf[1024];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void test_no_socket(void) {
    unsetenv("NOTIFY_SOCKET");
    CHECK(sd_notify_send("READY=1") == 0);
    setenv("NOTIFY_SOCKET", "", 1);
    CHECK(sd_notify_send("READY=1") == 0);
    CHECK(sd_notify_sendf("STATUS=%d", 1) == 0);
}

static void test_path_socket(void) {
    char dir[] = "/tmp/pccl_sdn_XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/notify", dir);
    int fd = listener(path);
    CHECK(fd >= 0);
    setenv("NOTIFY_SOCKET", path, 1);
    CHECK(sd_notify_send("READY=1\nSTATUS=listening on 127.0.0.1:48148") == 1);
    CHECK(strcmp(next(fd), "READY=1\nSTATUS=listening on 127.0.0.1:48148") == 0);
    CHECK(sd_notify_sendf("STATUS=in the run (world size %d)", 3) == 1);
    CHECK(strcmp(next(fd), "STATUS=in the run (world size 3)") == 0);
    CHECK(sd_notify_send("WATCHDOG=1") == 1);
    CHECK(strcmp(next(fd), "WATCHDOG=1") == 0);
    /* The socket went away (systemd restarted): an error the caller can ignore. */
    close(fd);
    unlink(path);
    CHECK(sd_notify_send("WATCHDOG=1") == -1);
    rmdir(dir);
}

static void test_abstract_socket(void) {
    char name[64];
    snprintf(name, sizeof name, "@pccl-test-sd-notify-%d", (int)getpid());
    int fd = listener(name);
    CHECK(fd >= 0);
    setenv("NOTIFY_SOCKET", name, 1);
    CHECK(sd_notify_send("STOPPING=1") == 1);
    CHECK(strcmp(next(fd), "STOPPING=1") == 0);
    /* The abstract name is exactly the bytes after '@': a longer name is another socket. */
    char other[80];
    snprintf(other, sizeof other, "%sx", name);
    setenv("NOTIFY_SOCKET", other, 1);
    CHECK(sd_notify_send("STOPPING=1") == -1);
    close(fd);
}

static void test_malformed(void) {
    const char *bad[] = {"relative/notify", "@", "/", "notify"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("NOTIFY_SOCKET", bad[i], 1);
        CHECK(sd_notify_send("READY=1") == -1);
    }
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[0] = '/';
    longname[sizeof longname - 1] = '\0';
    setenv("NOTIFY_SOCKET", longname, 1);
    CHECK(sd_notify_send("READY=1") == -1);
    setenv("NOTIFY_SOCKET", "/tmp/x", 1);
    CHECK(sd_notify_send(NULL) == -1);
    char huge[600];
    memset(huge, 'x', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    CHECK(sd_notify_sendf("STATUS=%s", huge) == -1); /* longer than the formatting buffer: refused, not cut */
}

/* A receiver that stopped reading: sends fail once its queue is full, and never block (the master's event loop
 * sends). */
static void test_full_queue_does_not_block(void) {
    char name[64];
    snprintf(name, sizeof name, "@pccl-test-sd-full-%d", (int)getpid());
    int fd = listener(name);
    CHECK(fd >= 0);
    setenv("NOTIFY_SOCKET", name, 1);
    int sent = 0, failed = 0;
    for (int i = 0; i < 100000 && !failed; i++) {
        if (sd_notify_send("WATCHDOG=1") == 1) sent++;
        else failed = 1;
    }
    CHECK(sent > 0);
    CHECK(failed);
    CHECK(strcmp(next(fd), "WATCHDOG=1") == 0);
    close(fd);
}

static void test_watchdog_env(void) {
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    CHECK_EQ_U64(sd_notify_watchdog_usec(), 0);
    setenv("WATCHDOG_USEC", "30000000", 1);
    CHECK_EQ_U64(sd_notify_watchdog_usec(), 30000000);
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    setenv("WATCHDOG_PID", pid, 1);
    CHECK_EQ_U64(sd_notify_watchdog_usec(), 30000000);
    snprintf(pid, sizeof pid, "%d", (int)getpid() + 1);
    setenv("WATCHDOG_PID", pid, 1); /* meant for another process (e.g. the parent of a fork) */
    CHECK_EQ_U64(sd_notify_watchdog_usec(), 0);
    setenv("WATCHDOG_PID", "x", 1);
    CHECK_EQ_U64(sd_notify_watchdog_usec(), 0);
    unsetenv("WATCHDOG_PID");
    const char *bad[] = {"0", "-5", "abc", "12s", "", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("WATCHDOG_USEC", bad[i], 1);
        CHECK_EQ_U64(sd_notify_watchdog_usec(), 0);
    }
    CHECK_EQ_U64(sd_notify_ping_ms(0), 0);
    CHECK_EQ_U64(sd_notify_ping_ms(30000000), 15000);
    CHECK_EQ_U64(sd_notify_ping_ms(1000), 1);
    CHECK_EQ_U64(sd_notify_ping_ms(1), 1);
}

int main(void) {
    RUN_TEST(test_no_socket);
    RUN_TEST(test_path_socket);
    RUN_TEST(test_abstract_socket);
    RUN_TEST(test_malformed);
    RUN_TEST(test_full_queue_does_not_block);
    RUN_TEST(test_watchdog_env);
    TEST_MAIN_END();
}
