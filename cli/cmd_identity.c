/*
 * cmd_identity.c - `pccl identity FILE`: a peer's identity file (created, mode 0600, when missing) and the
 * line an operator puts into the master's allow-keys file: the public key, then the uuid the key gives.
 */
#include <stdio.h>

#include "cli.h"

static const cli_flag_t flags[] = {{0}};

static int run(int argc, char **argv);

const cli_command_t cli_cmd_identity = {
    .name = "identity",
    .summary = "print a peer identity's public key (for pccl master --allow-keys), creating the file if missing",
    .usage = "FILE",
    .flags = flags,
    .run = run,
    .help_footer = "\nFILE is what pccl join --identity-file (or PCCL_IDENTITY_FILE) names. Prints one line:\n"
                   "the public key (base64), then '# uuid' and the uuid it gives the peer.\n"
                   "exit codes: 0 printed, 1 the file is refused (permissions, owner, malformed), 2 usage error\n",
};

static int run(int argc, char **argv) {
    const cli_command_t *cmd = &cli_cmd_identity;
    int first = 0;
    int rc = cli_parse_flags(cmd, argc, argv, NULL, NULL, &first);
    if (rc != CLI_FLAGS_GO_ON) return rc;
    if (first >= argc) return cli_usage_error(cmd, "FILE is required");
    if (argc - first > 1) return cli_usage_error(cmd, "unexpected argument '%s'", argv[first + 1]);
    char err[320], pk[PCCL_TOOL_PUBLIC_KEY_STRLEN];
    uint8_t u[16];
    int created;
    if (pcclToolLoadIdentity(argv[first], pk, u, &created, err, sizeof err) != pcclSuccess) {
        cli_err("pccl identity: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    printf("%s # uuid ", pk);
    for (int i = 0; i < 16; i++) printf("%02x", u[i]);
    printf("\n");
    if (created) cli_err("pccl identity: created '%s'\n", argv[first]);
    return CLI_EXIT_OK;
}
