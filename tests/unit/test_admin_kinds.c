/* test_admin_kinds.c - the collectives by kind as the admin port shows them (master_admin_kinds.c): the JSON object
 * of /v1/status (every kind by name, its counts and bytes) and the pccl_collective_* series of /metrics (a kind and
 * a result label on each, in the Prometheus text format); the completed ones by algorithm (ring, rhd, rd) both ways. */
#include <stdlib.h>
#include <string.h>

#include "server/master_admin_kinds.h"
#include "tinytest.h"

static const char *const KINDS[] = {"all_reduce", "broadcast", "all_gather", "all_gather_v", "reduce_scatter",
                                    "barrier"};

/* Distinct counts per kind and field: kind k's completed is 1000k + 1, aborted + 2, rejected + 3, bytes + 4. */
static void fill(msm_coll_stats_t s[MSM_COLL_NKINDS]) {
    for (uint64_t k = 0; k < MSM_COLL_NKINDS; k++)
        s[k] = (msm_coll_stats_t){.completed = 1000 * k + 1, .aborted = 1000 * k + 2, .rejected = 1000 * k + 3,
                                  .bytes = (uint64_t)1 << 40 | (1000 * k + 4)};
}

static void test_json(void) {
    msm_coll_stats_t s[MSM_COLL_NKINDS];
    fill(s);
    cJSON *o = pccl__coll_kinds_json(s);
    CHECK(o != NULL);
    CHECK_EQ_U64(cJSON_GetArraySize(o), MSM_COLL_NKINDS);
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, o) {
        CHECK(strcmp(e->string, KINDS[k]) == 0); /* pcclExtCollKind_t order */
        static const char *const fields[] = {"completed", "aborted", "rejected", "bytes"};
        for (int f = 0; f < 4; f++) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, fields[f]);
            CHECK(cJSON_IsNumber(n));
            uint64_t want = (f == 3 ? (uint64_t)1 << 40 : 0) | (uint64_t)(1000 * k + f + 1);
            CHECK_EQ_U64((uint64_t)cJSON_GetNumberValue(n), want);
        }
        CHECK_EQ_U64(cJSON_GetArraySize(e), 4);
        k++;
    }
    cJSON_Delete(o);
}

/* The series as text; caller frees. */
static char *metrics(const msm_coll_stats_t *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    if (!f) return NULL;
    pccl__coll_kinds_metrics(f, s);
    fclose(f);
    return buf;
}

static void test_metrics(void) {
    msm_coll_stats_t s[MSM_COLL_NKINDS];
    fill(s);
    char *text = metrics(s);
    CHECK(text != NULL);
    if (!text) return;
    CHECK(strstr(text, "# TYPE pccl_collective_operations_total counter\n") != NULL);
    CHECK(strstr(text, "# TYPE pccl_collective_bytes_total counter\n") != NULL);
    CHECK(strstr(text, "# HELP pccl_collective_operations_total ") != NULL);
    CHECK(strstr(text, "# HELP pccl_collective_bytes_total ") != NULL);
    static const char *const results[] = {"completed", "aborted", "rejected"};
    for (int k = 0; k < MSM_COLL_NKINDS; k++) {
        char line[160];
        for (int r = 0; r < 3; r++) {
            snprintf(line, sizeof line, "\npccl_collective_operations_total{kind=\"%s\",result=\"%s\"} %d\n", KINDS[k],
                     results[r], 1000 * k + r + 1);
            CHECK(strstr(text, line) != NULL);
        }
        snprintf(line, sizeof line, "\npccl_collective_bytes_total{kind=\"%s\"} %llu\n", KINDS[k],
                 (unsigned long long)((uint64_t)1 << 40 | (uint64_t)(1000 * k + 4)));
        CHECK(strstr(text, line) != NULL);
    }
    /* Every line is a comment or a sample of the two families: 2 x (HELP, TYPE), 18 + 6 samples. */
    int lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    CHECK_EQ_U64(lines, 4 + 3 * MSM_COLL_NKINDS + MSM_COLL_NKINDS);
    free(text);
    /* Zero counts are series too (a kind that never ran reads 0, not absent). */
    memset(s, 0, sizeof s);
    text = metrics(s);
    CHECK(text && strstr(text, "\npccl_collective_bytes_total{kind=\"barrier\"} 0\n") != NULL);
    free(text);
}

static void test_algorithms(void) {
    const uint64_t by_algo[MSM_ALGO_SLOTS] = {0, 7, (uint64_t)1 << 40, 0};
    cJSON *o = pccl__coll_algos_json(by_algo);
    CHECK(o != NULL && cJSON_GetArraySize(o) == 3);
    static const char *const names[] = {"ring", "rhd", "rd"};
    for (int a = 0; o && a < 3; a++) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, names[a]);
        CHECK(cJSON_IsNumber(n) && (uint64_t)cJSON_GetNumberValue(n) == by_algo[a + 1]);
    }
    cJSON_Delete(o);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    if (!f) return;
    pccl__coll_algos_metrics(f, by_algo);
    fclose(f);
    CHECK(strstr(buf, "# TYPE pccl_collective_algorithm_total counter\n") != NULL);
    CHECK(strstr(buf, "\npccl_collective_algorithm_total{algo=\"ring\"} 7\n") != NULL);
    CHECK(strstr(buf, "\npccl_collective_algorithm_total{algo=\"rhd\"} 1099511627776\n") != NULL);
    CHECK(strstr(buf, "\npccl_collective_algorithm_total{algo=\"rd\"} 0\n") != NULL);
    CHECK(strstr(buf, "auto") == NULL);
    free(buf);
}

int main(void) {
    RUN_TEST(test_json);
    RUN_TEST(test_metrics);
    RUN_TEST(test_algorithms);
    TEST_MAIN_END();
}
