/*
 * cmd_solve_topology.c - `pccl solve-topology`: the master's ring-order
 * solver run offline on a measured bandwidth matrix, to inspect the ring a
 * master would choose or to try the solver on synthetic matrices.
 */
#include "cli.h"
#include "opts/shared.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "topo_matrix.h"
#include "server/server.h"

static const cli_flag_t flags[] = {
#include "opts/solve_topology.def"
    {0},
};

static int run(int argc, char **argv);

const cli_command_t cli_cmd_solve_topology = {
    .name = "solve-topology",
    .alias = NULL,
    .summary = "choose the ring order for a bandwidth matrix: max bottleneck, then min total time",
    .usage = "--matrix [--json] [--time-limit]",
    .flags = flags,
    .run = run,
};

static double topo_ms_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void print_human(const topo_solution_t *s, const double *bw, double limit_ms) {
    int n = s->n, e = topo_ring_bottleneck_edge(bw, n, s->order);
    printf("ring:");
    for (int k = 0; k < n; k++) printf(" %d ->", s->order[k]);
    printf(" %d\n", s->order[0]);
    printf("bottleneck: %.1f Mbit/s (edge %d->%d)\n", s->bottleneck_mbps, s->order[e], s->order[(e + 1) % n]);
    printf("total transfer time: %.6g s/Mbit (sum of 1/bw over the %d ring edges)\n", s->total_time, n);
    if (s->optimal) {
        printf("optimal: yes (exact, n=%d)\n", n);
    } else if (s->bottleneck_optimal) {
        printf("optimal: bottleneck proven optimal; total time not proven (heuristic, n=%d, %.0f ms)\n", n, limit_ms);
    } else {
        printf("optimal: not proven (heuristic, n=%d, %.0f ms); bottleneck upper bound %.1f Mbit/s\n", n, limit_ms,
               s->bottleneck_bound_mbps);
    }
}

static int print_json(const topo_solution_t *s, const double *bw, double solve_ms) {
    int n = s->n, e = topo_ring_bottleneck_edge(bw, n, s->order);
    cJSON *o = cJSON_CreateObject();
    cJSON *ring = cJSON_AddArrayToObject(o, "ring");
    for (int k = 0; k < n; k++) cJSON_AddItemToArray(ring, cJSON_CreateNumber(s->order[k]));
    cJSON_AddNumberToObject(o, "bottleneck_mbps", s->bottleneck_mbps);
    cJSON *edge = cJSON_AddArrayToObject(o, "bottleneck_edge");
    cJSON_AddItemToArray(edge, cJSON_CreateNumber(s->order[e]));
    cJSON_AddItemToArray(edge, cJSON_CreateNumber(s->order[(e + 1) % n]));
    cJSON_AddNumberToObject(o, "total_time", s->total_time);
    cJSON_AddStringToObject(o, "total_time_unit", "s/Mbit");
    cJSON_AddBoolToObject(o, "optimal", s->optimal);
    cJSON_AddBoolToObject(o, "bottleneck_optimal", s->bottleneck_optimal);
    cJSON_AddNumberToObject(o, "bottleneck_bound_mbps", s->bottleneck_bound_mbps);
    cJSON_AddNumberToObject(o, "n", n);
    cJSON_AddNumberToObject(o, "solve_ms", solve_ms);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text) return -1;
    printf("%s\n", text);
    cJSON_free(text);
    return 0;
}

/* Flag values of `pccl solve-topology`, filled by on_flag. */
typedef struct {
    const char *matrix;
    int json;
    double limit_ms;
} solve_args_t;

static int on_flag(void *ctx, const char *name, const char *value) {
    solve_args_t *a = ctx;
    if (strcmp(name, "matrix") == 0) {
        a->matrix = value;
    } else if (strcmp(name, "json") == 0) {
        a->json = 1;
    } else if (strcmp(name, "time-limit") == 0) {
        if (cli_flag_double(&cli_cmd_solve_topology, name, value, &a->limit_ms) != 0)
            return cli_usage_error(&cli_cmd_solve_topology,
                                   "--time-limit wants milliseconds between 0 and 86400000, got '%s'", value);
    }
    return 0;
}

static int run(int argc, char **argv) {
    const cli_command_t *cmd = &cli_cmd_solve_topology;
    solve_args_t a = {.limit_ms = TOPO_DEFAULT_TIME_MS};
    int rc = cli_parse_flags(cmd, argc, argv, on_flag, &a, NULL);
    if (rc != CLI_FLAGS_GO_ON) return rc;
    if (!a.matrix) return cli_usage_error(cmd, "--matrix FILE is required");

    double *bw = NULL;
    int n = 0;
    char err[512];
    if (topo_matrix_read(a.matrix, &bw, &n, err, sizeof err) != 0) {
        cli_err("pccl %s: %s\n", cmd->name, err);
        return CLI_EXIT_FAIL;
    }
    if (n < 2) {
        cli_err("pccl %s: %s: matrix is %dx%d; a ring needs at least 2 peers\n", cmd->name, a.matrix, n, n);
        free(bw);
        return CLI_EXIT_FAIL;
    }

    topo_solution_t sol;
    double t0 = topo_ms_now();
    rc = topo_solve(bw, n, a.limit_ms, NULL, &sol);
    double solve_ms = topo_ms_now() - t0;
    int status = CLI_EXIT_OK;
    if (rc != 0) {
        cli_err("pccl %s: %s: the solver failed (%s)\n", cmd->name, a.matrix, rc == -PERR_NOMEM ? "out of memory" : "bad matrix");
        status = CLI_EXIT_FAIL;
    } else if (sol.bottleneck_mbps <= 0) {
        cli_err("pccl %s: %s: no ring avoids unreachable links (every ring has a 0 Mbit/s edge)\n", cmd->name,
                a.matrix);
        status = CLI_EXIT_FAIL;
    } else if (a.json) {
        if (print_json(&sol, bw, solve_ms) != 0) status = CLI_EXIT_FAIL;
    } else {
        print_human(&sol, bw, a.limit_ms);
    }
    topo_solution_free(&sol);
    free(bw);
    return status;
}
