/* cmd_master.c - `pccl master`: run a master until SIGINT/SIGTERM. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "log.h"
#include "master_internal.h"
#include "pccl.h"

static const cli_flag_t flags[] = {
    {"listen", required_argument, "HOST:PORT", "address of the control port (default 0.0.0.0:48148; port 0 = any)"},
    {"admin", required_argument, "HOST:PORT", "HTTP admin port (default 127.0.0.1:48149; port 0 = any)"},
    {"no-admin", no_argument, NULL, "do not serve the admin port"},
    {"admin-token-file", required_argument, "FILE", "bearer token for kick/shutdown (without: refused)"},
    {"log-level", required_argument, "LEVEL", "error, warn, info or debug (default info; env PCCL_LOG_LEVEL)"},
    {"log-format", required_argument, "FORMAT", "text or json (env PCCL_LOG_FORMAT)"},
    {0},
};

static int run(int argc, char **argv);

const cli_command_t cli_cmd_master = {
    .name = "master",
    .summary = "run the master that orchestrates membership and consensus of a run",
    .usage = "[--listen HOST:PORT] [--admin HOST:PORT | --no-admin] [--admin-token-file FILE] [--log-level LEVEL] "
             "[--log-format FORMAT]",
    .flags = flags,
    .run = run,
};

/* Parses --log-level / --log-format shared by long-running commands; returns 0 or a usage error. */
int cli_apply_log_flag(const cli_command_t *cmd, const char *name, const char *value) {
    if (strcmp(name, "log-level") == 0) {
        int l = pccl_log_parse_level(value);
        if (l < 0) return cli_usage_error(cmd, "unknown log level '%s' (error, warn, info, debug)", value);
        pccl_log_set_level((pccl_log_level_t)l);
        return 0;
    }
    if (strcmp(name, "log-format") == 0) {
        if (strcmp(value, "json") && strcmp(value, "text"))
            return cli_usage_error(cmd, "unknown log format '%s' (text, json)", value);
        pccl_log_set_json(strcmp(value, "json") == 0);
        return 0;
    }
    return -1;
}

#define ADMIN_DEFAULT_PORT 48149

/* Reads the first line of path (trailing whitespace stripped) into out; 0 on success. */
static int read_token(const char *path, char *out, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fgets(out, (int)cap, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' ' || out[n - 1] == '\t')) out[--n] = 0;
    return n ? 0 : -1;
}

static void ip_string(const ccoip_socket_address_t *a, char out[16]) {
    snprintf(out, 16, "%u.%u.%u.%u", a->inet.address.ipv4.data[0], a->inet.address.ipv4.data[1],
             a->inet.address.ipv4.data[2], a->inet.address.ipv4.data[3]);
}

static int run(int argc, char **argv) {
    ccoip_socket_address_t admin = {.inet.protocol = inetIPv4, .inet.address.ipv4.data = {127, 0, 0, 1},
                                    .port = ADMIN_DEFAULT_PORT};
    int admin_on = 1, admin_explicit = 0;
    const char *token_file = NULL;
    ccoip_socket_address_t listen = {.inet.protocol = inetIPv4, .port = CCOIP_PROTOCOL_PORT_MASTER};
    if (!getenv("PCCL_LOG_LEVEL")) pccl_log_set_level(PCCL_LOG_INFO);
    struct option opts[64];
    cli_longopts(flags, opts);
    optind = 1;
    opterr = 0;
    int c, idx;
    while ((c = getopt_long(argc, argv, ":", opts, &idx)) != -1) {
        if (c == 'h') {
            cli_print_help(&cli_cmd_master);
            return CLI_EXIT_OK;
        }
        if (c == '?') return cli_usage_error(&cli_cmd_master, "unknown option '%s'", argv[optind - 1]);
        if (c == ':') return cli_usage_error(&cli_cmd_master, "option '%s' needs a value", argv[optind - 1]);
        const char *name = opts[idx].name;
        if (strcmp(name, "listen") == 0) {
            if (cli_parse_hostport(optarg, &listen, CCOIP_PROTOCOL_PORT_MASTER) != 0)
                return cli_usage_error(&cli_cmd_master, "bad --listen '%s' (want IPV4:PORT)", optarg);
        } else if (strcmp(name, "admin") == 0) {
            if (cli_parse_hostport(optarg, &admin, ADMIN_DEFAULT_PORT) != 0)
                return cli_usage_error(&cli_cmd_master, "bad --admin '%s' (want IPV4:PORT)", optarg);
            admin_explicit = 1;
        } else if (strcmp(name, "no-admin") == 0) {
            admin_on = 0;
        } else if (strcmp(name, "admin-token-file") == 0) {
            token_file = optarg;
        } else if (cli_apply_log_flag(&cli_cmd_master, name, optarg) > 0) {
            return CLI_EXIT_USAGE;
        }
    }
    if (optind < argc) return cli_usage_error(&cli_cmd_master, "unexpected argument '%s'", argv[optind]);
    char token[512] = "";
    if (token_file && read_token(token_file, token, sizeof token) != 0) {
        fprintf(stderr, "pccl master: cannot read a token from '%s' (missing, unreadable or empty)\n", token_file);
        return CLI_EXIT_FAIL;
    }

    /* Block the signals before any thread starts so that only sigwait below receives them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    pcclInit();
    pcclMasterInstance_t *m = NULL;
    char ip[16];
    snprintf(ip, sizeof ip, "%u.%u.%u.%u", listen.inet.address.ipv4.data[0], listen.inet.address.ipv4.data[1],
             listen.inet.address.ipv4.data[2], listen.inet.address.ipv4.data[3]);
    if (pcclCreateMaster(listen, &m) != pcclSuccess) {
        fprintf(stderr, "pccl master: cannot listen on %s:%u (port in use or address not local)\n", ip, listen.port);
        return CLI_EXIT_FAIL;
    }
    char aip[16];
    ip_string(&admin, aip);
    if (admin_on && pccl__master_enable_admin(m, admin, token[0] ? token : NULL) != pcclSuccess) {
        /* An explicit --admin is a promise to the operator; the default port is optional (e.g. a second master
         * on the same host), so the run starts without it rather than not at all. */
        if (admin_explicit) {
            fprintf(stderr, "pccl master: cannot serve the admin port on %s:%u (port in use? --no-admin disables it)\n",
                    aip, admin.port);
            pcclDestroyMaster(m);
            return CLI_EXIT_FAIL;
        }
        fprintf(stderr, "pccl master: warning: default admin port %s:%u unavailable, running without it\n", aip,
                admin.port);
        admin_on = 0;
    }
    if (pcclRunMaster(m) != pcclSuccess) {
        fprintf(stderr, "pccl master: cannot start the event loop\n");
        pcclDestroyMaster(m);
        return CLI_EXIT_FAIL;
    }
    printf("pccl master listening on %s:%u\n", ip, pccl__master_port(m));
    if (admin_on) printf("pccl master admin on %s:%u\n", aip, pccl__master_admin_port(m));
    fflush(stdout);
    /* Wait for a signal, or for a shutdown requested on the admin port (checked every 200 ms). */
    const struct timespec poll_every = {0, 200 * 1000 * 1000};
    for (;;) {
        int sig = sigtimedwait(&set, NULL, &poll_every);
        if (sig > 0) {
            pccl_log(PCCL_LOG_INFO, "master", "received %s, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
            break;
        }
        if (pccl__master_interrupted(m)) break;
    }
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    return CLI_EXIT_OK;
}
