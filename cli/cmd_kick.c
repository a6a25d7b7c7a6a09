/*
 * cmd_kick.c - `pccl kick UUID-PREFIX`: removes one peer from a run through
 * the master's admin port. The prefix is resolved against GET /v1/status, so
 * an operator types the 8 characters `pccl status` shows; no match or more
 * than one match is an error that names the candidates.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "admin_client.h"

#define KICK_MIN_PREFIX 4

static int run(int argc, char **argv);

const cli_command_t cli_cmd_kick = {
    .name = "kick",
    .summary = "remove a peer from the run, named by a prefix of its uuid (master admin port)",
    .usage = "UUID-PREFIX --admin-token-file FILE [--admin HOST:PORT] [--timeout MS]",
    .flags = admin_client_flags,
    .run = run,
    .renamed = admin_client_renamed,
    .help_footer = "\nexit codes: 0 kicked, 1 failure (refused token, no peer or several peers with that prefix),\n"
                   "2 usage error, 3 master unreachable\n",
};

/* The peers whose uuid starts with prefix; prints them when there are several. Returns the one match or NULL. */
static const cJSON *resolve(const cJSON *peers, const char *prefix, int *matches) {
    const cJSON *p, *found = NULL;
    size_t pl = strlen(prefix);
    *matches = 0;
    cJSON_ArrayForEach(p, peers) {
        const char *u = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "uuid"));
        if (u && strncmp(u, prefix, pl) == 0) {
            found = p;
            ++*matches;
        }
    }
    return *matches == 1 ? found : NULL;
}

static const char *field(const cJSON *o, const char *k) {
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "?";
}

static int run(int argc, char **argv) {
    const cli_command_t *cmd = &cli_cmd_kick;
    admin_client_t a;
    admin_client_init(&a, cmd);
    int first = 0;
    int rc = cli_parse_flags(cmd, argc, argv, admin_client_on_flag, &a, &first);
    if (rc != CLI_FLAGS_GO_ON || (rc = admin_client_addr(&a)) != CLI_FLAGS_GO_ON) return rc;
    if (first >= argc) return cli_usage_error(cmd, "UUID-PREFIX is required");
    if (argc - first > 1) return cli_usage_error(cmd, "unexpected argument '%s'", argv[first + 1]);
    char prefix[33];
    size_t pl = strlen(argv[first]);
    if (pl < KICK_MIN_PREFIX || pl > 32 || strspn(argv[first], "0123456789abcdefABCDEF") != pl)
        return cli_usage_error(cmd, "bad UUID-PREFIX '%s' (want %d to 32 hex digits)", argv[first], KICK_MIN_PREFIX);
    for (size_t i = 0; i <= pl; i++) prefix[i] = (char)tolower((unsigned char)argv[first][i]);
    char token[512];
    if ((rc = admin_client_token(&a, token, sizeof token)) != CLI_EXIT_OK) return rc;

    int unreachable = 0;
    char *body = admin_client_get(&a, "/v1/status", &unreachable);
    if (!body) return unreachable ? CLI_EXIT_UNREACHABLE : CLI_EXIT_FAIL;
    cJSON *st = cJSON_Parse(body);
    free(body);
    const cJSON *peers = cJSON_GetObjectItemCaseSensitive(st, "peers");
    if (!cJSON_IsArray(peers)) {
        cli_err("pccl kick: %s did not answer with a status document\n", a.where);
        cJSON_Delete(st);
        return CLI_EXIT_FAIL;
    }
    int matches;
    const cJSON *peer = resolve(peers, prefix, &matches);
    if (matches == 0) {
        cli_err("pccl kick: no peer's uuid starts with '%s' (%d peers; see 'pccl status')\n", prefix,
                cJSON_GetArraySize(peers));
        cJSON_Delete(st);
        return CLI_EXIT_FAIL;
    }
    if (matches > 1) {
        cli_err("pccl kick: '%s' is ambiguous; %d peers match, give more digits:\n", prefix, matches);
        const cJSON *p;
        cJSON_ArrayForEach(p, peers) {
            const char *u = field(p, "uuid");
            if (strncmp(u, prefix, strlen(prefix)) == 0)
                cli_err("  %s  %s  %s\n", u, field(p, "address"), field(p, "phase"));
        }
        cJSON_Delete(st);
        return CLI_EXIT_FAIL;
    }
    char path[128];
    snprintf(path, sizeof path, "/v1/peers/%s/kick", field(peer, "uuid"));
    rc = admin_client_post(&a, path, token);
    if (rc == CLI_EXIT_OK) printf("kicked %s (%s)\n", field(peer, "uuid"), field(peer, "address"));
    cJSON_Delete(st);
    return rc;
}
