/* admin_client.c - flags and authenticated requests of the admin commands (see admin_client.h). */
#include "admin_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const cli_flag_t admin_client_flags[] = {ADMIN_CLIENT_FLAGS, {0}};

const cli_renamed_t cli_admin_renamed[] = {
    {"master", "use --admin HOST:PORT (the master's admin port; --master names its control port in `pccl join`)"},
    {0},
};

int cli_read_token(const char *path, char *out, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fgets(out, (int)cap, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' ' || out[n - 1] == '\t')) out[--n] = 0;
    return n ? 0 : -1;
}

void admin_client_init(admin_client_t *a, const cli_command_t *cmd) {
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->where = "127.0.0.1:48152";
    a->timeout_ms = 3000;
    cli_parse_addr(cmd, "admin", a->where, CLI_ADMIN_DEFAULT_PORT, &a->addr, CLI_EXIT_FAIL);
}

int admin_client_on_flag(void *ctx, const char *name, const char *value) {
    admin_client_t *a = ctx;
    if (strcmp(name, "admin") == 0) {
        int rc = cli_parse_addr(a->cmd, name, value, CLI_ADMIN_DEFAULT_PORT, &a->addr, CLI_EXIT_FAIL);
        if (rc != 0) return rc;
        a->where = value;
    } else if (strcmp(name, "token-file") == 0) {
        a->token_file = value;
    } else if (strcmp(name, "timeout") == 0) {
        if (cli_parse_positive(value, 600000, &a->timeout_ms) != 0)
            return cli_usage_error(a->cmd, "bad --timeout '%s' (milliseconds)", value);
    }
    return 0;
}

int admin_client_token(const admin_client_t *a, char *out, size_t cap) {
    if (!a->token_file) return cli_usage_error(a->cmd, "--token-file FILE is required");
    if (cli_read_token(a->token_file, out, cap) != 0) {
        cli_err("pccl %s: cannot read a token from '%s' (missing, unreadable or empty)\n", a->cmd->name,
                a->token_file);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

char *admin_client_get(const admin_client_t *a, const char *path) {
    char err[320];
    int code = 0;
    char *body = cli_http_get(&a->addr, path, (int)a->timeout_ms, &code, err, sizeof err);
    if (!body) {
        cli_err("pccl %s: master admin port %s unreachable: %s\n", a->cmd->name, a->where, err);
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
        return CLI_EXIT_FAIL;
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
