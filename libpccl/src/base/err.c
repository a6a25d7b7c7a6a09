/* err.c - see err.h. */
#include "base/err.h"

static const struct {
    const char *text;
    pcclResult_t result;
} g_errors[PERR_COUNT_] = {
    [PERR_OK_] = {"success", pcclSuccess},
#define PERR_ROW_(name, res, txt) [PERR_##name] = {txt, res},
    PCCL_ERRORS(PERR_ROW_)
#undef PERR_ROW_
};

const char *perr_str(int rc) {
    int i = -rc;
    return i >= 0 && i < PERR_COUNT_ ? g_errors[i].text : "unknown error";
}

pcclResult_t perr_result(int rc) {
    int i = -rc;
    return i >= 0 && i < PERR_COUNT_ ? g_errors[i].result : pcclInternalError;
}
