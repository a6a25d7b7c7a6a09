/*
 * admin_client.h - what `pccl kick` and `pccl shutdown` share: their flags
 * (--admin, --token-file, --timeout) and the authenticated POST to a master's
 * admin port, with one message per way it can fail.
 */
#ifndef PCCL_CLI_ADMIN_CLIENT_H
#define PCCL_CLI_ADMIN_CLIENT_H

#include "cli.h"
#include "pccl.h"

/* Flag values of an admin command, filled by admin_client_on_flag (ctx). */
typedef struct admin_client {
    const cli_command_t *cmd;
    ccoip_socket_address_t addr;
    const char *where; /* the address as given, for messages */
    const char *token_file;
    double timeout_ms;
} admin_client_t;

/* The flags every admin command takes, for a command's own table; admin_client_flags holds just these. */
#define ADMIN_CLIENT_FLAGS                                                                                    \
    {"admin", required_argument, "HOST:PORT", "admin port of the master (default 127.0.0.1:48152)"},          \
        {"token-file", required_argument, "FILE", "file whose first line is the master's --admin-token-file token"}, \
        {"timeout", required_argument, "MS", "connect and read timeout of each request (default 3000)"}
extern const cli_flag_t admin_client_flags[];

/* Defaults: 127.0.0.1:CLI_ADMIN_DEFAULT_PORT, 3000 ms. */
void admin_client_init(admin_client_t *a, const cli_command_t *cmd);
int admin_client_on_flag(void *ctx, const char *name, const char *value);
/* --token-file is required: 0 with the token in out, else the exit code after the message. */
int admin_client_token(const admin_client_t *a, char *out, size_t cap);
/* GET path; the body (free it) or NULL after printing why (unreachable or HTTP status other than 200). */
char *admin_client_get(const admin_client_t *a, const char *path);
/* POST path with the bearer token; CLI_EXIT_OK on 202, else CLI_EXIT_FAIL after printing why. */
int admin_client_post(const admin_client_t *a, const char *path, const char *token);

#endif
