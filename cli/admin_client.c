/* admin_client.c - flags and authenticated requests of the admin commands (see admin_client.h). */
#include "admin_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


const cli_flag_t admin_client_flags[] = {CLI_FLAGS_ADMIN_CLIENT, {0}};

#define RENAMED_MASTER \
    {"master", "use --admin HOST:PORT (the master's admin port; --master names its control port in `pccl join`)"}

const cli_renamed_t cli_admin_renamed[] = {RENAMED_MASTER, {0}};

const cli_renamed_t admin_client_renamed[] = {
    RENAMED_MASTER,
    {"token-file", "use --admin-token-file FILE (the one spelling of every command; env PCCL_ADMIN_TOKEN_FILE)"},
    {0},
};

int cli_read_token(const cli_command_t *cmd, const char *path, char *out, size_t cap) {
    char err[400];
    if (pcclToolReadToken(path, out, cap, err, sizeof err) == pcclSuccess) return CLI_EXIT_OK;
    cli_err("pccl %s: %s\n", cmd->name, err);
    return CLI_EXIT_FAIL;
}

const char *cli_admin_default(void) {
    const char *env = getenv(CLI_ENV_ADMIN_ADDR);
    return env && *env ? env : CLI_ADMIN_DEFAULT_ADDR;
}

void admin_client_init(admin_client_t *a, const cli_command_t *cmd) {
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->timeout_ms = ADMIN_CLIENT_TIMEOUT_MS;
    const char *tf = getenv(CLI_ENV_ADMIN_TOKEN_FILE);
    a->token_file = tf && *tf ? tf : NULL;
}

int cli_admin_addr(const cli_command_t *cmd, ccoip_socket_address_t *addr, const char **where) {
    *where = cli_admin_default();
    int rc = cli_parse_addr(cmd, "admin (env " CLI_ENV_ADMIN_ADDR ")", *where, CLI_ADMIN_DEFAULT_PORT, addr,
                            CLI_EXIT_UNREACHABLE);
    return rc == 0 ? CLI_FLAGS_GO_ON : rc;
}

int admin_client_addr(admin_client_t *a) {
    return a->where ? CLI_FLAGS_GO_ON : cli_admin_addr(a->cmd, &a->addr, &a->where);
}

int admin_client_on_flag(void *ctx, const char *name, const char *value) {
    admin_client_t *a = ctx;
    if (strcmp(name, "admin") == 0) {
        int rc = cli_parse_addr(a->cmd, name, value, CLI_ADMIN_DEFAULT_PORT, &a->addr, CLI_EXIT_UNREACHABLE);
        if (rc != 0) return rc;
        a->where = value;
    } else if (strcmp(name, "admin-token-file") == 0) {
        a->token_file = value;
    } else if (strcmp(name, "timeout") == 0) {
        if (cli_parse_positive(value, 600000, &a->timeout_ms) != 0)
            return cli_usage_error(a->cmd, "bad --timeout '%s' (milliseconds)", value);
    }
    return 0;
}

int admin_client_token(const admin_client_t *a, char *out, size_t cap) {
    if (!a->token_file)
        return cli_usage_error(a->cmd, "--admin-token-file FILE (or env PCCL_ADMIN_TOKEN_FILE) is required");
    return cli_read_token(a->cmd, a->token_file, out, cap);
}

char *admin_client_get(const admin_client_t *a, const char *path, int *unreachable) {
    char err[320];
    int code = 0;
    char *body = cli_http_get(&a->addr, path, (int)a->timeout_ms, &code, err, sizeof err);
    if (!body) {
        cli_err("pccl %s: master admin port %s unreachable: %s\n", a->cmd->name, a->where, err);
        if (unreachable) *unreachable = 1;
        return NULL;
    }
    if (code != 200) {
        cli_err("pccl %s: GET %s on %s answered HTTP %d\n", a->cmd->name, path, a->where, code);
        free(body);
        return NULL;
    }
    return body;
}

int admin_client_post(const admin_client_t *a, const char *path, const char *token) {
    char err[320];
    int code = 0;
    char *body = cli_http_request(&a->addr, "POST", path, token, (int)a->timeout_ms, &code, err, sizeof err);
    if (!body) {
        cli_err("pccl %s: master admin port %s unreachable: %s\n", a->cmd->name, a->where, err);
        return CLI_EXIT_UNREACHABLE;
    }
    free(body);
    if (code == 202) return CLI_EXIT_OK;
    if (code == 403)
        cli_err("pccl %s: the master refused the token of '%s' (HTTP 403; is it the master's "
                "--admin-token-file?)\n", a->cmd->name, a->token_file);
    else if (code == 404)
        cli_err("pccl %s: the master does not know that peer (HTTP 404; it left meanwhile)\n", a->cmd->name);
    else
        cli_err("pccl %s: POST %s on %s answered HTTP %d\n", a->cmd->name, path, a->where, code);
    return CLI_EXIT_FAIL;
}
