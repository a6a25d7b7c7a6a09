/* join_common.c - what the join workloads share: the local configuration check, stop signals, reporting and
 * topology helpers. */
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "join.h"

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

void join_catch_stop_signals(void) {
    /* SA_RESETHAND: the second signal finds the default action, which ends the process. */
    struct sigaction act = {.sa_handler = on_stop_signal, .sa_flags = SA_RESTART | SA_RESETHAND};
    sigemptyset(&act.sa_mask);
    sigaction(SIGTERM, &act, NULL);
    sigaction(SIGINT, &act, NULL);
}

int join_stop_requested(void) { return stop_requested; }

int join_load_data(const join_opts_t *o, join_data_t *d, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    if (!strcmp(o->workload, "synthetic")) {
        /* Each of the --tensors concurrent all-reduces needs one float of --size at least. */
        if (o->size_bytes / sizeof(float) < o->tensors) {
            snprintf(err, errlen, "--tensors %u needs %u float elements, --size %llu holds %llu", o->tensors,
                     o->tensors, (unsigned long long)o->size_bytes,
                     (unsigned long long)(o->size_bytes / sizeof(float)));
            return -1;
        }
        return 0;
    }
    const char *dir = o->data_dir ? o->data_dir : MNIST_DEFAULT_DIR;
    char why[200];
    if (mnist_load(dir, "train", &d->train, why, sizeof why) != 0 ||
        mnist_load(dir, "t10k", &d->test, why, sizeof why) != 0) {
        snprintf(err, errlen, "cannot load Fashion-MNIST from %s: %s", dir, why);
        join_data_free(d);
        return -1;
    }
    return 0;
}

void join_data_free(join_data_t *d) {
    mnist_free(&d->train);
    mnist_free(&d->test);
}

void join_hex64(uint64_t v, char out[17]) { snprintf(out, 17, "%016llx", (unsigned long long)v); }

void join_emit(const join_opts_t *o, cJSON *obj) {
    if (o->json) {
        char *s = cJSON_PrintUnformatted(obj);
        if (s) printf("%s\n", s);
        cJSON_free(s);
    } else {
        const cJSON *it;
        int first = 1;
        cJSON_ArrayForEach(it, obj) {
            if (!first) fputc(' ', stdout);
            first = 0;
            if (cJSON_IsString(it)) printf("%s=%s", it->string, it->valuestring);
            else if (cJSON_IsBool(it)) printf("%s=%s", it->string, cJSON_IsTrue(it) ? "true" : "false");
            else if (cJSON_IsNumber(it) && it->valuedouble == (double)(long long)it->valuedouble)
                printf("%s=%lld", it->string, (long long)it->valuedouble);
            else if (cJSON_IsNumber(it)) printf("%s=%.4f", it->string, it->valuedouble);
        }
        fputc('\n', stdout);
    }
    fflush(stdout);
    cJSON_Delete(obj);
}

/* Re-orders the ring by measured bandwidth after the membership changed (all peers see the
 * same global world size after an update, so they all call it together). */
void join_maybe_optimize(pcclComm_t *comm, const join_opts_t *o) {
    static int last_world = -1;
    int gws = 0;
    pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &gws);
    if (!o->optimize || gws == last_world) return;
    pcclResult_t r = pcclOptimizeTopology(comm);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "event", "optimize_topology");
    cJSON_AddBoolToObject(e, "ok", r == pcclSuccess);
    if (r != pcclSuccess) cJSON_AddStringToObject(e, "error", pcclResultString(r));
    cJSON_AddNumberToObject(e, "world_size", gws);
    join_emit(o, e);
    if (r == pcclSuccess) last_world = gws;
}

int join_await_world(pcclComm_t *comm, const join_opts_t *o, int min_world, int *first) {
    /* Until the first step ran, wait for --min-world peers so that runs start together. */
    static int started;
    if (!started && (int)o->min_world > min_world) min_world = (int)o->min_world;
    started = 1;
    /* pcclConnect returned inside the same accept round that the others' pcclUpdateTopology
     * completed, so a newcomer skips its first update or it would vote alone (PCCL's "if i > 0"). */
    if (*first) {
        *first = 0;
        int ws = 0;
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws);
        if (ws >= min_world) {
            join_maybe_optimize(comm, o);
            return 0;
        }
    }
    for (int attempt = 0;; attempt++) {
        if (join_stop_requested()) return -1;
        pcclResult_t r = pcclUpdateTopology(comm);
        if (r == pcclMasterConnectionFailed) return -1;
        if (r != pcclSuccess) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "event", "update_topology_failed");
            cJSON_AddStringToObject(e, "error", pcclResultString(r));
            join_emit(o, e);
            usleep(100000);
            continue;
        }
        int ws = 0;
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws);
        if (ws >= min_world) {
            join_maybe_optimize(comm, o);
            return 0;
        }
        if (attempt % 50 == 0) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "event", "waiting_for_peers");
            cJSON_AddNumberToObject(e, "world_size", ws);
            join_emit(o, e);
        }
        usleep(100000);
    }
}

int join_check_rejected(const join_opts_t *o, pcclResult_t r, uint32_t *in_a_row) {
    if (r != pcclInvalidUsage) {
        *in_a_row = 0;
        return 0;
    }
    static const char reason[] = "the master rejected the all-reduce: another peer passed a different count, dtype, "
                                 "op or quantization for its tag, or the peers are in different operations";
    ++*in_a_row;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "event", "step_rejected");
    cJSON_AddStringToObject(e, "error", pcclResultString(r));
    cJSON_AddStringToObject(e, "reason", reason);
    cJSON_AddNumberToObject(e, "in_a_row", *in_a_row);
    cJSON_AddNumberToObject(e, "max_rejections", o->max_rejections);
    join_emit(o, e);
    if (*in_a_row < o->max_rejections) return 1;
    cli_err("pccl join: giving up after %u rejected all-reduces in a row: %s (--max-rejections)\n",
            *in_a_row, reason);
    return -1;
}

int join_begin_step(pcclComm_t *comm, const join_opts_t *o, pcclSharedState_t *ss, int *first,
                    pcclSharedStateSyncInfo_t *si) {
    if (join_await_world(comm, o, 2, first) != 0 || join_stop_requested()) return -1;
    memset(si, 0, sizeof *si);
    pcclResult_t r = pcclSynchronizeSharedState(comm, ss, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, si);
    if (r == pcclMasterConnectionFailed) return -1;
    if (r != pcclSuccess) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "event", "sync_failed");
        cJSON_AddStringToObject(e, "error", pcclResultString(r));
        join_emit(o, e);
        return 1;
    }
    return 0;
}
