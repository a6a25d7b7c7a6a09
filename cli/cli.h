/*
 * cli.h - the command table of the `pccl` binary.
 *
 * Each subcommand lives in cli/cmd_<name>.c and exports one cli_command_t.
 * The same table drives dispatch, `--help`, `pccl help CMD` and the
 * `pccl __complete` helper used by the shell completions, so they cannot drift.
 * Exit codes: 0 ok, 1 runtime failure, 2 usage error (documented in pccl(1)).
 */
#ifndef PCCL_CLI_H
#define PCCL_CLI_H

#include <getopt.h>
#include <stddef.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

typedef struct cli_flag {
    const char *name;    /* long name without dashes */
    int has_arg;         /* no_argument / required_argument / optional_argument */
    const char *metavar; /* e.g. "HOST:PORT"; NULL for switches */
    const char *help;
} cli_flag_t;

typedef struct cli_command {
    const char *name;
    const char *alias; /* second spelling or NULL */
    const char *summary;
    const char *usage; /* synopsis after "pccl NAME " */
    const cli_flag_t *flags; /* terminated by {0} */
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
} cli_command_t;

/* Builds getopt_long options from flags (plus --help); out must hold 64 entries. */
void cli_longopts(const cli_flag_t *flags, struct option *out);
/* Prints the command's help to stdout. */
void cli_print_help(const cli_command_t *cmd);
/* Prints "pccl NAME: MSG" and a hint to stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const cli_command_t *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses "HOST:PORT" (IPv4 or "localhost"); returns 0 on success. */
struct ccoip_socket_address_t;
int cli_parse_hostport(const char *s, struct ccoip_socket_address_t *out, unsigned short default_port);

/*
 * GET http://addr/path with one deadline of timeout_ms. Returns the body (malloc'd, NUL-terminated)
 * and the HTTP status in *code, or NULL with a one-line reason in err.
 */
char *cli_http_get(const struct ccoip_socket_address_t *addr, const char *path, int timeout_ms, int *code, char *err,
                   size_t errlen);
/* Default admin port of a master. */
#define CLI_ADMIN_DEFAULT_PORT 48149

/* Applies --log-level/--log-format; 0 if applied, CLI_EXIT_USAGE on a bad value, -1 if not a log flag. */
int cli_apply_log_flag(const cli_command_t *cmd, const char *name, const char *value);

extern const cli_command_t cli_cmd_master;
extern const cli_command_t cli_cmd_join;
extern const cli_command_t cli_cmd_bench_bandwidth;
extern const cli_command_t cli_cmd_solve_topology;
extern const cli_command_t cli_cmd_status;
extern const cli_command_t cli_cmd_hash_tensor;

#endif
