/* cmd_relay.c - `pccl relay`: run a relay of last resort until SIGINT/SIGTERM (docs/relay.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts/shared.h"
#include "relay/relay.h"

static const cli_flag_t flags[] = {
#include "opts/relay.def"
    {0},
};

static int run(int argc, char **argv);

const cli_command_t cli_cmd_relay = {
    .name = "relay",
    .summary = "run a relay that carries the connections peers can neither dial nor punch",
    .usage = "[--listen] [--key-file] [--max-connections] [--max-per-address] [--greeting-timeout] "
             "[--pair-timeout] [--max-pair-mib] [--max-pair-seconds] [--log-level] [--log-format] | "
             "--print-relay-key --key-file",
    .flags = flags,
    .run = run,
    .help_footer = "\nAnnounce it to the peers with `pccl master --relay HOST:PORT`. It pairs two connections that\n"
                   "present the same token and moves their bytes unread; keyed peers authenticate (and with\n"
                   "--encrypt encrypt) end to end through it. Stops on SIGINT/SIGTERM. exit codes: 0 stopped,\n"
                   "1 cannot listen or the key file is refused, 2 usage error\n",
};

typedef struct {
    ccoip_socket_address_t listen;
    const char *key_file;
    int print_key;
    relay_limits_t lim;
} relay_args_t;

static int on_flag(void *ctx, const char *name, const char *value) {
    relay_args_t *a = ctx;
    if (strcmp(name, "listen") == 0)
        return cli_parse_addr(&cli_cmd_relay, name, value, RELAY_DEFAULT_PORT, &a->listen, CLI_EXIT_FAIL);
    if (strcmp(name, "key-file") == 0) {
        a->key_file = value;
        return 0;
    }
    if (strcmp(name, "print-relay-key") == 0) {
        a->print_key = 1;
        return 0;
    }
    uint64_t v;
    if (cli_flag_u64(&cli_cmd_relay, name, value, &v) != 0) return CLI_FLAG_BAD;
    if (strcmp(name, "max-connections") == 0) a->lim.max_conns = (uint32_t)v;
    else if (strcmp(name, "max-per-address") == 0) a->lim.max_per_addr = (uint32_t)v;
    else if (strcmp(name, "greeting-timeout") == 0) a->lim.greet_ms = v;
    else if (strcmp(name, "pair-timeout") == 0) a->lim.wait_ms = v;
    else if (strcmp(name, "max-pair-mib") == 0) a->lim.pair_bytes = v << 20;
    else if (strcmp(name, "max-pair-seconds") == 0) a->lim.pair_ms = v * 1000;
    return 0;
}

/* --print-relay-key: the relay key line of the run key file. */
static int print_key(const relay_args_t *a) {
    if (!a->key_file) return cli_usage_error(&cli_cmd_relay, "--print-relay-key needs the run key (--key-file FILE)");
    char line[128], err[320];
    if (relay_key_line(a->key_file, line, sizeof line, err, sizeof err) != 0) {
        cli_err("pccl relay: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    printf("%s\n", line);
    return CLI_EXIT_OK;
}

static int run(int argc, char **argv) {
    relay_args_t a = {
        .listen = {.inet.protocol = inetIPv4, .port = RELAY_DEFAULT_PORT},
        .lim = {.max_conns = RELAY_DEFAULT_MAX_CONNS, .max_per_addr = RELAY_DEFAULT_MAX_PER_ADDR,
                .greet_ms = RELAY_DEFAULT_GREET_MS, .wait_ms = RELAY_DEFAULT_WAIT_MS,
                .pair_bytes = (uint64_t)RELAY_DEFAULT_PAIR_MIB << 20, .pair_ms = RELAY_DEFAULT_PAIR_SECONDS * 1000ull},
    };
    if (!getenv("PCCL_LOG_LEVEL")) pcclToolLogSetLevel(PCCL_LOG_INFO);
    int rc = cli_parse_flags(&cli_cmd_relay, argc, argv, on_flag, &a, NULL);
    if (rc != CLI_FLAGS_GO_ON) return rc;
    const char *env_key = getenv("PCCL_KEY_FILE");
    if (!a.key_file && env_key && *env_key) a.key_file = env_key;
    char err[320];
    if (a.print_key) return print_key(&a);
    relay_t *r = NULL;
    if (relay_create(&a.listen, &a.lim, a.key_file, &r, err, sizeof err) != 0) {
        cli_err("pccl relay: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    a.listen.port = relay_port(r);
    char where[PCCL_TOOL_ADDR_STRLEN];
    pcclToolAddressString(&a.listen, 1, where);
    int keyed = relay_keyed(r);
    printf("pccl relay listening on %s (%s)\n", where, keyed ? "keyed: tokens of the run's master only"
                                                              : "open: any token");
    fflush(stdout);
    if (!keyed)
        pcclToolLogPlain(PCCL_LOG_WARN, "pccl relay: warning: no key, so anyone who reaches this port can pair "
                                        "connections through it (--key-file FILE accepts only the run's tokens)\n");
    if (keyed == 2)
        pcclToolLogPlain(PCCL_LOG_WARN, "pccl relay: warning: --key-file is the run key, so whoever reads it on this "
                                        "host can join the run; give the relay its relay key instead (pccl relay "
                                        "--print-relay-key --key-file RUN-KEY on a machine holding it)\n");
    relay_run(r);
    relay_destroy(r);
    return CLI_EXIT_OK;
}
