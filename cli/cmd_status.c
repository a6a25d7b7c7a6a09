/*
 * cmd_status.c - `pccl status`: asks a master's admin port for /v1/status and
 * prints a table (or the raw JSON), once or every few seconds. The exit code
 * is the health verdict, so scripts can branch on it (the table shows each
 * group's step rate and reduced bytes per second, which the master measures):
 *   0 healthy, 2 usage error, 3 master unreachable, 4 run stalled,
 *   5 no progress, 6 no peers.
 * Stalled: the run has accepted peers and an operation has been voting or
 * running for longer than --stall-after seconds (the peers it waits on are
 * named). No progress: accepted peers, but a group's revision has not advanced
 * for --stall-after seconds. No peers: the master has no accepted peer.
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

#include "admin_client.h"
#include "cli.h"
#include "opts/shared.h"
#include "pccl.h"

#define STATUS_EXIT_STALLED 4
#define STATUS_EXIT_NO_PROGRESS 5
#define STATUS_EXIT_NO_PEERS 6

/* Defaults of --watch and --stall-after, in seconds. */
#define STATUS_WATCH_S 2
#define STATUS_STALL_AFTER_S 60

static const cli_flag_t flags[] = {
#include "opts/status.def"
    {0},
};

static int run(int argc, char **argv);

const cli_command_t cli_cmd_status = {
    .name = "status",
    .summary = "show the peers, rings and operations of a run (exit 0 healthy, 3 unreachable, 4 stalled, ...)",
    .usage = "[--admin] [--json] [--watch] [--stall-after] [--timeout]",
    .flags = flags,
    .run = run,
    .renamed = cli_admin_renamed,
    .help_footer = "\nexit codes: 0 healthy, 2 usage error, 3 master unreachable, 4 run stalled (accepted peers and an"
                   "\noperation voting or running for longer than --stall-after), 5 no progress (accepted peers but a"
                   "\ngroup's revision unchanged for --stall-after), 6 no peers (none accepted)\n",
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

/* The health verdict of a status document, and what the health line names. */
typedef struct health {
    int rc;             /* CLI_EXIT_OK or STATUS_EXIT_* */
    const cJSON *op;    /* stalled: the oldest operation */
    double group;       /* no progress: the group whose revision stands still longest */
    double age_ms;      /* the operation's age, or the time since that group's revision advanced */
} health_t;

/* The oldest operation in flight (run-wide or of any group), or NULL. */
static const cJSON *oldest_op(const cJSON *st) {
    const cJSON *best = NULL, *op, *g;
    cJSON_ArrayForEach(op, cJSON_GetObjectItemCaseSensitive(st, "run_operations"))
        if (!best || num(op, "age_ms") > num(best, "age_ms")) best = op;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(st, "groups"))
        cJSON_ArrayForEach(op, cJSON_GetObjectItemCaseSensitive(g, "operations"))
            if (!best || num(op, "age_ms") > num(best, "age_ms")) best = op;
    return best;
}

/* Stalled (an operation older than stall_ms) before no progress (a group's revision unchanged that long) before
 * no peers: each later verdict is implied by or excludes the earlier ones. */
static health_t judge(const cJSON *st, double stall_ms) {
    health_t h = {.rc = CLI_EXIT_OK};
    int accepted = 0;
    const cJSON *p, *g;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(st, "peers")) accepted += strcmp(str(p, "phase"), "accepted") == 0;
    if (!accepted) {
        h.rc = STATUS_EXIT_NO_PEERS;
        return h;
    }
    h.op = oldest_op(st);
    if (h.op && num(h.op, "age_ms") > stall_ms) {
        h.rc = STATUS_EXIT_STALLED;
        h.age_ms = num(h.op, "age_ms");
        return h;
    }
    h.op = NULL;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(st, "groups")) {
        const cJSON *age = cJSON_GetObjectItemCaseSensitive(g, "last_revision_advance_ms_ago");
        if (cJSON_IsNumber(age) && age->valuedouble > stall_ms && age->valuedouble > h.age_ms) {
            h.rc = STATUS_EXIT_NO_PROGRESS;
            h.group = num(g, "id");
            h.age_ms = age->valuedouble;
        }
    }
    return h;
}

/* " 841080d3, 533ce814" from an array of uuids (8 digits each, as the table shows them). */
static void print_uuids(const cJSON *uuids) {
    const cJSON *u;
    int first = 1;
    cJSON_ArrayForEach(u, uuids) {
        printf("%s%.8s", first ? " " : ", ", cJSON_GetStringValue(u) ? cJSON_GetStringValue(u) : "?");
        first = 0;
    }
}

static void print_health(const health_t *h) {
    switch (h->rc) {
    case STATUS_EXIT_NO_PEERS: printf("health: NO PEERS (the master has no accepted peer)\n"); break;
    case STATUS_EXIT_NO_PROGRESS:
        printf("health: NO PROGRESS (group %.0f's revision has not advanced for %.1fs)\n", h->group, h->age_ms / 1000);
        break;
    case STATUS_EXIT_STALLED: {
        const cJSON *waiting = cJSON_GetObjectItemCaseSensitive(h->op, "waiting_on");
        printf("health: STALLED (%s %s for %.1fs", str(h->op, "kind"), str(h->op, "state"), h->age_ms / 1000);
        if (cJSON_GetArraySize(waiting) > 0) {
            printf(", waiting on");
            print_uuids(waiting);
        }
        printf(")\n");
        break;
    }
    default: printf("health: ok\n");
    }
}

static void print_ops(const cJSON *ops) {
    const cJSON *op;
    cJSON_ArrayForEach(op, ops) {
        const cJSON *tag = cJSON_GetObjectItemCaseSensitive(op, "tag");
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(op, "op_seq");
        const char *coll = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "collective_kind"));
        printf("  %s", str(op, "kind"));
        if (coll) printf(" %s", coll);
        if (cJSON_IsNumber(tag)) printf(" tag %.0f", tag->valuedouble);
        printf(": %s", str(op, "state"));
        if (cJSON_IsNumber(seq)) printf(" (op_seq %.0f)", seq->valuedouble);
        printf(", %.0f members, %.1fs", num(op, "members"), num(op, "age_ms") / 1000);
        const cJSON *waiting = cJSON_GetObjectItemCaseSensitive(op, "waiting_on");
        if (cJSON_GetArraySize(waiting) > 0) {
            printf(", waiting on");
            print_uuids(waiting);
        }
        printf("\n");
    }
}

/* Prints b bytes in decimal units: "12.3 MB". */
static void print_bytes(double b) {
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    for (; b >= 1000 && u < 4; u++) b /= 1000;
    printf("%.1f %s", b, units[u]);
}

/* ", 1.9 rev/s, 12.3 MB/s reduced" from the group's rates; nothing while the master has none yet. */
static void print_rates(const cJSON *g) {
    const cJSON *revs = cJSON_GetObjectItemCaseSensitive(g, "revisions_per_s");
    const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(g, "reduced_bytes_per_s");
    if (!cJSON_IsNumber(revs) || !cJSON_IsNumber(bytes)) return;
    printf("  %.1f rev/s, ", revs->valuedouble);
    print_bytes(bytes->valuedouble);
    printf("/s reduced");
}

/* "<prefix>all_reduce 120 completed, 1 aborted, 0 rejected, 1.2 GB; broadcast ..." from a collectives_by_kind
 * object: the kinds with any operation; nothing when none has one. */
static void print_kinds(const char *prefix, const cJSON *by_kind) {
    const cJSON *k;
    int first = 1;
    cJSON_ArrayForEach(k, by_kind) {
        double done = num(k, "completed"), aborted = num(k, "aborted"), rejected = num(k, "rejected");
        if (done + aborted + rejected == 0) continue;
        printf("%s%s %.0f completed, %.0f aborted, %.0f rejected, ", first ? prefix : "; ", k->string, done, aborted,
               rejected);
        print_bytes(num(k, "bytes"));
        first = 0;
    }
    if (!first) printf("\n");
}

/* "by algorithm: ring 12, rd 340" from a collectives_by_algorithm object: the algorithms that ran; nothing when
 * none did. */
static void print_algos(const cJSON *by_algo) {
    const cJSON *a;
    int first = 1;
    cJSON_ArrayForEach(a, by_algo) {
        if (!cJSON_IsNumber(a) || a->valuedouble <= 0) continue;
        printf("%s%s %.0f", first ? "by algorithm: " : ", ", a->string, a->valuedouble);
        first = 0;
    }
    if (!first) printf("\n");
}

/* NAT traversal (docs/nat.md): peers the master could not dial and edges that were not dialled directly, with
 * the observed address punches use; nothing when every peer is reachable and every edge direct. */
static void print_nat(const cJSON *peers) {
    const cJSON *p;
    int header = 0;
    cJSON_ArrayForEach(p, peers) {
        const cJSON *reach = cJSON_GetObjectItemCaseSensitive(p, "reachable"), *e;
        int line = cJSON_IsFalse(reach);
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(p, "edges")) line |= strcmp(str(e, "kind"), "direct") != 0;
        if (!line) continue;
        if (!header) printf("\nNAT traversal (peer: reachable, observed address, edges not dialled directly):\n");
        header = 1;
        printf("  %.8s: %s, observed %s", str(p, "uuid"), cJSON_IsFalse(reach) ? "unreachable" : "reachable",
               *str(p, "observed") ? str(p, "observed") : "-");
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(p, "edges"))
            if (strcmp(str(e, "kind"), "direct") != 0) printf(", %s with %.8s", str(e, "kind"), str(e, "peer"));
        printf("\n");
    }
}

static void print_table(const cJSON *st, const char *where, const health_t *h) {
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
    print_nat(peers);
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
        print_kinds("  collectives: ", cJSON_GetObjectItemCaseSensitive(g, "collectives_by_kind"));
        print_ops(cJSON_GetObjectItemCaseSensitive(g, "operations"));
    }
    const cJSON *run_ops = cJSON_GetObjectItemCaseSensitive(st, "run_operations");
    if (cJSON_GetArraySize(run_ops) > 0) {
        printf("\nrun-wide:\n");
        print_ops(run_ops);
    }
    printf("\ncollectives: %.0f completed, %.0f aborted, %.0f rejected; syncs: %.0f; peers kicked: %.0f, left: %.0f; "
           "control: %.0f packets in, %.0f bytes out\n",
           num(c, "collectives_completed"), num(c, "collectives_aborted"), num(c, "collectives_rejected"),
           num(c, "syncs"), num(c, "peers_kicked"), num(c, "peers_left"), num(c, "control_packets_received"),
           num(c, "control_bytes_sent"));
    print_kinds("by kind: ", cJSON_GetObjectItemCaseSensitive(c, "collectives_by_kind"));
    print_algos(cJSON_GetObjectItemCaseSensitive(c, "collectives_by_algorithm"));
    print_health(h);
}

/* Now as ISO 8601 UTC to the second ("2026-11-28T07:50:00Z"). */
static void iso_now(char out[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* One poll of the admin port; prints and returns the exit code. watch: a frame of --watch (its time first). */
static int status_once(const ccoip_socket_address_t *addr, const char *where, int json, int watch, int timeout_ms,
                       double stall_ms) {
    char err[320];
    int code = 0;
    char *body = cli_http_get(addr, "/v1/status", timeout_ms, &code, err, sizeof err);
    if (!body) {
        cli_err("pccl status: master admin port %s unreachable: %s\n", where, err);
        return CLI_EXIT_UNREACHABLE;
    }
    cJSON *st = code == 200 ? cJSON_Parse(body) : NULL;
    if (!cJSON_IsObject(st)) {
        cli_err("pccl status: %s did not answer with a status document (HTTP %d)\n", where, code);
        cJSON_Delete(st);
        free(body);
        return CLI_EXIT_UNREACHABLE;
    }
    health_t h = judge(st, stall_ms);
    char now[32];
    iso_now(now);
    if (json) { /* one line per document, with the time it was read and the verdict */
        cJSON_AddStringToObject(st, "time", now);
        static const char *const verdicts[] = {[CLI_EXIT_OK] = "ok", [STATUS_EXIT_STALLED] = "stalled",
                                               [STATUS_EXIT_NO_PROGRESS] = "no progress",
                                               [STATUS_EXIT_NO_PEERS] = "no peers"};
        cJSON_AddStringToObject(st, "health", verdicts[h.rc]);
        char *line = cJSON_PrintUnformatted(st);
        printf("%s\n", line ? line : body);
        free(line);
    } else {
        if (watch) printf("%s\n", now);
        print_table(st, where, &h);
    }
    fflush(stdout);
    cJSON_Delete(st);
    free(body);
    return h.rc;
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
        int rc = cli_parse_addr(cmd, name, value, CLI_ADMIN_DEFAULT_PORT, &a->addr, CLI_EXIT_UNREACHABLE);
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
    status_args_t a = {.every = STATUS_WATCH_S, .stall_s = STATUS_STALL_AFTER_S, .timeout = ADMIN_CLIENT_TIMEOUT_MS};
    int rc = cli_parse_flags(&cli_cmd_status, argc, argv, on_flag, &a, NULL);
    if (rc != CLI_FLAGS_GO_ON) return rc;
    if (!a.where && (rc = cli_admin_addr(&cli_cmd_status, &a.addr, &a.where)) != CLI_FLAGS_GO_ON) return rc;
    if (!a.watch) return status_once(&a.addr, a.where, a.json, 0, (int)a.timeout, a.stall_s * 1000);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    rc = CLI_EXIT_OK;
    /* Only a terminal gets its screen cleared; a pipe or file gets plain tables, one after the other. */
    int tty = isatty(STDOUT_FILENO);
    for (int n = 0; !stop_requested; n++) {
        if (!a.json && tty) printf("\033[H\033[2J");
        else if (!a.json && n > 0) printf("\n");
        rc = status_once(&a.addr, a.where, a.json, 1, (int)a.timeout, a.stall_s * 1000);
        struct timespec d = {(time_t)a.every, (long)((a.every - (double)(time_t)a.every) * 1e9)};
        while (!stop_requested && nanosleep(&d, &d) != 0 && errno == EINTR) {
        }
    }
    return rc;
}
