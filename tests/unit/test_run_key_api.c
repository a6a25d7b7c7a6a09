/* test_run_key_api.c - the run-key extensions (pccl_ext.h) on a real master and peers over
 * loopback: a peer given the master's key in memory joins, one with another key or none is
 * refused; keys too short, encryption without a key and calls at the wrong time are refused. */
#include <stdlib.h>
#include <string.h>

#include "server/master_internal.h"
#include "pccl.h"
#include "pccl_ext.h"
#include "tinytest.h"

static const char KEY[] = "in-memory-run-key-0123456789abcdef0123456789\n";
static const char OTHER[] = "another-run-key-0123456789abcdef0123456789ab";

/* Creates a communicator for the master on port with key (NULL: none) and connects it. */
static pcclResult_t join(uint16_t port, const char *key, pcclComm_t **out) {
    pcclCommCreateParams_t p = {.master_address = {.inet = {.protocol = inetIPv4, .ipv4 = {{127, 0, 0, 1}}},
                                                   .port = port},
                                .p2p_connection_pool_size = 1};
    if (pcclCreateCommunicator(&p, out) != pcclSuccess) return pcclInternalError;
    if (key && pcclExtCommSetRunKey(*out, key, strlen(key)) != pcclSuccess) return pcclInternalError;
    return pcclConnect(*out);
}

static void test_keys_in_memory(void) {
    ccoip_socket_address_t at = {.inet = {.protocol = inetIPv4, .ipv4 = {{127, 0, 0, 1}}}, .port = 0};
    pcclMasterInstance_t *m = NULL;
    CHECK(pcclCreateMaster(at, &m) == pcclSuccess);
    if (!m) return;
    CHECK(pcclExtMasterSetRunKey(m, NULL, 0, true) == pcclInvalidArgument);
    CHECK(pcclExtMasterSetRunKey(m, KEY, 20, false) == pcclInvalidArgument);
    CHECK(pcclExtMasterSetRunKey(m, KEY, strlen(KEY), true) == pcclSuccess);
    CHECK(pcclRunMaster(m) == pcclSuccess);
    CHECK(pcclExtMasterSetRunKey(m, NULL, 0, false) == pcclInvalidUsage);
    uint16_t port = pccl__master_port(m);

    pcclComm_t *good = NULL, *wrong = NULL, *none = NULL;
    /* The same key without its trailing newline: one key. */
    char trimmed[sizeof KEY];
    memcpy(trimmed, KEY, sizeof KEY);
    trimmed[strlen(trimmed) - 1] = 0;
    CHECK(join(port, trimmed, &good) == pcclSuccess);
    int world = 0;
    CHECK(pcclGetAttribute(good, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &world) == pcclSuccess && world == 1);
    CHECK(pcclExtCommSetRunKey(good, KEY, strlen(KEY)) == pcclInvalidUsage);
    CHECK(join(port, OTHER, &wrong) == pcclMasterConnectionFailed);
    CHECK(join(port, NULL, &none) == pcclMasterConnectionFailed);
    pcclComm_t *shortk = NULL;
    pcclCommCreateParams_t p = {.master_address = {.inet = {.protocol = inetIPv4, .ipv4 = {{127, 0, 0, 1}}},
                                                   .port = port}};
    CHECK(pcclCreateCommunicator(&p, &shortk) == pcclSuccess);
    CHECK(pcclExtCommSetRunKey(shortk, "short", 5) == pcclInvalidArgument);
    CHECK(pcclExtCommSetRunKey(shortk, NULL, 0) == pcclSuccess);
    pcclDestroyCommunicator(shortk);
    pcclDestroyCommunicator(none);
    pcclDestroyCommunicator(wrong);
    pcclDestroyCommunicator(good);
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
}

int main(void) {
    unsetenv("PCCL_KEY_FILE");
    unsetenv("PCCL_ENCRYPT");
    setenv("PCCL_CONNECT_TIMEOUT_MS", "3000", 1);
    pcclInit();
    RUN_TEST(test_keys_in_memory);
    TEST_MAIN_END();
}
