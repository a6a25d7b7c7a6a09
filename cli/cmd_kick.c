/*
 * cmd_kick.c - `pccl kick UUID-PREFIX|NAME`: removes one peer from a run through
 * the master's admin port. The argument is resolved against GET /v1/status, so
 * an operator types the 8 characters `pccl status` shows, or the peer's name;
 * no match or more than one match (a name two peers share, or a name that is
 * also another peer's uuid prefix) is an error that names the candidates.
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
    .summary = "remove a peer from the run, named by a prefix of its uuid or by its name (master admin port)",
    .usage = "UUID-PREFIX|NAME --admin-token-file [--admin] [--timeout]",
    .flags = admin_client_flags,
    .run = run,
    .renamed = admin_client_renamed,
    .help_footer = "\nexit codes: 0 kicked, 1 failure (refused token, no peer or several peers with that prefix or\n"
                   "name), 2 usage error, 3 master unreachable\n",
};

/* Whether peer p is what the operator named: its name, or (a hex word of 4+ digits) a prefix of its uuid. */
static int names(const cJSON *p, const char *arg, int hex) {
    const char *u = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "uuid"));
    const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "name"));
    if (n && *n && strcmp(n, arg) == 0) return 1;
    if (!hex || !u) return 0;
    size_t pl = strlen(arg);
    for (size_t i = 0; i < pl; i++)
        if (tolower((unsigned char)arg[i]) != u[i]) return 0;
    return 1;
}

/* The peers arg names; returns the one match or NULL. */
static const cJSON *resolve(const cJSON *peers, const char *arg, int hex, int *matches) {
    const cJSON *p, *found = NULL;
    *matches = 0;
    cJSON_ArrayForEach(p, peers) {
        if (names(p, arg, hex)) {
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
    if (first >= argc) return cli_usage_error(cmd, "UUID-PREFIX or NAME is required");
    if (argc - first > 1) return cli_usage_error(cmd, "unexpected argument '%s'", argv[first + 1]);
    const char *arg = argv[first];
    size_t pl = strlen(arg);
    int hex = pl >= KICK_MIN_PREFIX && pl <= 32 && strspn(arg, "0123456789abcdefABCDEF") == pl;
    if (!hex && (!pl || !pcclToolNameValid(arg)))
        return cli_usage_error(cmd, "bad peer '%s' (want %d to 32 hex digits of its uuid, or its name)", arg,
                               KICK_MIN_PREFIX);
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
    const cJSON *peer = resolve(peers, arg, hex, &matches);
    if (matches == 0) {
        cli_err("pccl kick: no peer is named '%s' or has a uuid starting with it (%d peers; see 'pccl status')\n",
                arg, cJSON_GetArraySize(peers));
        cJSON_Delete(st);
        return CLI_EXIT_FAIL;
    }
    if (matches > 1) {
        cli_err("pccl kick: '%s' is ambiguous; %d peers match, give more digits of the uuid:\n", arg, matches);
        const cJSON *p;
        cJSON_ArrayForEach(p, peers) {
            const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "name"));
            if (names(p, arg, hex))
                cli_err("  %s  %s%s%s%s  %s\n", field(p, "uuid"), n && *n ? "\"" : "", n && *n ? n : "",
                        n && *n ? "\"  " : "", field(p, "address"), field(p, "phase"));
        }
        cJSON_Delete(st);
        return CLI_EXIT_FAIL;
    }
    char path[128];
    snprintf(path, sizeof path, "/v1/peers/%s/kick", field(peer, "uuid"));
    rc = admin_client_post(&a, path, token);
    const char *nm = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(peer, "name"));
    if (rc == CLI_EXIT_OK)
        printf("kicked %s%s%s%s (%s)\n", field(peer, "uuid"), nm && *nm ? " \"" : "", nm && *nm ? nm : "",
               nm && *nm ? "\"" : "", field(peer, "address"));
    cJSON_Delete(st);
    return rc;
}
