/*
 * wait.h - a cancellable wait (pwait_t): the one object every blocking path of a peer waits through.
 *
 * A wait carries its result (0 while open, else -PERR_<NAME>) and two ways to sleep that one call ends:
 * pwait_cancel sets the result (the first reason wins), makes fd readable and broadcasts cv.
 *  - poll()-based I/O (ring I/O, connects, handshakes, the acceptor's hand-over) adds fd to its pollfd set:
 *    one more descriptor, no timer slices;
 *  - lock-based waits (the inbox, an operation's messages) sleep on cv under the owner's mutex with
 *    pwait_sleep, up to an absolute deadline on the net_now_ms clock.
 * A set (pwait_set_t) holds an owner's outstanding waits so that one call ends all of them: a communicator
 * cancels every wait at once for a leave or a destroy (sticky: a wait added afterwards starts cancelled)
 * and the waits of one master connection when it is lost (not sticky: the next connection's waits run).
 * Locking: cv and the set's list are guarded by the owner's mutex (mu), which pwait_cancel takes; the
 * _locked variants are for callers that hold it. result is atomic, so a poll loop reads it without mu.
 */
#ifndef PCCL_WAIT_H
#define PCCL_WAIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct pwait_set pwait_set_t;

typedef struct pwait {
    int fd;               /* eventfd, readable once cancelled; -1 for a wait made without one */
    pthread_mutex_t *mu;  /* the owner's mutex, held around pwait_sleep */
    pthread_cond_t *cv;   /* what pwait_sleep sleeps on: own_cv, or a condition variable the owner shares */
    pthread_cond_t own_cv;
    atomic_int result;    /* 0 open, else -PERR_<NAME> */
    pwait_set_t *set;     /* the set it is in, NULL if none */
    struct pwait *prev, *next;
} pwait_t;

struct pwait_set {
    pthread_mutex_t *mu;
    pwait_t *head;
    atomic_int sticky; /* 0, or the reason every wait added from now on starts cancelled with */
};

/* A condition variable on net_now_ms's clock: every cv a pwait sleeps on is made this way. @return 0 or -PERR_FAILED. */
int pwait_cond_init(pthread_cond_t *cv);
/* One sleep on cv (made by pwait_cond_init; caller holds mu) until signalled or deadline_ms (0: none).
 * @return 0, or -PERR_TIMEOUT once deadline_ms passed. */
int pwait_cond_sleep(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ms);

/* The monotonic clock of net_now_ms in microseconds (spins are shorter than a millisecond). */
uint64_t pwait_now_us(void);
/* As pwait_cond_sleep, but until spin_until_us (pwait_now_us clock; 0: no spin) it does not sleep: it releases
 * mu, gives the core to any thread that is ready to run (sched_yield) and takes mu again. The caller looks again
 * either way, so an answer that comes within the spin is seen without a wake-up of this thread (a sleeping
 * thread is woken by a futex and, where its core idles, an interrupt). Only for hosts where the threads a
 * waiter waits for have cores of their own; elsewhere the yield still hands the core over. @return 0, or
 * -PERR_TIMEOUT once deadline_ms passed. */
int pwait_cond_sleep_spin(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ms, uint64_t spin_until_us);
/* A wait under mu. with_fd: make the eventfd (poll()-based I/O needs it); cv: a condition variable used with
 * mu to share (inbox waiters share the communicator's), or NULL for its own; either made by pwait_cond_init.
 * @return 0, or -PERR_FAILED (no eventfd; errno set). */
int pwait_init(pwait_t *w, pthread_mutex_t *mu, pthread_cond_t *cv, int with_fd);
/* Releases what pwait_init made; w must not be in a set. */
void pwait_destroy(pwait_t *w);
/* Opens w again (result 0, fd drained) for reuse; w must not be in a set and nobody may wait on it. */
void pwait_reset(pwait_t *w);
/* Ends w with reason (< 0, -PERR_<NAME>) unless it ended already; takes w->mu (the _locked variant: the
 * caller holds it). @return 1 if this call ended it. */
int pwait_cancel(pwait_t *w, int reason);
int pwait_cancel_locked(pwait_t *w, int reason);
/* 0 while open, else the reason it ended with. */
int pwait_result(const pwait_t *w);
/* Sleeps on w->cv (caller holds w->mu) until woken, cancelled, or deadline_ms (net_now_ms clock; 0: none).
 * @return 0 (woken: the caller looks again), the cancel reason, or -PERR_TIMEOUT once deadline_ms passed. */
int pwait_sleep(pwait_t *w, uint64_t deadline_ms);
/* As pwait_sleep, spinning first until spin_until_us as pwait_cond_sleep_spin does. */
int pwait_sleep_spin(pwait_t *w, uint64_t deadline_ms, uint64_t spin_until_us);
/* Sleeps up to ms (or until cancelled), holding nothing on entry; @return as pwait_sleep, 0 once ms passed. */
int pwait_pause(pwait_t *w, int ms);

/* A set whose list is guarded by mu. */
void pwait_set_init(pwait_set_t *s, pthread_mutex_t *mu);
/* Adds w (caller holds the set's mu); w starts cancelled if the set was cancelled for good. */
void pwait_set_add_locked(pwait_set_t *s, pwait_t *w);
void pwait_set_remove_locked(pwait_t *w);
/* Ends every wait in s with reason (caller holds the set's mu); sticky: also those added later.
 * @return how many it ended. */
int pwait_set_cancel_locked(pwait_set_t *s, int reason, int sticky);
/* The reason s was cancelled for good with, else 0. */
int pwait_set_sticky(const pwait_set_t *s);

#endif
