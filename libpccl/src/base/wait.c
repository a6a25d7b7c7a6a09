/*
 * wait.c - the cancellable wait (wait.h).
 */
#include "base/wait.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"

/* net_now_ms's clock (read here so that net.c, which polls a wait's fd, and this file do not include each other) */
static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t pwait_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int pwait_cond_init(pthread_cond_t *cv) {
    pthread_condattr_t a;
    if (pthread_condattr_init(&a) != 0) return -PERR_FAILED;
    /* net_now_ms's clock, so a deadline does not move with the wall clock */
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return rc == 0 ? 0 : -PERR_FAILED;
}

int pwait_cond_sleep(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ms) {
    if (!deadline_ms) {
        pthread_cond_wait(cv, mu);
        return 0;
    }
    if (now_ms() >= deadline_ms) return -PERR_TIMEOUT;
    struct timespec ts = {.tv_sec = (time_t)(deadline_ms / 1000), .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
    return pthread_cond_timedwait(cv, mu, &ts) == ETIMEDOUT && now_ms() >= deadline_ms ? -PERR_TIMEOUT : 0;
}

int pwait_cond_sleep_spin(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ms, uint64_t spin_until_us) {
    if (!spin_until_us || pwait_now_us() >= spin_until_us) return pwait_cond_sleep(cv, mu, deadline_ms);
    if (deadline_ms && now_ms() >= deadline_ms) return -PERR_TIMEOUT;
    pthread_mutex_unlock(mu);
    sched_yield();
    pthread_mutex_lock(mu);
    return 0;
}

int pwait_init(pwait_t *w, pthread_mutex_t *mu, pthread_cond_t *cv, int with_fd) {
    w->fd = -1;
    if (with_fd && (w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) return -PERR_FAILED;
    if (!cv && pwait_cond_init(&w->own_cv) != 0) {
        if (w->fd >= 0) close(w->fd);
        return -PERR_FAILED;
    }
    w->mu = mu;
    w->cv = cv ? cv : &w->own_cv;
    atomic_init(&w->result, 0);
    w->set = NULL;
    w->prev = w->next = NULL;
    return 0;
}

void pwait_destroy(pwait_t *w) {
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    if (w->cv == &w->own_cv) pthread_cond_destroy(&w->own_cv);
}

void pwait_reset(pwait_t *w) {
    uint64_t v;
    if (w->fd >= 0) {
        ssize_t n = read(w->fd, &v, sizeof v); /* drained; nothing to do when it was not readable */
        (void)n;
    }
    atomic_store(&w->result, 0);
}

int pwait_cancel_locked(pwait_t *w, int reason) {
    int open = 0;
    if (!atomic_compare_exchange_strong(&w->result, &open, reason < 0 ? reason : -PERR_CANCELLED)) return 0;
    if (w->fd >= 0) {
        uint64_t one = 1;
        ssize_t n = write(w->fd, &one, sizeof one); /* fails only when the counter is full: readable already */
        (void)n;
    }
    pthread_cond_broadcast(w->cv);
    return 1;
}

int pwait_cancel(pwait_t *w, int reason) {
    pthread_mutex_lock(w->mu);
    int ended = pwait_cancel_locked(w, reason);
    pthread_mutex_unlock(w->mu);
    return ended;
}

int pwait_result(const pwait_t *w) { return atomic_load(&w->result); }

int pwait_sleep_spin(pwait_t *w, uint64_t deadline_ms, uint64_t spin_until_us) {
    int r = pwait_result(w);
    if (r) return r;
    int slept = pwait_cond_sleep_spin(w->cv, w->mu, deadline_ms, spin_until_us);
    r = pwait_result(w);
    return r ? r : slept;
}

int pwait_sleep(pwait_t *w, uint64_t deadline_ms) { return pwait_sleep_spin(w, deadline_ms, 0); }

int pwait_pause(pwait_t *w, int ms) {
    uint64_t until = now_ms() + (uint64_t)(ms > 0 ? ms : 0);
    pthread_mutex_lock(w->mu);
    int r;
    while ((r = pwait_sleep(w, until)) == 0) {
    }
    pthread_mutex_unlock(w->mu);
    return r == -PERR_TIMEOUT ? 0 : r;
}

void pwait_set_init(pwait_set_t *s, pthread_mutex_t *mu) {
    s->mu = mu;
    s->head = NULL;
    atomic_init(&s->sticky, 0);
}

void pwait_set_add_locked(pwait_set_t *s, pwait_t *w) {
    w->set = s;
    w->prev = NULL;
    w->next = s->head;
    if (s->head) s->head->prev = w;
    s->head = w;
    int why = atomic_load(&s->sticky);
    if (why) pwait_cancel_locked(w, why);
}

void pwait_set_remove_locked(pwait_t *w) {
    pwait_set_t *s = w->set;
    if (!s) return;
    if (w->prev) w->prev->next = w->next;
    else s->head = w->next;
    if (w->next) w->next->prev = w->prev;
    w->set = NULL;
    w->prev = w->next = NULL;
}

int pwait_set_cancel_locked(pwait_set_t *s, int reason, int sticky) {
    int zero = 0;
    if (sticky) atomic_compare_exchange_strong(&s->sticky, &zero, reason);
    int n = 0;
    for (pwait_t *w = s->head; w; w = w->next) n += pwait_cancel_locked(w, reason);
    return n;
}

int pwait_set_sticky(const pwait_set_t *s) { return atomic_load(&s->sticky); }
