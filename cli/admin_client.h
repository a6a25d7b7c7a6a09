/*
 * admin_client.h - what `pccl kick` and `pccl shutdown` share: their flags
 * (--admin, --admin-token-file, --timeout, with their environment defaults) and the authenticated POST to a master's
 * admin port, with one message per way it can fail.
 */
#ifndef PCCL_CLI_ADMIN_CLIENT_H
#define PCCL_CLI_ADMIN_CLIENT_H

#include "cli.h"
#include "opts/shared.h"
#include "pccl.h"

/* Flag values of an admin command, filled by admin_client_on_flag (ctx). */
typedef struct admin_client {
    const cli_command_t *cmd;
    ccoip_socket_address_t addr;
    const char *where; /* the address as given, for messages */
    const char *token_file;
    double timeout_ms;
} admin_client_t;

/* Default of --timeout (cli/opts/shared.h). */
#define ADMIN_CLIENT_TIMEOUT_MS 3000
/* A command's table of just the admin flags (CLI_FLAGS_ADMIN_CLIENT). */
extern const cli_flag_t admin_client_flags[];
/* --master and --token-file: usage errors that name --admin and --admin-token-file. */
extern const cli_renamed_t admin_client_renamed[];

/* Defaults: PCCL_ADMIN_TOKEN_FILE, ADMIN_CLIENT_TIMEOUT_MS; the address after the flags (admin_client_addr). */
void admin_client_init(admin_client_t *a, const cli_command_t *cmd);
/* After the flags: without --admin, the default address (PCCL_ADMIN_ADDR or 127.0.0.1:48152). CLI_FLAGS_GO_ON,
 * or the exit code after a bad PCCL_ADMIN_ADDR was reported. */
int admin_client_addr(admin_client_t *a);
/* The default admin address (cli_admin_default) parsed into addr; where is the text. CLI_FLAGS_GO_ON or an exit
 * code (2 malformed, 3 a host name that does not resolve) after the message. */
int cli_admin_addr(const cli_command_t *cmd, ccoip_socket_address_t *addr, const char **where);
int admin_client_on_flag(void *ctx, const char *name, const char *value);
/* --admin-token-file is required: 0 with the token in out, else the exit code after the message. */
int admin_client_token(const admin_client_t *a, char *out, size_t cap);
/* GET path; the body (free it) or NULL after printing why (unreachable, then *unreachable = 1 unless NULL, or an
 * HTTP status other than 200). */
char *admin_client_get(const admin_client_t *a, const char *path, int *unreachable);
/* POST path with the bearer token; CLI_EXIT_OK on 202, CLI_EXIT_UNREACHABLE, else CLI_EXIT_FAIL after printing why. */
int admin_client_post(const admin_client_t *a, const char *path, const char *token);

#endif
