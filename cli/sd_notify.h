/*
 * sd_notify.h - systemd's readiness and watchdog protocol (sd_notify(3)) without libsystemd: newline-separated
 * VAR=value lines in one datagram to the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or '@' for an abstract
 * socket). Without $NOTIFY_SOCKET every call does nothing, so the commands behave the same outside systemd.
 */
#ifndef PCCL_SD_NOTIFY_H
#define PCCL_SD_NOTIFY_H

#include <stdint.h>

/* Sends state (e.g. "READY=1\nSTATUS=serving") to $NOTIFY_SOCKET without blocking. Returns 1 sent, 0 no
 * $NOTIFY_SOCKET (nothing to do), -1 the socket is malformed or the send failed (the caller goes on). */
int sd_notify_send(const char *state);
/* The same with printf formatting. */
int sd_notify_sendf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The watchdog timeout systemd asks this process to honour (WATCHDOG_USEC, in microseconds), or 0 when none is
 * set, it is not a positive number, or WATCHDOG_PID names another process. */
uint64_t sd_notify_watchdog_usec(void);
/* How often to send WATCHDOG=1 for a timeout of usec: half of it, as sd_watchdog_enabled(3) advises, in ms
 * (at least 1); 0 for no watchdog. */
uint64_t sd_notify_ping_ms(uint64_t usec);

#endif
