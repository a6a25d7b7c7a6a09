/*
 * ss_peer.c - one peer of the shared-state end-to-end tests (test_ss_*.sh).
 *
 * Usage: ss_peer PORT [--world N] [--group G] [--strategy enforce|recv|send]
 *                [--revision R] [--seed S] [--expect-seed S] [--tensors N]
 *                [--bytes TOTAL] [--allreduce V --expect-sum X] [--expect-result CODE]
 *                [--cuda 1] [--syncs K] [--sync-delay-ms MS] [--lie-after-ms MS]
 *                [--die-after-sent BYTES] [--final-check 0|1]
 *
 * Builds a shared state of N tensors cycling through every dtype whose sizes
 * add up to TOTAL bytes; content is a function of (seed, tensor, offset), and
 * seed 0 means all zeros (a fresh newcomer). After joining (accept rounds until
 * the run has N peers) it synchronizes K times (default 1) with the given
 * strategy: the first sync must return --expect-result (default success), the
 * others success. After each it prints a "sync" event that sorts the tensors
 * into "new" (the --expect-seed content), "old" (its own seed's) and "torn"
 * (neither). Then it checks the bytes chunk by chunk against --expect-seed (no
 * second copy of a large state; --final-check 0 skips that, for a last sync
 * that is meant to fail with some tensors landed), optionally all-reduces V within its group, and
 * prints one "done" JSON line with tx/rx bytes, the state hash and the four
 * attributes.
 * Faults (ss_faults.h): --sync-delay-ms waits before the first sync;
 * --lie-after-ms changes a byte of the last tensor that long into the first
 * sync (after it was hashed) and restores it when the sync returns, so what
 * this peer serves meanwhile does not match the hash it announced;
 * --die-after-sent SIGKILLs this peer once it has sent that many bytes (over
 * all its connections) during the first sync.
 * --cuda 1 keeps every tensor in GPU memory (hashed on the GPU, staged through
 * the host by the library); without a usable device it prints
 * "SKIP: no CUDA device" and exits 77 before connecting.
 * Exit 0 when every check passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2e_peer.h"
#include "pccl.h"
#include "pccl_kernels.h"
#include "ss_faults.h"

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

/* 1 if tensor t (index i) holds seed's content; compared in 1 MiB chunks (through the host for CUDA),
 * chunk and have are 1 MiB scratch buffers. *at is the first differing offset. */
static int holds_seed(const pcclTensorInfo_t *t, uint64_t i, uint64_t seed, int cuda, uint8_t *chunk, uint8_t *have,
                      size_t *at) {
    size_t nb = tensor_bytes(t);
    for (size_t off = 0; off < nb; off += 1 << 20) {
        size_t len = nb - off < (1u << 20) ? nb - off : (1u << 20);
        gen(seed, i, off, chunk, len);
        const uint8_t *got = (const uint8_t *)t->data + off;
#ifdef PCCL_HAS_CUDA
        if (cuda) {
            if (pccl_cuda_copy_d2h(have, got, len) != 0) return 0;
            got = have;
        }
#else
        (void)cuda;
        (void)have;
#endif
        if (memcmp(chunk, got, len) != 0) {
            *at = off;
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int world = 2, expect_result = pcclSuccess, do_allreduce = 0, cuda = 0, syncs = 1, final_check = 1;
    unsigned group = 0;
    long sync_delay_ms = 0, lie_after_ms = -1;
    uint64_t revision = 1, seed = 1, expect_seed = 1, ntensors = 16, total = 1 << 20, die_after = 0;
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
        else if (!strcmp(k, "--syncs")) syncs = atoi(v);
        else if (!strcmp(k, "--sync-delay-ms")) sync_delay_ms = atol(v);
        else if (!strcmp(k, "--lie-after-ms")) lie_after_ms = atol(v);
        else if (!strcmp(k, "--die-after-sent")) die_after = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--final-check")) final_check = atoi(v);
        else if (!strcmp(k, "--strategy"))
            strategy = !strcmp(v, "recv")   ? PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY
                       : !strcmp(v, "send") ? PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY
                                            : PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR;
        else return 2;
    }
    if (ntensors == 0 || ntensors > 10000 || syncs < 1 || (cuda && lie_after_ms >= 0)) return 2;
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

    pcclComm_t *comm = e2e_connect(argv[1], group, 1);
    if (!comm) return 1;
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

    uint8_t *chunk = malloc(1 << 20), *have = malloc(1 << 20);
    if (!chunk || !have) return 1;
    pcclSharedStateSyncInfo_t info = {0};
    pcclResult_t r = pcclSuccess;
    double sync_ms = 0;
    int fresh = 0; /* tensors holding the --expect-seed content after the last sync */
    if (sync_delay_ms > 0) sleep_ms(sync_delay_ms);
    for (int k = 0; k < syncs; k++) {
        liar_t liar;
        const pcclTensorInfo_t *last = &infos[ntensors - 1];
        int lying = k == 0 && lie_after_ms >= 0 && tensor_bytes(last) &&
                    liar_start(&liar, comm, last->data, lie_after_ms) == 0;
        int watching = k == 0 && die_after;
        if (watching) die_arm(die_after);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        r = pcclSynchronizeSharedState(comm, &st, strategy, &info);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (watching) die_disarm();
        if (lying) liar_end(&liar);
        sync_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        int want = k == 0 ? expect_result : pcclSuccess;
        if ((int)r != want) {
            fprintf(stderr, "sync %d returned %d (%s), expected %d\n", k, r, pcclResultString(r), want);
            failures++;
        }
        int old = 0, torn = 0;
        fresh = 0;
        for (uint64_t i = 0; i < ntensors; i++) {
            size_t at = 0;
            if (holds_seed(&infos[i], i, expect_seed, cuda, chunk, have, &at)) fresh++;
            else if (holds_seed(&infos[i], i, seed, cuda, chunk, have, &at)) old++;
            else torn++;
        }
        printf("{\"event\":\"sync\",\"i\":%d,\"result\":%d,\"tx\":%llu,\"rx\":%llu,\"revision\":%llu,"
               "\"new\":%d,\"old\":%d,\"torn\":%d}\n",
               k, r, (unsigned long long)info.tx_bytes, (unsigned long long)info.rx_bytes,
               (unsigned long long)st.revision, fresh, old, torn);
        fflush(stdout);
    }

    /* After the last sync every tensor holds the --expect-seed content. */
    uint64_t state_hash = 0;
    for (uint64_t i = 0; i < ntensors; i++) {
        size_t nb = tensor_bytes(&infos[i]), at = 0;
        if (final_check && fresh != (int)ntensors && !holds_seed(&infos[i], i, expect_seed, cuda, chunk, have, &at)) {
            fprintf(stderr, "tensor %s differs from seed %llu at offset %zu\n", infos[i].name,
                    (unsigned long long)expect_seed, at);
            failures++;
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
