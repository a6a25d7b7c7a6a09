/*
 * cmd_bench_bandwidth.c - `pccl bench-bandwidth` (also `pccl bench p2p`):
 * measures one link in each direction with the same probe the master uses for
 * topology optimization (libpccl/src/p2p/bandwidth.c). A server side
 * (`--server`) answers probes; a client (`--connect`) measures upload
 * (client -> server) then download (server -> client). A pccl peer's p2p port
 * answers only its group's members, and only the upload direction. With a run
 * key (--key-file, or PCCL_KEY_FILE) every probe connection proves it first, as
 * in a keyed run; --encrypt on both sides seals the probe's bytes too, so the
 * figure is what an encrypted run's link delivers.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cjson/cJSON.h>

#include "cli.h"
#include "pccl_tools.h"
#include "opts/shared.h"
#include "pccl.h"

/* Defaults of the flags. */
#define BENCH_PORT 48150
#define BENCH_SECONDS 3
#define BENCH_STREAMS 1
/* Most addresses of a --connect name that are tried. */
#define BENCH_MAX_ADDRS 16

static const cli_flag_t flags[] = {
#include "opts/bench_bandwidth.def"
    {0},
};

static int run(int argc, char **argv);

const cli_command_t cli_cmd_bench_bandwidth = {
    .name = "bench-bandwidth",
    .alias = "bench p2p",
    .summary = "measure point-to-point bandwidth in each direction",
    .usage = "--server [--listen] [--key-file [--encrypt]] | --connect [--seconds] [--streams] [--key-file [--encrypt]] "
             "[--json] | --admin [--json]",
    .flags = flags,
    .run = run,
    .renamed = cli_admin_renamed,
};

static volatile sig_atomic_t g_stop;
/* The run key of a keyed probe (NULL: open), set before any thread starts and read-only after. */
static pcclToolKey_t *g_key;
/* Connections being served. The server waits for them (a while) before it returns, so that none is
 * still in the cipher when the process exits and OpenSSL frees its tables. */
static atomic_int g_serving;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static void *serve_one(void *arg) {
    int fd = (int)(intptr_t)arg;
    char err[160];
    if (pcclToolProbeServe(fd, g_key, 10000, PCCL_TOOL_PROBE_MAX_MS, err, sizeof err) != pcclSuccess)
        pcclToolLog(PCCL_LOG_INFO, "bench", "refused a connection: %s", err);
    close(fd);
    atomic_fetch_sub(&g_serving, 1);
    return NULL;
}

static int serve(const ccoip_socket_address_t *addr) {
    char where[PCCL_TOOL_ADDR_STRLEN];
    pcclToolAddressString(addr, 1, where);
    ccoip_socket_address_t bound;
    int fd = pcclToolProbeListen(addr, &bound);
    if (fd < 0) {
        cli_err("pccl bench-bandwidth: cannot listen on %s: %s\n", where, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    pcclToolAddressString(&bound, 1, where);
    struct sigaction act = {.sa_handler = on_signal};
    sigaction(SIGINT, &act, NULL);
    sigaction(SIGTERM, &act, NULL);
    pcclToolKeyKind_t kind = pcclToolKeyKind(g_key);
    printf("pccl bench-bandwidth server listening on %s%s\n", where,
           kind == pcclToolKeyEncrypted ? " (keyed, encrypted)" : kind == pcclToolKeyKeyed ? " (keyed)" : "");
    fflush(stdout);
    while (!g_stop) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0) continue;
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) continue;
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        atomic_fetch_add(&g_serving, 1);
        if (pthread_create(&t, &at, serve_one, (void *)(intptr_t)c) != 0) {
            close(c);
            atomic_fetch_sub(&g_serving, 1);
        }
        pthread_attr_destroy(&at);
    }
    close(fd);
    /* A probe still running is cut off after 2 s: its client then reports a failed measurement. */
    for (int i = 0; i < 200 && atomic_load(&g_serving) > 0; i++) usleep(10000);
    return CLI_EXIT_OK;
}

/* n x n row-major Mbit/s as [[...], ...]: the "bandwidth_mbps" that `pccl solve-topology --matrix` reads. */
static cJSON *matrix_json(const double *m, int n) {
    cJSON *rows = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(rows, cJSON_CreateDoubleArray(m + (size_t)i * n, n));
    return rows;
}

/* The upload measurement to each address of the server in turn until one succeeds (as a name's dialler tries every
 * address it resolves to); *addr becomes that address. */
static pcclResult_t measure_first(const ccoip_socket_address_t *addrs, int n, int seconds, int streams,
                                  ccoip_socket_address_t *addr, pcclToolProbeResult_t *res) {
    char where[PCCL_TOOL_ADDR_STRLEN];
    for (int i = 0; i < n; i++) {
        pcclToolAddressString(&addrs[i], 1, where);
        /* Progress goes to stderr so that stdout stays a clean table or JSON document. */
        pcclToolLogPlain(PCCL_LOG_INFO, "measuring upload to %s for %d s over %d stream(s)...\n", where, seconds,
                         streams);
        if (pcclToolProbe(&addrs[i], g_key, pcclToolProbeUpload, seconds * 1000, streams, 10000, res) == pcclSuccess) {
            *addr = addrs[i];
            return pcclSuccess;
        }
        cli_err("pccl bench-bandwidth: upload measurement to %s failed\n", where);
    }
    return pcclRankConnectionFailed;
}

static int measure(const ccoip_socket_address_t *addrs, int naddrs, int seconds, int streams, int json) {
    const char *names[2] = {"upload", "download"};
    pcclToolProbeResult_t res[2];
    ccoip_socket_address_t a, *addr = &a;
    if (measure_first(addrs, naddrs, seconds, streams, addr, &res[0]) != pcclSuccess) return CLI_EXIT_FAIL;
    char where[PCCL_TOOL_ADDR_STRLEN];
    pcclToolAddressString(addr, 1, where);
    pcclToolLogPlain(PCCL_LOG_INFO, "measuring download to %s for %d s over %d stream(s)...\n", where, seconds,
                     streams);
    if (pcclToolProbe(addr, g_key, pcclToolProbeDownload, seconds * 1000, streams, 10000, &res[1]) != pcclSuccess) {
        cli_err("pccl bench-bandwidth: download measurement to %s failed\n", where);
        return CLI_EXIT_FAIL;
    }
    if (json) {
        cJSON *o = cJSON_CreateObject();
        char ip[PCCL_TOOL_ADDR_STRLEN];
        pcclToolAddressString(addr, 0, ip);
        cJSON_AddStringToObject(o, "target", ip);
        cJSON_AddNumberToObject(o, "port", addr->port);
        cJSON_AddNumberToObject(o, "streams", streams);
        cJSON_AddNumberToObject(o, "seconds", seconds);
        pcclToolKeyKind_t kind = pcclToolKeyKind(g_key);
        cJSON_AddStringToObject(o, "security", kind == pcclToolKeyEncrypted ? "encrypted"
                                               : kind == pcclToolKeyKeyed   ? "keyed"
                                                                            : "open");
        for (int d = 0; d < 2; d++) {
            cJSON *r = cJSON_AddObjectToObject(o, names[d]);
            cJSON_AddNumberToObject(r, "mbps", res[d].mbps);
            cJSON_AddNumberToObject(r, "bytes", (double)res[d].bytes);
        }
        /* The same link as the matrix `pccl solve-topology` reads: peer 0 this client, peer 1 the server. */
        const double m[4] = {0, res[0].mbps, res[1].mbps, 0};
        const char *peers[2] = {"client", "server"};
        cJSON_AddItemToObject(o, "peers", cJSON_CreateStringArray(peers, 2));
        cJSON_AddItemToObject(o, "bandwidth_mbps", matrix_json(m, 2));
        char *s = cJSON_Print(o);
        printf("%s\n", s);
        cJSON_free(s);
        cJSON_Delete(o);
    } else {
        printf("%-10s %8s %14s %12s\n", "direction", "streams", "bytes", "Mbit/s");
        for (int d = 0; d < 2; d++)
            printf("%-10s %8d %14llu %12.1f\n", names[d], streams, (unsigned long long)res[d].bytes, res[d].mbps);
    }
    return CLI_EXIT_OK;
}

/* Index of id in ids (adding it if new). */
static int peer_index(const char **ids, int *n, const char *id) {
    for (int i = 0; i < *n; i++)
        if (strcmp(ids[i], id) == 0) return i;
    ids[*n] = id;
    return (*n)++;
}

/* The measured links of a /v1/topology document as an n x n matrix (row = sender, Mbit/s, 0 = not measured). */
typedef struct {
    int n;
    const char **ids; /* n uuids, pointing into the document */
    double *m;        /* n x n */
} bw_matrix_t;

static int matrix_from_topology(const cJSON *bw, bw_matrix_t *out) {
    int cap = 2 * cJSON_GetArraySize(bw), n = 0;
    const char **ids = calloc((size_t)cap + 1, sizeof *ids);
    double *links = calloc((size_t)cap * (size_t)cap + 1, sizeof *links);
    if (!ids || !links) {
        free(ids);
        free(links);
        return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, bw) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "from"), *t = cJSON_GetObjectItemCaseSensitive(e, "to");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "mbps");
        if (!cJSON_IsString(f) || !cJSON_IsString(t) || !cJSON_IsNumber(v)) continue;
        int i = peer_index(ids, &n, f->valuestring), j = peer_index(ids, &n, t->valuestring);
        links[i * cap + j] = v->valuedouble;
    }
    /* Compact the cap-wide rows into n-wide ones. */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) links[i * n + j] = links[i * cap + j];
    *out = (bw_matrix_t){.n = n, .ids = ids, .m = links};
    return 0;
}

static void print_matrix_table(const bw_matrix_t *x) {
    printf("measured bandwidth, Mbit/s (rows send, columns receive; - = not measured)\n%-10s", "from\\to");
    for (int j = 0; j < x->n; j++) printf(" %10.8s", x->ids[j]);
    printf("\n");
    for (int i = 0; i < x->n; i++) {
        printf("%-10.8s", x->ids[i]);
        for (int j = 0; j < x->n; j++)
            if (x->m[i * x->n + j] > 0) printf(" %10.1f", x->m[i * x->n + j]);
            else printf(" %10s", "-");
        printf("\n");
    }
}

/*
 * The run's measured links from GET /v1/topology, as a from x to matrix (Mbit/s). --json prints the document with
 * "peers" (uuids) and "bandwidth_mbps" (the matrix in their order) added, which `pccl solve-topology` reads.
 */
static int show_matrix(const ccoip_socket_address_t *admin, int json) {
    char err[320];
    int code = 0;
    char *body = cli_http_get(admin, "/v1/topology", 5000, &code, err, sizeof err);
    int reached = body != NULL;
    cJSON *doc = body && code == 200 ? cJSON_Parse(body) : NULL;
    free(body);
    if (!cJSON_IsObject(doc)) {
        cli_err("pccl bench-bandwidth: cannot read the master's topology: %s\n",
                !reached ? err : code != 200 ? "bad HTTP status" : "not a JSON document");
        cJSON_Delete(doc);
        return reached ? CLI_EXIT_FAIL : CLI_EXIT_UNREACHABLE; /* as status, kick and shutdown */
    }
    const cJSON *bw = cJSON_GetObjectItemCaseSensitive(doc, "bandwidth");
    bw_matrix_t x = {0};
    if (cJSON_IsArray(bw) && matrix_from_topology(bw, &x) != 0) {
        cli_err("pccl bench-bandwidth: out of memory\n");
        cJSON_Delete(doc);
        return CLI_EXIT_FAIL;
    }
    if (json) {
        cJSON_AddItemToObject(doc, "peers", x.n ? cJSON_CreateStringArray(x.ids, x.n) : cJSON_CreateArray());
        cJSON_AddItemToObject(doc, "bandwidth_mbps", matrix_json(x.m, x.n));
        char *s = cJSON_PrintUnformatted(doc);
        if (s) printf("%s\n", s);
        cJSON_free(s);
    } else if (x.n == 0) {
        printf("no bandwidth measured yet (peers measure during pcclOptimizeTopology)\n");
    } else {
        print_matrix_table(&x);
    }
    free(x.ids);
    free(x.m);
    cJSON_Delete(doc);
    return CLI_EXIT_OK;
}

/* Flag values of `pccl bench-bandwidth`, filled by on_flag. */
typedef struct {
    ccoip_socket_address_t listen_addr, admin, targets[BENCH_MAX_ADDRS];
    int server, have_target, ntargets, have_admin, json, encrypt;
    const char *key_file;
    uint64_t seconds, streams;
} bench_args_t;

/* --connect HOST:PORT: every address the name resolves to, tried in turn (exit codes as cli_parse_addr's). */
static int parse_targets(const cli_command_t *cmd, const char *value, ccoip_socket_address_t *out, int *n) {
    char err[512];
    pcclResult_t rc = pcclToolResolveAll(value, BENCH_PORT, out, BENCH_MAX_ADDRS, n, err, sizeof err);
    if (rc == pcclSuccess) return 0;
    if (rc == pcclInvalidArgument) return cli_usage_error(cmd, "--connect: %s", err);
    cli_err("pccl %s: --connect: %s\n", cmd->name, err);
    return CLI_EXIT_FAIL;
}

static int on_flag(void *ctx, const char *n, const char *value) {
    const cli_command_t *cmd = &cli_cmd_bench_bandwidth;
    bench_args_t *a = ctx;
    if (!strcmp(n, "server")) a->server = 1;
    else if (!strcmp(n, "json")) a->json = 1;
    else if (!strcmp(n, "encrypt")) a->encrypt = 1;
    else if (!strcmp(n, "key-file")) a->key_file = value;
    else if (!strcmp(n, "listen")) {
        return cli_parse_addr(cmd, n, value, BENCH_PORT, &a->listen_addr, CLI_EXIT_FAIL);
    } else if (!strcmp(n, "connect")) {
        a->have_target = 1;
        return parse_targets(cmd, value, a->targets, &a->ntargets);
    } else if (!strcmp(n, "admin")) {
        a->have_admin = 1;
        return cli_parse_addr(cmd, n, value, CLI_ADMIN_DEFAULT_PORT, &a->admin, CLI_EXIT_UNREACHABLE);
    } else if (!strcmp(n, "seconds") || !strcmp(n, "streams")) {
        const cli_flag_t *f = cli_flag_find(cmd, n);
        if (cli_flag_u64(cmd, n, value, !strcmp(n, "seconds") ? &a->seconds : &a->streams) != 0)
            return cli_usage_error(cmd, "--%s must be %.15g..%.15g", n, f->min, f->max);
    }
    return 0;
}

static int run(int argc, char **argv) {
    const cli_command_t *cmd = &cli_cmd_bench_bandwidth;
    bench_args_t a = {.listen_addr = {.inet.protocol = inetIPv4, .port = BENCH_PORT}, .seconds = BENCH_SECONDS,
                      .streams = BENCH_STREAMS};
    int rc = cli_parse_flags(cmd, argc, argv, on_flag, &a, NULL);
    if (rc != CLI_FLAGS_GO_ON) return rc;
    if (a.server + a.have_target + a.have_admin != 1)
        return cli_usage_error(cmd, "give exactly one of --server, --connect HOST:PORT and --admin HOST:PORT");
    if (a.have_admin) return show_matrix(&a.admin, a.json);
    char err[320];
    if (pcclToolKeyLoad(a.key_file, &g_key, err, sizeof err) != pcclSuccess) {
        cli_err("pccl bench-bandwidth: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    if (pcclToolKeyEncrypt(g_key, (int)a.encrypt) != pcclSuccess) {
        pcclToolKeyFree(g_key);
        return cli_usage_error(cmd, "--encrypt needs a run key (--key-file FILE)");
    }
    rc = a.server ? serve(&a.listen_addr) : measure(a.targets, a.ntargets, (int)a.seconds, (int)a.streams, a.json);
    if (!a.server || atomic_load(&g_serving) == 0) pcclToolKeyFree(g_key); /* a server thread cut off keeps it */
    return rc;
}
