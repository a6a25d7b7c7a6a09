/* join_notify.c - readiness and watchdog of `pccl join` for systemd (join_notify.h). */
#include "join_notify.h"

#include <string.h>
#include <time.h>

#include "pccl_tools.h"
#include "pccl_leave.h"
#include "sd_notify.h"

/* Whether the peer is alive (join_notify.h); *world is the run's size as this peer last heard it. */
static int peer_alive(pcclComm_t *comm, int *world) {
    /* pcclGetAttribute takes the communicator's lock: if a thread holds it for good, this call never returns
     * and the pings stop, as they should. */
    if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, world) != pcclSuccess) return 0;
    pcclExtDeparture_t how = pcclExtInRun;
    pcclExtGetDeparture(comm, &how);
    return how == pcclExtInRun;
}

static void *watchdog_main(void *arg) {
    join_notify_t *n = arg;
    struct timespec due;
    clock_gettime(CLOCK_MONOTONIC, &due);
    int last_world = -1;
    pthread_mutex_lock(&n->mu);
    while (!n->quit) {
        pthread_mutex_unlock(&n->mu);
        int world = 0;
        if (!peer_alive(n->comm, &world)) {
            pcclToolLog(PCCL_LOG_INFO, "join", "out of the run: systemd watchdog pings stop");
            pthread_mutex_lock(&n->mu);
            break;
        }
        if (world != last_world) {
            sd_notify_sendf("WATCHDOG=1\nSTATUS=in the run (world size %d)", world);
            last_world = world;
        } else {
            sd_notify_send("WATCHDOG=1");
        }
        due.tv_sec += (time_t)(n->every_ms / 1000);
        due.tv_nsec += (long)(n->every_ms % 1000) * 1000000L;
        if (due.tv_nsec >= 1000000000L) {
            due.tv_sec++;
            due.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&n->mu);
        while (!n->quit && pthread_cond_timedwait(&n->cv, &n->mu, &due) == 0) {
        }
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

void join_notify_start(join_notify_t *n, pcclComm_t *comm) {
    memset(n, 0, sizeof *n);
    n->comm = comm;
    /* A failed send (the manager busy) still leaves the watchdog to run: its pings are what keeps the unit. */
    if (sd_notify_send("READY=1\nSTATUS=accepted into the run") == 0) return;
    n->every_ms = sd_notify_ping_ms(sd_notify_watchdog_usec());
    if (!n->every_ms) return;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&n->mu, NULL);
    if (pthread_create(&n->thread, NULL, watchdog_main, n) == 0) {
        n->started = 1;
        return;
    }
    pcclToolLog(PCCL_LOG_WARN, "join", "cannot start the systemd watchdog thread");
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
}

void join_notify_stopping(void) { sd_notify_send("STOPPING=1\nSTATUS=leaving the run"); }

void join_notify_end(join_notify_t *n) {
    if (!n->started) return;
    pthread_mutex_lock(&n->mu);
    n->quit = 1;
    pthread_cond_signal(&n->cv);
    pthread_mutex_unlock(&n->mu);
    pthread_join(n->thread, NULL);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
    n->started = 0;
}
