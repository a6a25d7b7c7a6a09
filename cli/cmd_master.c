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
    {"log-level", required_argument, "LEVEL", "error, warn, info or debug (default info; env PCCL_LOG_LEVEL)"},
    {"log-format", required_argument, "FORMAT", "text or json (env PCCL_LOG_FORMAT)"},
    {0},
};

static int run(int argc, char **argv);

const cli_command_t cli_cmd_master = {
    .name = "master",
    .summary = "run the master that orchestrates membership and consensus of a run",
    .usage = "[--listen HOST:PORT] [--log-level LEVEL] [--log-format FORMAT]",
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

static int run(int argc, char **argv) {
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
        } else if (cli_apply_log_flag(&cli_cmd_master, name, optarg) > 0) {
            return CLI_EXIT_USAGE;
        }
    }
    if (optind < argc) return cli_usage_error(&cli_cmd_master, "unexpected argument '%s'", argv[optind]);

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
    if (pcclRunMaster(m) != pcclSuccess) {
        fprintf(stderr, "pccl master: cannot start the event loop\n");
        pcclDestroyMaster(m);
        return CLI_EXIT_FAIL;
    }
    printf("pccl master listening on %s:%u\n", ip, pccl__master_port(m));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    pccl_log(PCCL_LOG_INFO, "master", "received %s, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    return CLI_EXIT_OK;
}
