/* main.c - `pccl` entry point: dispatches to the subcommand table. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pccl_tools.h"
#include "pccl.h"

const cli_command_t *const cli_commands[] = {
    &cli_cmd_master,
    &cli_cmd_join,
    &cli_cmd_bench_bandwidth,
    &cli_cmd_solve_topology,
    &cli_cmd_status,
    &cli_cmd_hash_tensor,
    &cli_cmd_kick,
    &cli_cmd_shutdown,
    &cli_cmd_identity,
    &cli_cmd_relay,
};
#define NUM_COMMANDS (sizeof cli_commands / sizeof cli_commands[0])
const size_t cli_num_commands = NUM_COMMANDS;

int cli_usage_error(const cli_command_t *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_err("pccl %s: %s\nTry 'pccl %s --help'.\n", cmd->name, msg, cmd->name);
    return CLI_EXIT_USAGE;
}

int cli_parse_addr(const cli_command_t *cmd, const char *flag, const char *value, unsigned short default_port,
                   ccoip_socket_address_t *out, int unresolved_exit) {
    return cli_parse_addr_as(cmd, flag, value, default_port, 0, out, unresolved_exit);
}

int cli_parse_addr_as(const cli_command_t *cmd, const char *flag, const char *value, unsigned short default_port,
                      int addr_flags, ccoip_socket_address_t *out, int unresolved_exit) {
    char err[512];
    pcclResult_t rc = pcclToolParseAddress(value, default_port, addr_flags, out, err, sizeof err);
    if (rc == pcclSuccess) return 0;
    if (rc == pcclInvalidArgument) return cli_usage_error(cmd, "--%s: %s", flag, err);
    cli_err("pccl %s: --%s: %s\n", cmd->name, flag, err);
    return unresolved_exit;
}

static void print_main_help(void) {
    printf("usage: pccl [--version] [--help] COMMAND [ARGS]\n\n"
           "pccl - fault-tolerant collective communications: run a master, join peers, inspect a run.\n\n"
           "commands:\n");
    for (size_t i = 0; i < NUM_COMMANDS; i++) printf("  %-18s %s\n", cli_commands[i]->name, cli_commands[i]->summary);
    printf("  %-18s %s\n", "help COMMAND", "show help for COMMAND");
    printf("  %-18s %s\n", "help --man COMMAND", "print the OPTIONS of COMMAND's man page (scdoc)");
    printf("  %-18s %s\n", "help --synopsis COMMAND", "print the SYNOPSIS of COMMAND's man page (scdoc)");
    printf("  %-18s %s\n", "help --completions SHELL", "print the completion script of bash, zsh or fish");
    printf("\nExit codes: 0 ok, 1 failure, 2 usage error. See pccl(1).\n");
}

/* "pccl: unknown command 'X'." with the closest command name when one is near; returns CLI_EXIT_USAGE. */
static int unknown_command(const char *name) {
    const char *names[NUM_COMMANDS + 1];
    for (size_t i = 0; i < NUM_COMMANDS; i++) names[i] = cli_commands[i]->name;
    names[NUM_COMMANDS] = "help";
    const char *near = cli_suggest(name, strlen(name), names, NUM_COMMANDS + 1);
    if (near) cli_err("pccl: unknown command '%s' (did you mean '%s'?). See 'pccl --help'.\n", name, near);
    else cli_err("pccl: unknown command '%s'. See 'pccl --help'.\n", name);
    return CLI_EXIT_USAGE;
}

static const cli_command_t *find_command(const char *name) {
    for (size_t i = 0; i < NUM_COMMANDS; i++) {
        if (strcmp(cli_commands[i]->name, name) == 0) return cli_commands[i];
        if (cli_commands[i]->alias && strcmp(cli_commands[i]->alias, name) == 0) return cli_commands[i];
    }
    return NULL;
}

/* `pccl __complete [CMD]`: words for shell completion, one per line. */
static int complete(int argc, char **argv) {
    if (argc < 3) {
        for (size_t i = 0; i < NUM_COMMANDS; i++) printf("%s\n", cli_commands[i]->name);
        printf("help\n");
        return 0;
    }
    const cli_command_t *cmd = find_command(argv[2]);
    if (!cmd) return 1;
    for (const cli_flag_t *f = cmd->flags; f && f->name; f++) printf("--%s\n", f->name);
    printf("--help\n");
    return 0;
}

/* `pccl help ...`: a command's help, or the documents the build generates from the flag tables. */
static int help(int argc, char **argv) {
    if (argc < 3) {
        print_main_help();
        return CLI_EXIT_OK;
    }
    int man = strcmp(argv[2], "--man") == 0, completions = strcmp(argv[2], "--completions") == 0;
    int synopsis = strcmp(argv[2], "--synopsis") == 0;
    man |= synopsis;
    if ((man || completions) && argc != 4) {
        cli_err("pccl help: %s needs one argument (%s)\n", argv[2], man ? "a command" : "bash, zsh or fish");
        return CLI_EXIT_USAGE;
    }
    if (completions) {
        if (cli_print_completions(argv[3]) == 0) return CLI_EXIT_OK;
        cli_err("pccl help: unknown shell '%s' (bash, zsh, fish)\n", argv[3]);
        return CLI_EXIT_USAGE;
    }
    const cli_command_t *cmd = find_command(argv[man ? 3 : 2]);
    if (!cmd) return unknown_command(argv[man ? 3 : 2]);
    if (synopsis && cli_print_man_synopsis(cmd) != 0) {
        cli_err("pccl help: the synopsis of %s names a flag it does not have\n", cmd->name);
        return CLI_EXIT_FAIL;
    }
    if (man && !synopsis) cli_print_man_options(cmd);
    else if (!man) cli_print_help(cmd);
    return CLI_EXIT_OK;
}

int main(int argc, char **argv) {
    cli_early_log_format(argc, argv);
    if (argc < 2) {
        print_main_help();
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        print_main_help();
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0) {
        pcclBuildInfo_t info;
        pcclGetBuildInfo(&info);
        printf("pccl %s (cuda: %s)\n", PCCL_VERSION_STRING, info.has_cuda_support ? "yes" : "no");
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "__complete") == 0) return complete(argc, argv);
    if (strcmp(name, "help") == 0) return help(argc, argv);
    /* "pccl bench p2p" is the second spelling of bench-bandwidth. */
    if (strcmp(name, "bench") == 0 && argc >= 3 && strcmp(argv[2], "p2p") == 0) {
        const cli_command_t *cmd = find_command("bench-bandwidth");
        if (cmd) return cmd->run(argc - 2, argv + 2);
    }
    const cli_command_t *cmd = find_command(name);
    if (!cmd) return unknown_command(name);
    return cmd->run(argc - 1, argv + 1);
}
