/* cmd_master.c - `pccl master`: run a master until SIGINT/SIGTERM. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pccl_tools.h"
#include "server/server.h"
#include "pccl.h"
#include "sd_notify.h"
#include "opts/shared.h"

static const cli_flag_t flags[] = {
#include "opts/master.def"
    {0},
};

static int run(int argc, char **argv);

const cli_command_t cli_cmd_master = {
    .name = "master",
    .summary = "run the master that orchestrates membership and consensus of a run",
    .usage = "[--listen] [--admin | --no-admin] [--admin-token-file] [--admin-host]... [--vote-timeout] "
             "[--on-signal] [--key-file [--encrypt]] [--allow-keys] [--relay]... [--log-level] [--log-format]",
    .flags = flags,
    .run = run,
    .help_footer = "\nStopping: `pccl shutdown` ends the run (every peer exits 0); `pccl shutdown --keep-run` and a signal\n"
                   "(unless --on-signal end-run) keep it: the peers wait PCCL_MASTER_RECONNECT_MS for a master on this\n"
                   "address, so a supervisor's restart loses nothing.\n",
};



/* systemd's watchdog (WatchdogSec=): WATCHDOG=1 is sent from the event loop's tick, so a stalled loop stops it. */
typedef struct {
    uint64_t every_ms, last_ms;
} master_watchdog_t;

static void on_loop_tick(void *ctx, uint64_t now_ms) {
    master_watchdog_t *w = ctx;
    /* Ticks come every 250 ms: a ping due within half a tick goes out now rather than a tick late. */
    if (w->last_ms && now_ms - w->last_ms + 125 < w->every_ms) return;
    w->last_ms = now_ms ? now_ms : 1;
    sd_notify_send("WATCHDOG=1");
}

/* Flag values of `pccl master`, filled by on_flag. */
typedef struct {
    ccoip_socket_address_t listen, admin;
    int admin_on, admin_explicit;
    const char *token_file, *key_file, *allow_keys;
    admin_host_rules_t hosts;
    int encrypt;
    long long vote_timeout_ms; /* -1: not given */
    int signal_ends_run;       /* --on-signal end-run */
    ccoip_socket_address_t relays[MSM_RELAYS_MAX];
    uint32_t nrelays;
} master_args_t;

static int on_flag(void *ctx, const char *name, const char *value) {
    master_args_t *a = ctx;
    if (strcmp(name, "listen") == 0) {
        return cli_parse_addr(&cli_cmd_master, name, value, CCOIP_PROTOCOL_PORT_MASTER, &a->listen, CLI_EXIT_FAIL);
    } else if (strcmp(name, "admin") == 0) {
        a->admin_explicit = 1;
        return cli_parse_addr(&cli_cmd_master, name, value, CLI_ADMIN_DEFAULT_PORT, &a->admin, CLI_EXIT_FAIL);
    } else if (strcmp(name, "no-admin") == 0) {
        a->admin_on = 0;
    } else if (strcmp(name, "admin-token-file") == 0) {
        a->token_file = value;
    } else if (strcmp(name, "admin-host") == 0) {
        if (admin_host_add(&a->hosts, value) != 0)
            return cli_usage_error(&cli_cmd_master, "bad --admin-host '%s' (a host name, at most %d of them)", value,
                                   ADMIN_HOSTS_MAX);
    } else if (strcmp(name, "vote-timeout") == 0) {
        uint64_t v;
        if (cli_flag_u64(&cli_cmd_master, name, value, &v) != 0)
            return cli_usage_error(&cli_cmd_master, "bad --vote-timeout '%s' (want ms in [0, %.15g])", value,
                                   cli_flag_find(&cli_cmd_master, name)->max);
        a->vote_timeout_ms = (long long)v;
    } else if (strcmp(name, "on-signal") == 0) {
        const cli_flag_t *f = cli_flag_find(&cli_cmd_master, name);
        int i = cli_choice_index(f, value);
        char choices[64];
        if (i < 0)
            return cli_usage_error(&cli_cmd_master, "bad --on-signal '%s' (%s)", value,
                                   cli_choices_text(f, " or ", choices, sizeof choices));
        a->signal_ends_run = !strcmp(f->choices[i].name, "end-run");
    } else if (strcmp(name, "key-file") == 0) {
        a->key_file = value;
    } else if (strcmp(name, "allow-keys") == 0) {
        a->allow_keys = value;
    } else if (strcmp(name, "encrypt") == 0) {
        a->encrypt = 1;
    } else if (strcmp(name, "relay") == 0) {
        if (a->nrelays == MSM_RELAYS_MAX)
            return cli_usage_error(&cli_cmd_master, "too many --relay (at most %d)", MSM_RELAYS_MAX);
        /* Peers dial it: the any address is no relay's, and no port is its default port. */
        ccoip_socket_address_t *r = &a->relays[a->nrelays++];
        int rc = cli_parse_addr_as(&cli_cmd_master, name, value, 0, PCCL_TOOL_ADDR_ADVERTISED, r, CLI_EXIT_FAIL);
        if (rc == 0 && r->port == 0) r->port = RELAY_DEFAULT_PORT;
        return rc;
    }
    return 0;
}

/* The admin token (--admin-token-file, else PCCL_ADMIN_TOKEN_FILE) into token. CLI_EXIT_OK or the exit code after
 * the message. */
static int read_token(master_args_t *a, char *token, size_t cap) {
    const char *env_token = getenv(CLI_ENV_ADMIN_TOKEN_FILE);
    if (!a->token_file && env_token && *env_token) a->token_file = env_token;
    if (a->token_file) return cli_read_token(&cli_cmd_master, a->token_file, token, cap);
    return CLI_EXIT_OK;
}

/* The run key of m: --key-file replaces what PCCL_KEY_FILE says; --encrypt alone keeps the env's key. CLI_EXIT_OK,
 * or the exit code after the message (m destroyed then). */
static int set_run_key(pcclMasterInstance_t *m, const master_args_t *a) {
    if (!a->key_file && !a->encrypt) return CLI_EXIT_OK;
    char err[320];
    int rc = pccl__master_set_key_file(m, a->key_file, a->encrypt, err, sizeof err);
    if (rc == 0) return CLI_EXIT_OK;
    pcclDestroyMaster(m);
    cli_err("pccl master: %s\n", err);
    return CLI_EXIT_FAIL;
}

/* Waits for SIGINT or SIGTERM (ending the run first with --on-signal end-run), or for a shutdown requested on the
 * admin port (checked every 200 ms); SIGHUP reads the allow-keys file again. */
static void wait_for_end(pcclMasterInstance_t *m, const sigset_t *set, const master_args_t *a) {
    const struct timespec poll_every = {0, 200 * 1000 * 1000};
    for (;;) {
        int sig = sigtimedwait(set, NULL, &poll_every);
        if (sig == SIGHUP) {
            if (a->allow_keys) pcclToolLog(PCCL_LOG_INFO, "master", "received SIGHUP, reading the allow-keys file again");
            pccl__master_reload_allow_keys(m);
            continue;
        }
        if (sig > 0) {
            const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";
            pcclToolLog(PCCL_LOG_INFO, "master", "received %s, shutting down (%s)", name,
                     a->signal_ends_run ? "ending the run" : "the peers keep the run");
            if (a->signal_ends_run) {
                char why[64];
                snprintf(why, sizeof why, "the master received %s", name);
                pccl__master_end_run(m, why);
            }
            return;
        }
        if (pccl__master_interrupted(m)) return;
    }
}

static int run(int argc, char **argv) {
    master_args_t a = {
        .admin = {.inet.protocol = inetIPv4, .inet.ipv4.data = {127, 0, 0, 1}, .port = CLI_ADMIN_DEFAULT_PORT},
        .admin_on = 1,
        .listen = {.inet.protocol = inetIPv4, .port = CCOIP_PROTOCOL_PORT_MASTER},
        .vote_timeout_ms = -1,
    };
    if (!getenv("PCCL_LOG_LEVEL")) pcclToolLogSetLevel(PCCL_LOG_INFO);
    int rc = cli_parse_flags(&cli_cmd_master, argc, argv, on_flag, &a, NULL);
    if (rc != CLI_FLAGS_GO_ON) return rc;
    char token[512] = "", err[320];
    if ((rc = read_token(&a, token, sizeof token)) != CLI_EXIT_OK) return rc;
    const char *env_key = getenv("PCCL_KEY_FILE");
    if (a.encrypt && !a.key_file && !(env_key && *env_key))
        return cli_usage_error(&cli_cmd_master, "--encrypt needs a run key (--key-file FILE)");

    /* Block the signals before any thread starts so that only sigwait below receives them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    pcclInit();
    pcclMasterInstance_t *m = NULL;
    char where[PCCL_TOOL_ADDR_STRLEN];
    pcclToolAddressString(&a.listen, 1, where);
    if (pcclCreateMaster(a.listen, &m) != pcclSuccess) {
        cli_err("pccl master: cannot listen on %s (port in use or address not local)\n", where);
        return CLI_EXIT_FAIL;
    }
    if (a.vote_timeout_ms >= 0) pccl__master_set_vote_timeout(m, (uint64_t)a.vote_timeout_ms);
    pccl__master_set_relays(m, a.relays, a.nrelays);
    if ((rc = set_run_key(m, &a)) != CLI_EXIT_OK) return rc;
    if (a.allow_keys && pccl__master_set_allow_keys(m, a.allow_keys, err, sizeof err) != 0) {
        cli_err("pccl master: %s\n", err);
        pcclDestroyMaster(m);
        return CLI_EXIT_FAIL;
    }
    char awhere[PCCL_TOOL_ADDR_STRLEN];
    pcclToolAddressString(&a.admin, 1, awhere);
    if (a.admin_on && pccl__master_enable_admin(m, a.admin, token[0] ? token : NULL, &a.hosts) != 0) {
        /* An explicit --admin is a promise to the operator; the default port is optional (e.g. a second master
         * on the same host), so the run starts without it rather than not at all. */
        if (a.admin_explicit) {
            cli_err("pccl master: cannot serve the admin port on %s (port in use? --no-admin disables it)\n",
                    awhere);
            pcclDestroyMaster(m);
            return CLI_EXIT_FAIL;
        }
        pcclToolLogPlain(PCCL_LOG_WARN, "pccl master: warning: default admin port %s unavailable, running without it\n",
                       awhere);
        a.admin_on = 0;
    }
    master_watchdog_t wd = {.every_ms = sd_notify_ping_ms(sd_notify_watchdog_usec())};
    if (wd.every_ms) {
        if (wd.every_ms < 250)
            pcclToolLogPlain(PCCL_LOG_WARN, "pccl master: warning: a watchdog timeout below 1 s (WATCHDOG_USEC) is "
                                          "shorter than two ticks of the event loop (250 ms)\n");
        pccl__master_set_tick_hook(m, on_loop_tick, &wd);
    }
    if (pcclRunMaster(m) != pcclSuccess) {
        cli_err("pccl master: cannot start the event loop\n");
        pcclDestroyMaster(m);
        return CLI_EXIT_FAIL;
    }
    a.listen.port = pccl__master_port(m);
    pcclToolAddressString(&a.listen, 1, where);
    printf("pccl master listening on %s\n", where);
    if (a.admin_on) {
        a.admin.port = pccl__master_admin_port(m);
        pcclToolAddressString(&a.admin, 1, awhere);
        printf("pccl master admin on %s\n", awhere);
    }
    fflush(stdout);
    /* Both ports are bound and the loop runs: a supervisor may start what depends on the master now. */
    sd_notify_sendf("READY=1\nSTATUS=listening on %s%s%s", where, a.admin_on ? ", admin on " : "",
                    a.admin_on ? awhere : "");
    wait_for_end(m, &set, &a);
    sd_notify_send("STOPPING=1\nSTATUS=shutting down");
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    return CLI_EXIT_OK;
}
