/*
 * ss_peer.c - one peer of the shared-state end-to-end tests (test_ss_*.sh).
 *
 * Usage: ss_peer PORT [--world N] [--group G] [--strategy enforce|recv|send]
 *                [--revision R] [--seed S] [--expect-seed S] [--tensors N]
 *                [--bytes TOTAL] [--allreduce V --expect-sum X] [--expect-result CODE]
 *                [--cuda 1]
 *
 * Builds a shared state of N tensors cycling through every dtype whose sizes
 * add up to TOTAL bytes; content is a function of (seed, tensor, offset), and
 * seed 0 means all zeros (a fresh newcomer). After joining (accept rounds until
 * the run has N peers) it synchronizes once with the given strategy, checks
 * the bytes chunk by chunk against seed --expect-seed (no second copy of a
 * large state), optionally all-reduces V within its group, and prints one JSON
 * line with tx/rx bytes, the state hash and the four attributes.
 * --cuda 1 keeps every tensor in GPU memory (hashed on the GPU, staged through
 * the host by the library); without a usable device it prints
 * "SKIP: no CUDA device" and exits 77 before connecting.
 * Exit 0 when every check passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl.h"
#include "pccl_kernels.h"

static const pcclDataType_t DTYPES[] = {pcclUint8,   pcclInt8,  pcclInt16,  pcclUint16, pcclUint32, pcclInt32,
                                        pcclUint64,  pcclInt64, pcclFloat16, pcclBFloat16, pcclFloat, pcclDouble};
#define NDTYPES (sizeof DTYPES / sizeof DTYPES[0])

/* Content word w of tensor t for seed s (splitmix64 of the position): every tensor differs between seeds. */
static uint64_t word_at(uint64_t s, uint64_t t, uint64_t w) {
    if (s == 0) return 0;
    uint64_t x = w * 0x9E3779B97F4A7C15ull ^ (t << 40) ^ (s * 0xC2B2AE3D27D4EB4Full);
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return (x ^ (x >> 31)) | 1; /* never all-zero: seed 0 differs from every other seed */
}

/* Fills bytes [off, off+len) of tensor t's content into dst (off a multiple of 8). */
static void gen(uint64_t seed, uint64_t t, size_t off, uint8_t *dst, size_t len) {
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = word_at(seed, t, (off + i) / 8);
        memcpy(dst + i, &v, len - i < 8 ? len - i : 8);
    }
}

static size_t tensor_bytes(const pcclTensorInfo_t *t) { return t->count * pccl_dtype_size(t->datatype); }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int world = 2, expect_result = pcclSuccess, do_allreduce = 0, cuda = 0;
    unsigned group = 0;
    uint64_t revision = 1, seed = 1, expect_seed = 1, ntensors = 16, total = 1 << 20;
    double ar_value = 0, expect_sum = 0;
    pcclSharedStateSyncStrategy_t strategy = PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--world")) world = atoi(v);
        else if (!strcmp(k, "--group")) group = (unsigned)atoi(v);
        else if (!strcmp(k, "--revision")) revision = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--expect-seed")) expect_seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--tensors")) ntensors = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--bytes")) total = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--expect-result")) expect_result = atoi(v);
        else if (!strcmp(k, "--allreduce")) do_allreduce = 1, ar_value = atof(v);
        else if (!strcmp(k, "--expect-sum")) expect_sum = atof(v);
        else if (!strcmp(k, "--cuda")) cuda = atoi(v);
        else if (!strcmp(k, "--strategy"))
            strategy = !strcmp(v, "recv")   ? PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY
                       : !strcmp(v, "send") ? PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY
                                            : PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR;
        else return 2;
    }
    if (ntensors == 0 || ntensors > 10000) return 2;
#ifdef PCCL_HAS_CUDA
    if (cuda && !pccl_cuda_available()) {
#else
    if (cuda) {
#endif
        printf("SKIP: no CUDA device\n");
        return 77;
    }

    /* Layout: tensor i gets an equal share of the bytes, rounded down to whole elements. */
    pcclTensorInfo_t *infos = calloc(ntensors, sizeof *infos);
    char(*names)[32] = calloc(ntensors, sizeof *names);
    if (!infos || !names) return 1;
    uint64_t sum_bytes = 0;
    for (uint64_t i = 0; i < ntensors; i++) {
        pcclDataType_t dt = DTYPES[i % NDTYPES];
        size_t es = pccl_dtype_size(dt), count = (size_t)(total / ntensors) / es;
        if (count == 0) count = 1 + i % 5;
        snprintf(names[i], sizeof names[i], "t%03llu.%zu", (unsigned long long)i, es);
        infos[i] = (pcclTensorInfo_t){.name = names[i], .count = count, .datatype = dt, .device_type = pcclDeviceCpu};
        infos[i].data = malloc(count * es);
        if (!infos[i].data) return 1;
        gen(seed, i, 0, infos[i].data, count * es);
        sum_bytes += count * es;
#ifdef PCCL_HAS_CUDA
        if (cuda) { /* move to the GPU; the host copy goes away */
            void *d = NULL;
            if (pccl_cuda_alloc(&d, count * es) != 0 || pccl_cuda_copy_h2d(d, infos[i].data, count * es) != 0) return 1;
            free(infos[i].data);
            infos[i].data = d;
            infos[i].device_type = pcclDeviceCuda;
        }
#endif
    }
    pcclSharedState_t st = {.revision = revision, .count = ntensors, .infos = infos};

    pcclInit();
    pcclCommCreateParams_t params = {.master_address = {.inet.protocol = inetIPv4,
                                                        .inet.ipv4.data = {127, 0, 0, 1},
                                                        .port = (uint16_t)atoi(argv[1])},
                                     .peer_group = group, .p2p_connection_pool_size = 1};
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess || pcclConnect(comm) != pcclSuccess) return 1;
    int ws = 0;
    /* Attribute first: a peer accepted into the full run must not vote again alone. */
    /* Bounded by time, not tries: others may still be generating a large state before connecting. */
    for (time_t end = time(NULL) + 120; time(NULL) < end;) {
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &ws);
        if (ws >= world) break;
        pcclUpdateTopology(comm);
        nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
    }
    int failures = 0;
    if (ws != world) {
        fprintf(stderr, "world size %d, expected %d\n", ws, world);
        failures++;
    }

    pcclSharedStateSyncInfo_t info = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pcclResult_t r = pcclSynchronizeSharedState(comm, &st, strategy, &info);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sync_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if ((int)r != expect_result) {
        fprintf(stderr, "sync returned %d (%s), expected %d\n", r, pcclResultString(r), expect_result);
        failures++;
    }

    /* Check the content in 1 MiB chunks against the expected seed. */
    uint8_t *chunk = malloc(1 << 20), *have = malloc(1 << 20);
    uint64_t state_hash = 0;
    for (uint64_t i = 0; chunk && i < ntensors; i++) {
        size_t nb = tensor_bytes(&infos[i]);
        for (size_t off = 0; off < nb; off += 1 << 20) {
            size_t len = nb - off < (1u << 20) ? nb - off : (1u << 20);
            gen(expect_seed, i, off, chunk, len);
            const uint8_t *got = (const uint8_t *)infos[i].data + off;
#ifdef PCCL_HAS_CUDA
            if (cuda) {
                if (!have || pccl_cuda_copy_d2h(have, got, len) != 0) return 1;
                got = have;
            }
#endif
            if (memcmp(chunk, got, len) != 0) {
                fprintf(stderr, "tensor %s differs from seed %llu at offset %zu\n", infos[i].name,
                        (unsigned long long)expect_seed, off);
                failures++;
                break;
            }
        }
        uint64_t h = 0;
#ifdef PCCL_HAS_CUDA
        if (cuda && pccl_simplehash_cuda(infos[i].data, nb, &h) != 0) failures++;
#endif
        if (!cuda) h = pccl_simplehash(infos[i].data, nb);
        state_hash = state_hash * 1000003u ^ h;
    }
    free(chunk);
    free(have);

    double ar_result = 0;
    if (do_allreduce) {
        float x[1024];
        for (int i = 0; i < 1024; i++) x[i] = (float)ar_value;
        pcclReduceDescriptor_t d = {.count = 1024, .op = pcclSum, .tag = 1,
                                    .src_descriptor = {.datatype = pcclFloat}};
        if (pcclAllReduce(x, x, &d, comm, NULL) != pcclSuccess) failures++;
        ar_result = x[1023];
        for (int i = 0; i < 1024; i++)
            if (x[i] != (float)expect_sum) {
                fprintf(stderr, "all-reduce gave %g, expected %g\n", x[i], expect_sum);
                failures++;
                break;
            }
    }
    int attr[4] = {0};
    for (int a = 0; a < 4; a++) pcclGetAttribute(comm, (pcclAttribute_t)(a + 1), &attr[a]);
    /* A joint vote as a barrier: nobody leaves while another peer still needs it. */
    pcclUpdateTopology(comm);
    printf("{\"event\":\"done\",\"result\":%d,\"tx\":%llu,\"rx\":%llu,\"state_bytes\":%llu,\"hash\":\"%016llx\","
           "\"revision\":%llu,\"global_world\":%d,\"group_world\":%d,\"groups\":%d,\"largest_group\":%d,"
           "\"allreduce\":%g,\"sync_ms\":%.1f,\"failures\":%d}\n",
           r, (unsigned long long)info.tx_bytes, (unsigned long long)info.rx_bytes, (unsigned long long)sum_bytes,
           (unsigned long long)state_hash, (unsigned long long)st.revision, attr[0], attr[1], attr[2], attr[3],
           ar_result, sync_ms, failures);
    fflush(stdout);
    pcclDestroyCommunicator(comm);
    for (uint64_t i = 0; i < ntensors; i++) {
#ifdef PCCL_HAS_CUDA
        if (cuda) {
            pccl_cuda_free(infos[i].data);
            continue;
        }
#endif
        free(infos[i].data);
    }
    free(infos);
    free(names);
    return failures ? 1 : 0;
}
