/* master_admin_kinds.c - the collectives by kind and by algorithm in /v1/status and /metrics (see
 * master_admin_kinds.h). */
#include "server/master_admin_kinds.h"

cJSON *pccl__coll_kinds_json(const msm_coll_stats_t by_kind[MSM_COLL_NKINDS]) {
    cJSON *o = cJSON_CreateObject();
    for (unsigned k = 0; o && k < MSM_COLL_NKINDS; k++) {
        cJSON *e = cJSON_AddObjectToObject(o, msm_coll_kind_name(k));
        if (!e) {
            cJSON_Delete(o);
            return NULL;
        }
        cJSON_AddNumberToObject(e, "completed", (double)by_kind[k].completed);
        cJSON_AddNumberToObject(e, "aborted", (double)by_kind[k].aborted);
        cJSON_AddNumberToObject(e, "rejected", (double)by_kind[k].rejected);
        cJSON_AddNumberToObject(e, "bytes", (double)by_kind[k].bytes);
    }
    return o;
}

void pccl__coll_kinds_metrics(FILE *f, const msm_coll_stats_t by_kind[MSM_COLL_NKINDS]) {
    fprintf(f, "# HELP pccl_collective_operations_total Collective operations by kind and result: completed, aborted "
               "(a member failed or left), rejected (parameters differ, too few peers, conflicting calls).\n"
               "# TYPE pccl_collective_operations_total counter\n");
    for (unsigned k = 0; k < MSM_COLL_NKINDS; k++) {
        const char *name = msm_coll_kind_name(k);
        fprintf(f, "pccl_collective_operations_total{kind=\"%s\",result=\"completed\"} %llu\n", name,
                (unsigned long long)by_kind[k].completed);
        fprintf(f, "pccl_collective_operations_total{kind=\"%s\",result=\"aborted\"} %llu\n", name,
                (unsigned long long)by_kind[k].aborted);
        fprintf(f, "pccl_collective_operations_total{kind=\"%s\",result=\"rejected\"} %llu\n", name,
                (unsigned long long)by_kind[k].rejected);
    }
    fprintf(f, "# HELP pccl_collective_bytes_total Payload bytes of the completed collective operations by kind (the "
               "buffer of an all-reduce, broadcast or reduce-scatter, the output of an all-gather).\n"
               "# TYPE pccl_collective_bytes_total counter\n");
    for (unsigned k = 0; k < MSM_COLL_NKINDS; k++)
        fprintf(f, "pccl_collective_bytes_total{kind=\"%s\"} %llu\n", msm_coll_kind_name(k),
                (unsigned long long)by_kind[k].bytes);
}

cJSON *pccl__coll_algos_json(const uint64_t by_algo[MSM_ALGO_SLOTS]) {
    cJSON *o = cJSON_CreateObject();
    for (uint8_t a = WIRE_ALGO_RING; o && a < MSM_ALGO_SLOTS; a++)
        if (!cJSON_AddNumberToObject(o, msm_algo_name(a), (double)by_algo[a])) {
            cJSON_Delete(o);
            return NULL;
        }
    return o;
}

void pccl__coll_algos_metrics(FILE *f, const uint64_t by_algo[MSM_ALGO_SLOTS]) {
    fprintf(f, "# HELP pccl_collective_algorithm_total Completed collective operations by the algorithm the master "
               "chose: ring, rhd (recursive halving and doubling; a broadcast's binomial tree), rd (recursive "
               "doubling).\n"
               "# TYPE pccl_collective_algorithm_total counter\n");
    for (uint8_t a = WIRE_ALGO_RING; a < MSM_ALGO_SLOTS; a++)
        fprintf(f, "pccl_collective_algorithm_total{algo=\"%s\"} %llu\n", msm_algo_name(a),
                (unsigned long long)by_algo[a]);
}
