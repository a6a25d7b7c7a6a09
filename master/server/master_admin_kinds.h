/*
 * master_admin_kinds.h - the collectives by kind (msm_coll_stats_t) and by algorithm as the admin port shows them:
 * JSON objects keyed by kind or algorithm name for /v1/status, and the pccl_collective_* series of /metrics. Pure renderers of the
 * counts they are given (tests/unit/test_admin_kinds.c).
 */
#ifndef PCCL_MASTER_ADMIN_KINDS_H
#define PCCL_MASTER_ADMIN_KINDS_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "sm/sm.h"

/* {"all_reduce": {"completed": n, "aborted": n, "rejected": n, "bytes": n}, "broadcast": {...}, ...}: every kind,
 * in pcclExtCollKind_t order. NULL when out of memory. */
cJSON *pccl__coll_kinds_json(const msm_coll_stats_t by_kind[MSM_COLL_NKINDS]);

/* pccl_collective_operations_total{kind,result} (completed, aborted, rejected) and pccl_collective_bytes_total{kind},
 * with their HELP and TYPE lines. */
void pccl__coll_kinds_metrics(FILE *f, const msm_coll_stats_t by_kind[MSM_COLL_NKINDS]);

/* {"ring": n, "rhd": n, "rd": n}: the completed collectives by the algorithm they ran (msm_stats_t.by_algo).
 * NULL when out of memory. */
cJSON *pccl__coll_algos_json(const uint64_t by_algo[MSM_ALGO_SLOTS]);

/* pccl_collective_algorithm_total{algo} (ring, rhd, rd) with its HELP and TYPE lines. */
void pccl__coll_algos_metrics(FILE *f, const uint64_t by_algo[MSM_ALGO_SLOTS]);

#endif
