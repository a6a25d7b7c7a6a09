/* test_wait.c - the cancellable wait (base/wait.h): one cancel ends a lock-based sleep and makes the eventfd
 * readable, the first reason wins, deadlines end sleeps, a reset opens it again, a set cancels every
 * member at once (sticky: later members start cancelled), and a spinning sleep returns without sleeping until
 * its spin ends (holding the mutex again), then sleeps to its deadline, and ends at once when cancelled. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include "base/err.h"
#include "base/net.h"
#include "base/wait.h"
#include "tinytest.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static int readable(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

typedef struct {
    pwait_t *w;
    int rc;
    uint64_t took;
} sleeper_t;

static void *sleep_until_cancelled(void *arg) {
    sleeper_t *s = arg;
    uint64_t t0 = net_now_ms();
    pthread_mutex_lock(s->w->mu);
    int r;
    while ((r = pwait_sleep(s->w, net_now_ms() + 10000)) == 0) {
    }
    pthread_mutex_unlock(s->w->mu);
    s->rc = r;
    s->took = net_now_ms() - t0;
    return NULL;
}

static void test_cancel_wakes_both_ways(void) {
    pwait_t w;
    CHECK(pwait_init(&w, &mu, NULL, 1) == 0);
    CHECK(pwait_result(&w) == 0 && !readable(w.fd));
    sleeper_t s = {.w = &w};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, sleep_until_cancelled, &s) == 0);
    usleep(50 * 1000);
    CHECK(pwait_cancel(&w, -PERR_ABORTED) == 1);
    CHECK(pwait_cancel(&w, -PERR_LOST) == 0); /* the first reason wins */
    pthread_join(th, NULL);
    CHECK(s.rc == -PERR_ABORTED && s.took < 5000);
    CHECK(readable(w.fd));
    pwait_reset(&w);
    CHECK(pwait_result(&w) == 0 && !readable(w.fd));
    pwait_destroy(&w);
}

static void test_deadline(void) {
    pwait_t w;
    CHECK(pwait_init(&w, &mu, NULL, 0) == 0);
    CHECK(w.fd == -1);
    uint64_t t0 = net_now_ms();
    CHECK(pwait_pause(&w, 60) == 0);
    CHECK(net_now_ms() - t0 >= 60);
    pthread_mutex_lock(&mu);
    int r;
    while ((r = pwait_sleep(&w, net_now_ms() + 30)) == 0) {
    }
    pthread_mutex_unlock(&mu);
    CHECK(r == -PERR_TIMEOUT);
    pwait_cancel(&w, -PERR_CANCELLED);
    t0 = net_now_ms();
    CHECK(pwait_pause(&w, 5000) == -PERR_CANCELLED && net_now_ms() - t0 < 100);
    pwait_destroy(&w);
}

static void test_set(void) {
    pwait_set_t set;
    pwait_set_init(&set, &mu);
    pwait_t a, b, late;
    CHECK(pwait_init(&a, &mu, NULL, 1) == 0 && pwait_init(&b, &mu, NULL, 0) == 0 &&
          pwait_init(&late, &mu, NULL, 0) == 0);
    pthread_mutex_lock(&mu);
    pwait_set_add_locked(&set, &a);
    pwait_set_add_locked(&set, &b);
    CHECK(pwait_set_cancel_locked(&set, -PERR_RESTARTED, 0) == 2); /* not sticky */
    CHECK(pwait_result(&a) == -PERR_RESTARTED && pwait_result(&b) == -PERR_RESTARTED && readable(a.fd));
    pwait_set_remove_locked(&a);
    pwait_set_remove_locked(&b);
    pwait_set_add_locked(&set, &late);
    CHECK(pwait_result(&late) == 0 && pwait_set_sticky(&set) == 0);
    CHECK(pwait_set_cancel_locked(&set, -PERR_CANCELLED, 1) == 1);
    pwait_set_remove_locked(&late);
    pwait_reset(&a);
    pwait_set_add_locked(&set, &a); /* after a sticky cancel a new member starts cancelled */
    CHECK(pwait_result(&a) == -PERR_CANCELLED && pwait_set_sticky(&set) == -PERR_CANCELLED);
    pwait_set_remove_locked(&a);
    CHECK(set.head == NULL);
    pthread_mutex_unlock(&mu);
    pwait_destroy(&a);
    pwait_destroy(&b);
    pwait_destroy(&late);
}

static void test_spin(void) {
    pwait_t w;
    CHECK(pwait_init(&w, &mu, NULL, 0) == 0);
    pthread_mutex_lock(&mu);
    /* Nobody signals: a plain sleep would last to the deadline, a spinning one returns (mu held again) until the
     * spin ends, many times within it. */
    uint64_t spin_until = pwait_now_us() + 20000, deadline = net_now_ms() + 5000;
    int returns = 0, r = 0;
    while (pwait_now_us() < spin_until && (r = pwait_sleep_spin(&w, deadline, spin_until)) == 0) {
        CHECK(pthread_mutex_trylock(&mu) == EBUSY);
        returns++;
    }
    CHECK(r == 0 && returns > 1);
    CHECK(net_now_ms() < deadline); /* it never slept to the deadline */
    /* After the spin it sleeps: up to the deadline when nothing comes. */
    uint64_t t0 = net_now_ms();
    while ((r = pwait_sleep_spin(&w, net_now_ms() + 40, spin_until)) == 0) {
    }
    CHECK(r == -PERR_TIMEOUT && net_now_ms() - t0 >= 40);
    /* A deadline already passed ends a spin too, and a cancelled wait ends it with its reason. */
    CHECK(pwait_cond_sleep_spin(w.cv, &mu, net_now_ms() - 1, pwait_now_us() + 1000000) == -PERR_TIMEOUT);
    pwait_cancel_locked(&w, -PERR_ABORTED);
    CHECK(pwait_sleep_spin(&w, 0, pwait_now_us() + 1000000) == -PERR_ABORTED);
    pthread_mutex_unlock(&mu);
    pwait_destroy(&w);
}

int main(void) {
    RUN_TEST(test_cancel_wakes_both_ways);
    RUN_TEST(test_deadline);
    RUN_TEST(test_set);
    RUN_TEST(test_spin);
    TEST_MAIN_END();
}
