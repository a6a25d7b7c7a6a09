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
#include <stdint.h>

#include "pccl_tools.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2
/* Every command that talks to a master's admin port (status, kick, shutdown, bench-bandwidth --admin) exits with
 * this when the master cannot be reached (connection refused, timeout, a host name that does not resolve). */
#define CLI_EXIT_UNREACHABLE 3

/* What a flag's value is: how it is completed and documented. */
typedef enum cli_arg {
    CLI_SWITCH, /* no value */
    CLI_TEXT,   /* any word */
    CLI_NUMBER,
    CLI_FILE,   /* a path: shells complete file names */
    CLI_DIR,    /* a directory */
    CLI_HOST,   /* an address: shells complete host names */
    CLI_CHOICE, /* one of .choices */
} cli_arg_t;

/* One allowed value of a CLI_CHOICE flag. */
typedef struct cli_choice {
    const char *name;
    const char *doc; /* scdoc phrase for the man page, or NULL */
} cli_choice_t;

/*
 * One flag, described once (cli/opts/CMD.def): the parser, --help, `pccl help --man CMD` (the man page's OPTIONS)
 * and `pccl help --completions SHELL` all read it.
 */
typedef struct cli_flag {
    const char *name; /* long name without dashes */
    cli_arg_t arg;
    const char *metavar;          /* e.g. "HOST:PORT"; NULL for switches and for choices shown as a|b */
    const char *help;             /* one line for --help, without default or environment */
    const char *def;              /* the default, as --help and the man page state it, or NULL */
    const char *env;              /* environment variable used when the flag is absent, or NULL */
    const cli_choice_t *choices;  /* CLI_CHOICE: the allowed values, terminated by {0} */
    const char *man;              /* scdoc text of the man page's entry (lines without indent); NULL: help */
    double min, max;              /* CLI_NUMBER with max > 0: the allowed values, min to max (cli_flag_u64,
                                   * cli_flag_double check them; --help and the man page state them) */
    int optional_value;           /* the value may be left out (--watch) */
    int repeatable;               /* may be given several times; any other flag with a value given twice is a
                                   * usage error, so that a command line means one thing */
} cli_flag_t;

/* Stringify a macro's value, for defaults that a lower layer owns: CLI_STR(MSM_VOTE_TIMEOUT_MS). */
#define CLI_STR_(x) #x
#define CLI_STR(x) CLI_STR_(x)

/* A flag spelled differently before: naming it is a usage error that says what to write instead. */
typedef struct cli_renamed {
    const char *old;  /* long name without dashes */
    const char *hint; /* e.g. "use --admin HOST:PORT (the master's admin port)" */
} cli_renamed_t;

typedef struct cli_command {
    const char *name;
    const char *alias; /* second spelling or NULL */
    const char *summary;
    /* The synopsis template after "pccl NAME " (synopsis.c): flags named as --NAME alone, their values from
     * flags; [ ] optional, " | " alternatives, "..." repeats, other words positionals. */
    const char *usage;
    const cli_flag_t *flags; /* terminated by {0} */
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
    const char *help_footer; /* printed after --help's option list (not by `pccl help NAME`) */
    const cli_renamed_t *renamed; /* terminated by {0}, or NULL */
} cli_command_t;

/* on_flag's answer for a value it refuses: cli_parse_flags says "bad value 'V' for --NAME". */
#define CLI_FLAG_BAD (-1)
/* cli_parse_flags' answer when the command should go on (0 is the exit code after --help). */
#define CLI_FLAGS_GO_ON (-1)

/*
 * Called once per flag given, in order: name without dashes, value NULL for a switch. Returns 0 if taken,
 * CLI_FLAG_BAD, or an exit code after reporting the problem itself (e.g. cli_usage_error).
 */
typedef int (*cli_on_flag_fn)(void *ctx, const char *name, const char *value);
/*
 * Parses argv (argv[0] the command name) against cmd->flags. Handles --help and -h, unknown options (naming the
 * closest flag of the table), missing values and --log-level/--log-format itself. With first_positional NULL any positional is a usage error; otherwise the
 * index of the first one (argc if none) is stored there. Returns CLI_FLAGS_GO_ON or the exit code to return.
 */
int cli_parse_flags(const cli_command_t *cmd, int argc, char **argv, cli_on_flag_fn on_flag, void *ctx,
                    int *first_positional);

/* Number parsers for flag values: 0 if all of s is a number in range, else -1 with *out untouched. */
/* Decimal, no '-', at most max. */
int cli_parse_u64(const char *s, uint64_t max, uint64_t *out);
/* Any float strtof reads except NaN. */
int cli_parse_float(const char *s, float *out);
/* min <= value <= max. */
int cli_parse_double(const char *s, double min, double max, double *out);
/* 0 < value <= max. */
int cli_parse_positive(const char *s, double max, double *out);
/* Prints the command's help to stdout. */
void cli_print_help(const cli_command_t *cmd);
/* The flag called name in cmd's table, or NULL. */
const cli_flag_t *cli_flag_find(const cli_command_t *cmd, const char *name);
/* The value of cmd's CLI_NUMBER flag name as a decimal integer, or a number, within the flag's min and max: 0, or
 * -1 with *out untouched. */
int cli_flag_u64(const cli_command_t *cmd, const char *name, const char *value, uint64_t *out);
int cli_flag_double(const cli_command_t *cmd, const char *name, const char *value, double *out);
/* "MIN to MAX" of a flag with a range, into out; returns out ("" without one). */
const char *cli_flag_range(const cli_flag_t *f, char *out, size_t cap);
/* Index of value among f's choices, or -1. */
int cli_choice_index(const cli_flag_t *f, const char *value);
/* f's choices joined by sep ("a, b"), into out (cap bytes); returns out. */
const char *cli_choices_text(const cli_flag_t *f, const char *sep, char *out, size_t cap);
/* The command table (main.c), for the generated documentation. */
extern const cli_command_t *const cli_commands[];
extern const size_t cli_num_commands;
/* `pccl help --man CMD`: the man page's OPTIONS entries of cmd, in scdoc. */
void cli_print_man_options(const cli_command_t *cmd);
/* The value a flag takes as its usage shows it: its metavar, else its choices "a|b", else "" (a switch). */
void cli_flag_value(const cli_flag_t *f, char *out, size_t cap);
/* The usage line after "pccl NAME " rendered from cmd->usage. @return 0, or -1 when it names a flag the command
 * lacks. */
int cli_synopsis(const cli_command_t *cmd, char *out, size_t cap);
/* The man page's SYNOPSIS (scdoc), one line per form of the command (`pccl help --synopsis CMD`); @return as
 * cli_synopsis. */
int cli_print_man_synopsis(const cli_command_t *cmd);
/* `pccl help --completions SHELL` (bash, zsh, fish): the completion script; -1 for an unknown shell. */
int cli_print_completions(const char *shell);
/*
 * The candidate closest to word[0..len) by edit distance (a transposition counts as one edit), or NULL when none
 * is within a third of the word's length (at least one edit): the "did you mean" of usage errors.
 */
const char *cli_suggest(const char *word, size_t len, const char *const *candidates, size_t n);
/*
 * Messages to stderr go through the logger (pcclToolLogPlain): plain text as written, or JSON records under
 * --log-format json / PCCL_LOG_FORMAT=json, so that every stderr line of a command has the one format.
 */
#define cli_err(...) pcclToolLogPlain(PCCL_LOG_ERROR, __VA_ARGS__)
/* Applies --log-format wherever it stands in argv (after the command name), before anything is printed:
 * usage errors of the same command line come out in that format. */
void cli_early_log_format(int argc, char **argv);
/* Prints "pccl NAME: MSG" and a hint to stderr (cli_err); returns CLI_EXIT_USAGE. */
int cli_usage_error(const cli_command_t *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Parses the value of --flag as an address (addr_parse: HOST:PORT, IPV4:PORT, [IPV6]:PORT, or without :PORT the
 * default port). Returns 0, or reports and returns an exit code: CLI_EXIT_USAGE for a malformed value,
 * unresolved_exit for a host name that does not resolve (DNS may answer later, so it is no usage error).
 */
struct ccoip_socket_address_t;
int cli_parse_addr(const cli_command_t *cmd, const char *flag, const char *value, unsigned short default_port,
                   struct ccoip_socket_address_t *out, int unresolved_exit);
/* cli_parse_addr with pcclToolParseAddress's flags (PCCL_TOOL_ADDR_*: an address others dial refuses 0.0.0.0). */
int cli_parse_addr_as(const cli_command_t *cmd, const char *flag, const char *value, unsigned short default_port,
                      int addr_flags, struct ccoip_socket_address_t *out, int unresolved_exit);

/*
 * GET http://addr/path with one deadline of timeout_ms. Returns the body (malloc'd, NUL-terminated)
 * and the HTTP status in *code, or NULL with a one-line reason in err.
 */
char *cli_http_get(const struct ccoip_socket_address_t *addr, const char *path, int timeout_ms, int *code, char *err,
                   size_t errlen);
/* The same for any method, with "Authorization: Bearer token" unless token is NULL. */
char *cli_http_request(const struct ccoip_socket_address_t *addr, const char *method, const char *path,
                       const char *token, int timeout_ms, int *code, char *err, size_t errlen);
/*
 * The admin token: the first line of path after the checks of a key file (sec_token_from_file: private, owned by
 * this user or root, 16+ bytes). 0 with the token in out, or CLI_EXIT_FAIL after "pccl CMD: REASON" on stderr.
 */
int cli_read_token(const cli_command_t *cmd, const char *path, char *out, size_t cap);
/* Environment defaults of the admin flags: PCCL_ADMIN_ADDR (--admin), PCCL_ADMIN_TOKEN_FILE (--admin-token-file). */
#define CLI_ENV_ADMIN_ADDR "PCCL_ADMIN_ADDR"
#define CLI_ENV_ADMIN_TOKEN_FILE "PCCL_ADMIN_TOKEN_FILE"
/* The admin address a command starts from: PCCL_ADMIN_ADDR when set and not empty, else 127.0.0.1:48152. */
const char *cli_admin_default(void);
/* Default admin port of a master: the first above PCCL 1.0's four (ccoip.h), so a peer's
 * shared-state port and the master's admin port never collide on one host. */
#define CLI_ADMIN_DEFAULT_PORT 48152

/* --master where --admin is meant (status, bench-bandwidth, kick, shutdown). */
extern const cli_renamed_t cli_admin_renamed[];

extern const cli_command_t cli_cmd_master;
extern const cli_command_t cli_cmd_join;
extern const cli_command_t cli_cmd_bench_bandwidth;
extern const cli_command_t cli_cmd_solve_topology;
extern const cli_command_t cli_cmd_status;
extern const cli_command_t cli_cmd_hash_tensor;
extern const cli_command_t cli_cmd_kick;
extern const cli_command_t cli_cmd_shutdown;
extern const cli_command_t cli_cmd_identity;
extern const cli_command_t cli_cmd_relay;

#endif
