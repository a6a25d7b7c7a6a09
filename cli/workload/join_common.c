/* join_common.c - what the join workloads share: the local configuration check, stop signals, reporting and
 * topology helpers. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "join.h"
#include "join_notify.h"
#include "pccl_leave.h"

/* The stop thread: SIGTERM and SIGINT are blocked in every thread and taken here by sigwait, so a
 * library call in progress can be cut short by pcclExtLeave from this thread (a handler could only set
 * a flag, and a call waiting for a lost master would not look at it). */
static atomic_int stop_requested, main_done, leave_done;
static pcclComm_t *stop_comm; /* guarded by stop_mu */
static pcclResult_t leave_result;
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv = PTHREAD_COND_INITIALIZER;
static sigset_t stop_set;

static void *stop_main(void *arg) {
    (void)arg;
    int sig = 0;
    while (sigwait(&stop_set, &sig) != 0) {}
    atomic_store(&stop_requested, 1);
    join_notify_stopping();
    /* pcclExtLeave refuses a communicator whose pcclConnect has not begun: until the main thread either
     * begins it (then the leave cancels it) or is done with it, ask again. stop_mu keeps the
     * communicator alive while it is used here. */
    pcclResult_t r = pcclSuccess; /* nothing to leave: stopped before joining */
    for (;;) {
        pthread_mutex_lock(&stop_mu);
        pcclComm_t *c = stop_comm;
        int done = atomic_load(&main_done);
        pcclResult_t lr = c ? pcclExtLeave(c) : pcclInvalidUsage;
        pthread_mutex_unlock(&stop_mu);
        if (lr != pcclInvalidUsage) r = lr;
        if (lr != pcclInvalidUsage || done) break;
        usleep(10000);
    }
    pthread_mutex_lock(&stop_mu);
    leave_result = r;
    atomic_store(&leave_done, 1);
    pthread_cond_broadcast(&stop_cv);
    pthread_mutex_unlock(&stop_mu);
    /* A second signal ends the process at once, with the status the signal would have given it. */
    while (sigwait(&stop_set, &sig) != 0) {}
    _exit(128 + sig);
    return NULL;
}

int join_catch_stop_signals(void) {
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGTERM);
    sigaddset(&stop_set, SIGINT);
    /* Before any other thread exists: every thread inherits the mask, so only stop_main takes them. */
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, stop_main, NULL) != 0) return -1;
    pthread_detach(th);
    return 0;
}

void join_stop_watch(pcclComm_t *comm) {
    pthread_mutex_lock(&stop_mu);
    stop_comm = comm;
    if (!comm) atomic_store(&main_done, 1);
    pthread_mutex_unlock(&stop_mu);
}

int join_stop_requested(void) { return atomic_load(&stop_requested); }

pcclResult_t join_stop_finish(void) {
    pthread_mutex_lock(&stop_mu);
    atomic_store(&main_done, 1);
    while (!atomic_load(&leave_done)) pthread_cond_wait(&stop_cv, &stop_mu); /* pcclExtLeave is bounded */
    pcclResult_t r = leave_result;
    pthread_mutex_unlock(&stop_mu);
    return r;
}

void join_sleep_ms(uint32_t ms) {
    for (uint32_t slept = 0; slept < ms && !join_stop_requested(); slept += 20) usleep(ms - slept < 20 ? (ms - slept) * 1000u : 20000u);
}

int join_run_over(pcclResult_t r) { return r == pcclMasterConnectionFailed || r == pcclExtRunShutDown; }

int join_load_data(const join_opts_t *o, join_data_t *d, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    if (!strcmp(o->workload, JOIN_WORKLOAD_SYNTHETIC)) {
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
        if (join_run_over(r) || join_stop_requested()) return -1;
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

int join_reduce_outcome(const join_opts_t *o, pcclResult_t r, uint32_t *rejected, uint64_t *retries,
                        const char *discard_event) {
    if (join_stop_requested() || join_run_over(r)) return -1;
    int rej = join_check_rejected(o, r, rejected);
    if (rej < 0) return -1;
    if (rej > 0 || r == pcclTooFewPeers || r == pcclRankConnectionLost) {
        ++*retries;
        if (!rej && discard_event) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "event", discard_event);
            cJSON_AddStringToObject(e, "error", pcclResultString(r));
            join_emit(o, e);
        }
        return 1;
    }
    if (r == pcclSuccess) return 0;
    cli_err("pccl join: all-reduce failed: %s\n", pcclResultString(r));
    return -1;
}

cJSON *join_step_event(uint64_t step, uint64_t revision, const pcclReduceInfo_t *ri,
                       const pcclSharedStateSyncInfo_t *si, double ms) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "event", "step");
    cJSON_AddNumberToObject(e, "step", (double)step);
    cJSON_AddNumberToObject(e, "revision", (double)revision);
    cJSON_AddNumberToObject(e, "world_size", ri->local_world_size);
    cJSON_AddNumberToObject(e, "tx_bytes", (double)ri->tx_bytes);
    cJSON_AddNumberToObject(e, "rx_bytes", (double)ri->rx_bytes);
    cJSON_AddNumberToObject(e, "ss_tx_bytes", (double)si->tx_bytes);
    cJSON_AddNumberToObject(e, "ss_rx_bytes", (double)si->rx_bytes);
    cJSON_AddNumberToObject(e, "ms", ms);
    return e;
}

int join_begin_step(pcclComm_t *comm, const join_opts_t *o, pcclSharedState_t *ss, int *first,
                    pcclSharedStateSyncInfo_t *si) {
    if (join_await_world(comm, o, JOIN_DEFAULT_MIN_WORLD, first) != 0 || join_stop_requested()) return -1;
    memset(si, 0, sizeof *si);
    pcclResult_t r = pcclSynchronizeSharedState(comm, ss, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, si);
    if (join_run_over(r) || join_stop_requested()) return -1;
    if (r != pcclSuccess) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "event", "sync_failed");
        cJSON_AddStringToObject(e, "error", pcclResultString(r));
        join_emit(o, e);
        return 1;
    }
    return ss->revision >= o->steps ? JOIN_STEPS_DONE : 0;
}
