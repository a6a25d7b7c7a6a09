/*
 * cmd_shutdown.c - `pccl shutdown`: stops a master through its admin port
 * (POST /v1/shutdown with the bearer token; the master tells every peer that
 * the run is over unless --keep-run), then waits, within --timeout,
 * until the admin port stops answering, so that a script can go on knowing the
 * master is gone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin_client.h"

static int run(int argc, char **argv);

static const cli_flag_t flags[] = {
#include "opts/shutdown.def"
    {0},
};

/* Flag values: the admin client's, and --keep-run. */
typedef struct {
    admin_client_t a;
    int keep_run;
} shutdown_args_t;

static int on_flag(void *ctx, const char *name, const char *value) {
    shutdown_args_t *s = ctx;
    if (strcmp(name, "keep-run") == 0) {
        s->keep_run = 1;
        return 0;
    }
    return admin_client_on_flag(&s->a, name, value);
}

const cli_command_t cli_cmd_shutdown = {
    .name = "shutdown",
    .summary = "stop a master through its admin port (ending the run) and wait until it is gone",
    .usage = "--admin-token-file [--admin] [--timeout] [--keep-run]",
    .flags = flags,
    .run = run,
    .renamed = admin_client_renamed,
    .help_footer = "\nexit codes: 0 the master stopped, 1 failure (refused token, or still answering after\n"
                   "--timeout), 2 usage error, 3 master unreachable\n",
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int run(int argc, char **argv) {
    const cli_command_t *cmd = &cli_cmd_shutdown;
    shutdown_args_t s = {0};
    admin_client_t *a = &s.a;
    admin_client_init(a, cmd);
    int rc = cli_parse_flags(cmd, argc, argv, on_flag, &s, NULL);
    if (rc != CLI_FLAGS_GO_ON || (rc = admin_client_addr(a)) != CLI_FLAGS_GO_ON) return rc;
    char token[512];
    if ((rc = admin_client_token(a, token, sizeof token)) != CLI_EXIT_OK) return rc;
    if ((rc = admin_client_post(a, s.keep_run ? "/v1/shutdown?keep_run=1" : "/v1/shutdown", token)) != CLI_EXIT_OK)
        return rc;

    /* The master closes its admin port first when it stops: a refused connection means it is gone. */
    double deadline = now_ms() + a->timeout_ms;
    for (;;) {
        char err[320];
        int code;
        double left = deadline - now_ms();
        if (left <= 0) break;
        char *body = cli_http_get(&a->addr, "/v1/status", left < 500 ? (int)left + 1 : 500, &code, err, sizeof err);
        if (!body && !strstr(err, "timed out")) { /* refused or closed: gone; a timeout may be a busy master */
            printf("master %s shut down%s\n", a->where, s.keep_run ? " (the peers keep the run)" : "");
            return CLI_EXIT_OK;
        }
        free(body); /* free(NULL) after a timeout */
        struct timespec pause = {0, 50 * 1000000L};
        nanosleep(&pause, NULL);
    }
    cli_err("pccl shutdown: %s accepted the shutdown but still answers after %.0f ms\n", a->where, a->timeout_ms);
    return CLI_EXIT_FAIL;
}
