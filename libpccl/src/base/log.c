/* log.c - see log.h. */
#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/err.h"

static atomic_int g_level = -1;
static atomic_int g_json = -1;
/* The sink and the threads inside it, counted per generation (its parity): replacing the sink starts a
 * generation and waits only for the threads of the one before, so that steady logging cannot starve it. */
static pthread_mutex_t g_sink_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_sink_setter_mu = PTHREAD_MUTEX_INITIALIZER; /* one replacement at a time */
static pthread_cond_t g_sink_cv = PTHREAD_COND_INITIALIZER;
static pcclToolLogSink_t g_sink;
static void *g_sink_ctx;
static unsigned g_sink_gen;
static unsigned g_sink_inside[2];

int pccl_log_parse_level(const char *s) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (s && strcasecmp(s, names[i]) == 0) return i;
    return -PERR_INVALID;
}

static int level_now(void) {
    int l = atomic_load(&g_level);
    if (l < 0) {
        l = pccl_log_parse_level(getenv("PCCL_LOG_LEVEL"));
        if (l < 0) l = PCCL_LOG_WARN;
        atomic_store(&g_level, l);
    }
    return l;
}

static int json_now(void) {
    int j = atomic_load(&g_json);
    if (j < 0) {
        const char *f = getenv("PCCL_LOG_FORMAT");
        j = f && strcasecmp(f, "json") == 0;
        atomic_store(&g_json, j);
    }
    return j;
}

void pccl_log_set_level(pccl_log_level_t level) { atomic_store(&g_level, (int)level); }
void pccl_log_set_json(int json) { atomic_store(&g_json, json ? 1 : 0); }
int pccl_log_enabled(pccl_log_level_t level) { return (int)level <= level_now(); }

void pccl_log_set_sink(pcclToolLogSink_t sink, void *ctx) {
    pthread_mutex_lock(&g_sink_setter_mu);
    pthread_mutex_lock(&g_sink_mu);
    unsigned old = g_sink_gen++ & 1u;
    g_sink = sink;
    g_sink_ctx = ctx;
    while (g_sink_inside[old] > 0) pthread_cond_wait(&g_sink_cv, &g_sink_mu);
    pthread_mutex_unlock(&g_sink_mu);
    pthread_mutex_unlock(&g_sink_setter_mu);
}

/* 1 when the installed sink took the record. */
static int to_sink(pccl_log_level_t level, const char *component, const char *msg) {
    pthread_mutex_lock(&g_sink_mu);
    pcclToolLogSink_t sink = g_sink;
    void *ctx = g_sink_ctx;
    unsigned gen = g_sink_gen & 1u;
    if (sink) g_sink_inside[gen]++;
    pthread_mutex_unlock(&g_sink_mu);
    if (!sink) return 0;
    sink(level, component ? component : "pccl", msg, ctx);
    pthread_mutex_lock(&g_sink_mu);
    if (--g_sink_inside[gen] == 0) pthread_cond_broadcast(&g_sink_cv);
    pthread_mutex_unlock(&g_sink_mu);
    return 1;
}

/* Writes one record of msg (level filtering is the caller's). */
static void write_record(pccl_log_level_t level, const char *component, const char *msg) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[96];
    snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(ts.tv_nsec / 1000000) % 1000);

    char line[8600];
    int n;
    if (json_now()) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "ts", when);
        cJSON_AddStringToObject(o, "level", names[level]);
        cJSON_AddStringToObject(o, "component", component ? component : "pccl");
        cJSON_AddStringToObject(o, "msg", msg);
        char *s = cJSON_PrintUnformatted(o);
        n = snprintf(line, sizeof line, "%s\n", s ? s : "{}");
        cJSON_free(s);
        cJSON_Delete(o);
    } else {
        n = snprintf(line, sizeof line, "%s %-5s [%s] %s\n", when, names[level], component ? component : "pccl", msg);
    }
    if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}

void pccl_log_v(pccl_log_level_t level, const char *component, const char *fmt, va_list ap) {
    if (!pccl_log_enabled(level)) return;
    char msg[8192];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (!to_sink(level, component, msg)) write_record(level, component, msg);
}

void pccl_log(pccl_log_level_t level, const char *component, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pccl_log_v(level, component, fmt, ap);
    va_end(ap);
}

void pccl_log_vplain(pccl_log_level_t level, const char *fmt, va_list ap) {
    char msg[8192];
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    if (n < 0) return;
    if (n > (int)sizeof msg - 1) n = (int)sizeof msg - 1;
    if (!json_now()) {
        ssize_t w = write(STDERR_FILENO, msg, (size_t)n);
        (void)w;
        return;
    }
    for (char *line = msg; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        write_record(level, "cli", line);
        if (!nl) break;
        line = nl + 1;
    }
}

void pccl_log_plain(pccl_log_level_t level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pccl_log_vplain(level, fmt, ap);
    va_end(ap);
}
