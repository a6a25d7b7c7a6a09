/*
 * shared.h - flags that several commands take, described once (see cli_flag_t in cli.h): the log flags and the
 * admin client's flags. Each command's table (cli/opts/CMD.def) names them.
 */
#ifndef PCCL_CLI_OPTS_SHARED_H
#define PCCL_CLI_OPTS_SHARED_H

#include "cli.h"

/* The values of --log-level (pccl_log_parse_level) and --log-format. */
#define CLI_LOG_LEVELS {{"error", NULL}, {"warn", NULL}, {"info", NULL}, {"debug", NULL}, {0}}
#define CLI_LOG_FORMATS {{"text", NULL}, {"json", NULL}, {0}}

/* --log-level and --log-format; default_level: the command's level without the flag or PCCL_LOG_LEVEL. */
#define CLI_FLAGS_LOG(default_level)                                                                               \
    {                                                                                                              \
        .name = "log-level", .arg = CLI_CHOICE, .metavar = "LEVEL", .help = "log level", .def = default_level,    \
        .env = "PCCL_LOG_LEVEL", .choices = (const cli_choice_t[])CLI_LOG_LEVELS,                                 \
        .man = "The least severe messages written to standard error.",                                             \
    },                                                                                                             \
    {                                                                                                              \
        .name = "log-format", .arg = CLI_CHOICE, .metavar = "FORMAT", .help = "log format", .def = "text",         \
        .env = "PCCL_LOG_FORMAT", .choices = (const cli_choice_t[])CLI_LOG_FORMATS,                                \
        .man = "*json* writes one JSON object per line (ts, level, component, msg) for\n"                          \
               "every line on standard error, the command's own messages and usage errors\n"                       \
               "included (component \"cli\").",                                                                    \
    }

/* The admin port's default address, as the client commands and `pccl master --admin` state it. */
#define CLI_ADMIN_DEFAULT_ADDR "127.0.0.1:" CLI_STR(CLI_ADMIN_DEFAULT_PORT)

/* --admin, --admin-token-file and --timeout of the commands that talk to a master's admin port (admin_client.h). */
#define CLI_FLAGS_ADMIN_CLIENT CLI_FLAG_ADMIN, CLI_FLAG_ADMIN_TOKEN_FILE, CLI_FLAG_ADMIN_TIMEOUT
#define CLI_FLAG_ADMIN                                                                                             \
    {                                                                                                              \
        .name = "admin", .arg = CLI_HOST, .metavar = "HOST:PORT", .help = "admin port of the master",             \
        .def = CLI_ADMIN_DEFAULT_ADDR, .env = CLI_ENV_ADMIN_ADDR,                                                  \
        .man = "The master's admin port, not the control port. _HOST_ is an IPv4 address,\n"                       \
               "a bracketed IPv6 address (*[::1]:48152*) or a host name (see *ADDRESSES*\n"                        \
               "in *pccl*(1)). *--master* is refused with a hint: it names the control\n"                          \
               "port of *pccl join*.",                                                                             \
    }
#define CLI_FLAG_ADMIN_TOKEN_FILE                                                                                  \
    {                                                                                                              \
        .name = "admin-token-file", .arg = CLI_FILE, .metavar = "FILE",                                            \
        .help = "private file whose first line is the master's --admin-token-file token",                         \
        .env = CLI_ENV_ADMIN_TOKEN_FILE,                                                                           \
        .man = "A file whose first line (trailing white space stripped) is the token the\n"                        \
               "master was started with (*pccl master --admin-token-file*, the same flag).\n"                      \
               "Required, here or in the environment. It gets the master's checks: private\n"                      \
               "(mode 0600 or 0400), owned by the user or root, at least 16 bytes. The\n"                          \
               "former spelling *--token-file* is a usage error that names this one.",                             \
    }
#define CLI_FLAG_ADMIN_TIMEOUT                                                                                     \
    {                                                                                                              \
        .name = "timeout", .arg = CLI_NUMBER, .metavar = "MS", .help = "connect and read timeout of each request", \
        .def = CLI_STR(ADMIN_CLIENT_TIMEOUT_MS),                                                                   \
        .man = "Bound on each request to the admin port (for *pccl shutdown*, on the wait\n"                       \
               "for the master to go too), in milliseconds.",                                                      \
    }

#endif
