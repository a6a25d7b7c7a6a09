/*
 * cmd_status.c - `pccl status`: asks a master's admin port for /v1/status and
 * prints a table (or the raw JSON), once or every few seconds. The exit code
 * is the health verdict, so scripts can branch on it (the table shows each
 * group's step rate and reduced bytes per second, which the master measures):
 *   0 healthy, 3 master unreachable, 4 run stalled, 2 usage error.
 * Stalled: the run has accepted peers and an operation has been voting or
 * running for longer than --stall-after seconds.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "pccl.h"

#define STATUS_EXIT_UNREACHABLE 3
#define STATUS_EXIT_STALLED 4

static const cli_flag_t flags[] = {
    {"admin", required_argument, "HOST:PORT", "admin port of the master (default 127.0.0.1:48152)"},
    {"json", no_argument, NULL, "print the raw /v1/status JSON"},
    {"watch", optional_argument, "[SECONDS]", "refresh every SECONDS (default 2) until interrupted"},
    {"stall-after", required_argument, "SECONDS", "an operation in flight longer than this is a stall (default 60)"},
    {"timeout", required_argument, "MS", "connect and read timeout (default 3000)"},
    {"log-level", required_argument, "LEVEL", "error, warn, info or debug (env PCCL_LOG_LEVEL)"},
    {"log-format", required_argument, "FORMAT", "text or json (env PCCL_LOG_FORMAT)"},
    {0},
};

static int run(int argc, char **argv);

const cli_command_t cli_cmd_status = {
    .name = "status",
    .summary = "show the peers, rings and operations of a run (exit 0 healthy, 3 unreachable, 4 stalled)",
    .usage = "[--admin HOST:PORT] [--json] [--watch [SECONDS]] [--stall-after SECONDS] [--timeout MS]",
    .flags = flags,
    .run = run,
    .renamed = cli_admin_renamed,
    .help_footer = "\nexit codes: 0 healthy, 2 usage error, 3 master unreachable, 4 run stalled (accepted peers and an"
                   "\noperation voting or running for longer than --stall-after)\n",
};

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *k) {
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "?";
}

/* Accepted peers exist and some operation is older than stall_ms. */
static int is_stalled(const cJSON *st, double stall_ms, double *oldest) {
    int accepted = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(st, "peers")) accepted += strcmp(str(p, "phase"), "accepted") == 0;
    *oldest = num(st, "oldest_operation_age_ms");
    return accepted > 0 && *oldest > stall_ms;
}

static void print_ops(const cJSON *ops) {
    const cJSON *op;
    cJSON_ArrayForEach(op, ops) {
        const cJSON *tag = cJSON_GetObjectItemCaseSensitive(op, "tag");
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(op, "op_seq");
        printf("  %s", str(op, "kind"));
        if (cJSON_IsNumber(tag)) printf(" tag %.0f", tag->valuedouble);
        printf(": %s", str(op, "state"));
        if (cJSON_IsNumber(seq)) printf(" (op_seq %.0f)", seq->valuedouble);
        printf(", %.0f members, %.1fs\n", num(op, "members"), num(op, "age_ms") / 1000);
    }
}

/* ", 1.9 rev/s, 12.3 MB/s reduced" from the group's rates; nothing while the master has none yet. */
static void print_rates(const cJSON *g) {
    const cJSON *revs = cJSON_GetObjectItemCaseSensitive(g, "revisions_per_s");
    const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(g, "reduced_bytes_per_s");
    if (!cJSON_IsNumber(revs) || !cJSON_IsNumber(bytes)) return;
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
    double b = bytes->valuedouble;
    int u = 0;
    for (; b >= 1000 && u < 4; u++) b /= 1000;
    printf("  %.1f rev/s, %.1f %s/s reduced", revs->valuedouble, b, units[u]);
}

static void print_table(const cJSON *st, const char *where, int stalled, double oldest) {
    const cJSON *peers = cJSON_GetObjectItemCaseSensitive(st, "peers");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(st, "counters");
    printf("master %s (pccl %s, control port %.0f, up %.0fs): %d peers\n\n", where, str(st, "version"),
           num(st, "master_port"), num(st, "uptime_ms") / 1000, cJSON_GetArraySize(peers));
    printf("%-10s %-16s %-21s %5s  %-10s %-13s %9s %10s\n", "PEER", "NAME", "ADDRESS", "GROUP", "PHASE", "STATE",
           "REVISION", "HEARTBEAT");
    const cJSON *p;
    cJSON_ArrayForEach(p, peers) {
        char addr[80];
        const char *ip = str(p, "address");
        int v6 = strchr(ip, ':') != NULL; /* "[::1]:port", as the CLI's flags take it */
        snprintf(addr, sizeof addr, "%s%s%s:%.0f", v6 ? "[" : "", ip, v6 ? "]" : "", num(p, "p2p_port"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "name"));
        printf("%-10.8s %-16s %-21s %5.0f  %-10s %-13s %9.0f %8.1fs\n", str(p, "uuid"), name && *name ? name : "-", addr,
               num(p, "group"),
               str(p, "phase"), str(p, "state"), num(p, "revision"), num(p, "last_heartbeat_ms_ago") / 1000);
    }
    const cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(st, "groups")) {
        printf("\ngroup %.0f ring:", num(g, "id"));
        const cJSON *r;
        int first = 1;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(g, "ring")) {
            printf("%s%.8s", first ? " " : " -> ", cJSON_GetStringValue(r) ? cJSON_GetStringValue(r) : "?");
            first = 0;
        }
        if (first) printf(" (empty)");
        const cJSON *rev = cJSON_GetObjectItemCaseSensitive(g, "last_revision");
        if (cJSON_IsNumber(rev)) printf("  (revision %.0f)", rev->valuedouble);
        print_rates(g);
        printf("\n");
        print_ops(cJSON_GetObjectItemCaseSensitive(g, "operations"));
    }
    const cJSON *run_ops = cJSON_GetObjectItemCaseSensitive(st, "run_operations");
    if (cJSON_GetArraySize(run_ops) > 0) {
        printf("\nrun-wide:\n");
        print_ops(run_ops);
    }
    printf("\ncollectives: %.0f completed, %.0f aborted; syncs: %.0f; peers kicked: %.0f, left: %.0f; "
           "control: %.0f packets in, %.0f bytes out\n",
           num(c, "collectives_completed"), num(c, "collectives_aborted"), num(c, "syncs"), num(c, "peers_kicked"),
           num(c, "peers_left"), num(c, "control_packets_received"), num(c, "control_bytes_sent"));
    if (stalled) printf("health: STALLED (an operation has been in flight for %.1fs)\n", oldest / 1000);
    else printf("health: ok\n");
}

/* One poll of the admin port; prints and returns the exit code. */
static int status_once(const ccoip_socket_address_t *addr, const char *where, int json, int timeout_ms,
                       double stall_ms) {
    char err[320];
    int code = 0;
    char *body = cli_http_get(addr, "/v1/status", timeout_ms, &code, err, sizeof err);
    if (!body) {
        cli_err("pccl status: master admin port %s unreachable: %s\n", where, err);
        return STATUS_EXIT_UNREACHABLE;
    }
    cJSON *st = code == 200 ? cJSON_Parse(body) : NULL;
    if (!cJSON_IsObject(st)) {
        cli_err("pccl status: %s did not answer with a status document (HTTP %d)\n", where, code);
        cJSON_Delete(st);
        free(body);
        return STATUS_EXIT_UNREACHABLE;
    }
    double oldest;
    int stalled = is_stalled(st, stall_ms, &oldest);
    if (json) printf("%s\n", body);
    else print_table(st, where, stalled, oldest);
    fflush(stdout);
    cJSON_Delete(st);
    free(body);
    return stalled ? STATUS_EXIT_STALLED : CLI_EXIT_OK;
}

/* Flag values of `pccl status`, filled by on_flag. */
typedef struct {
    ccoip_socket_address_t addr;
    const char *where;
    int json, watch;
    double every, stall_s, timeout;
} status_args_t;

#define MAX_SECONDS (86400.0 * 365) /* a longer interval is a typo */

static int on_flag(void *ctx, const char *name, const char *value) {
    const cli_command_t *cmd = &cli_cmd_status;
    status_args_t *a = ctx;
    if (strcmp(name, "admin") == 0) {
        int rc = cli_parse_addr(cmd, name, value, CLI_ADMIN_DEFAULT_PORT, &a->addr, STATUS_EXIT_UNREACHABLE);
        if (rc != 0) return rc;
        a->where = value;
    } else if (strcmp(name, "json") == 0) {
        a->json = 1;
    } else if (strcmp(name, "watch") == 0) {
        a->watch = 1;
        if (value && cli_parse_positive(value, MAX_SECONDS, &a->every) != 0)
            return cli_usage_error(cmd, "bad --watch interval '%s'", value);
    } else if (strcmp(name, "stall-after") == 0) {
        if (cli_parse_positive(value, MAX_SECONDS, &a->stall_s) != 0)
            return cli_usage_error(cmd, "bad --stall-after '%s'", value);
    } else if (strcmp(name, "timeout") == 0) {
        if (cli_parse_positive(value, 600000, &a->timeout) != 0)
            return cli_usage_error(cmd, "bad --timeout '%s' (milliseconds)", value);
    }
    return 0;
}

static int run(int argc, char **argv) {
    status_args_t a = {.where = "127.0.0.1:48152", .every = 2, .stall_s = 60, .timeout = 3000};
    cli_parse_addr(&cli_cmd_status, "admin", a.where, CLI_ADMIN_DEFAULT_PORT, &a.addr, CLI_EXIT_FAIL);
    int rc = cli_parse_flags(&cli_cmd_status, argc, argv, on_flag, &a, NULL);
    if (rc != CLI_FLAGS_GO_ON) return rc;
    if (!a.watch) return status_once(&a.addr, a.where, a.json, (int)a.timeout, a.stall_s * 1000);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    rc = CLI_EXIT_OK;
    /* Only a terminal gets its screen cleared; a pipe or file gets plain tables, one after the other. */
    int tty = isatty(STDOUT_FILENO);
    for (int n = 0; !stop_requested; n++) {
        if (!a.json && tty) printf("\033[H\033[2J");
        else if (!a.json && n > 0) printf("\n");
        rc = status_once(&a.addr, a.where, a.json, (int)a.timeout, a.stall_s * 1000);
        struct timespec d = {(time_t)a.every, (long)((a.every - (double)(time_t)a.every) * 1e9)};
        while (!stop_requested && nanosleep(&d, &d) != 0 && errno == EINTR) {
        }
    }
    return rc;
}
