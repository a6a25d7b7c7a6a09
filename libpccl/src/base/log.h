/*
 * log.h - leveled logging to stderr (internal).
 *
 * Level comes from PCCL_LOG_LEVEL (error|warn|info|debug, default warn) or
 * pccl_log_set_level; format from PCCL_LOG_FORMAT (text|json). Each line has a
 * UTC timestamp, the level and the component (e.g. "master", or a peer's uuid prefix).
 * Thread-safe: one write(2) per line.
 */
#ifndef PCCL_LOG_H
#define PCCL_LOG_H

#include <stdarg.h>

#include "pccl_tools.h" /* the levels: tools set them through pcclToolLog* */

typedef pcclLogLevel_t pccl_log_level_t;

void pccl_log_set_level(pccl_log_level_t level);
/** Parses "error", "warn", "info", "debug". @return the pccl_log_level_t, or -PERR_INVALID if unknown. */
int pccl_log_parse_level(const char *s);
void pccl_log_set_json(int json);
/** Records go to sink (NULL: stderr); returns once no thread is inside the previous sink. */
void pccl_log_set_sink(pcclToolLogSink_t sink, void *ctx);
int pccl_log_enabled(pccl_log_level_t level);
void pccl_log(pccl_log_level_t level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void pccl_log_v(pccl_log_level_t level, const char *component, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/**
 * A message meant for the person at the terminal (a command's error, a warning, progress): in text format
 * written to stderr exactly as formatted; in JSON format one record per line of it, with this level and
 * component "cli", so that every stderr line of the process parses as JSON. Printed whatever the log level.
 */
void pccl_log_plain(pccl_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pccl_log_vplain(pccl_log_level_t level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#define PLOG_ERROR(comp, ...) pccl_log(PCCL_LOG_ERROR, comp, __VA_ARGS__)
#define PLOG_WARN(comp, ...) pccl_log(PCCL_LOG_WARN, comp, __VA_ARGS__)
#define PLOG_INFO(comp, ...) \
    do { if (pccl_log_enabled(PCCL_LOG_INFO)) pccl_log(PCCL_LOG_INFO, comp, __VA_ARGS__); } while (0)
#define PLOG_DEBUG(comp, ...) \
    do { if (pccl_log_enabled(PCCL_LOG_DEBUG)) pccl_log(PCCL_LOG_DEBUG, comp, __VA_ARGS__); } while (0)

#endif
