"""C declarations of the extension headers the package binds beyond pccl.h and pccl_coll.h: leaving a run
(pccl_leave.h), run keys from memory and the master's host name (pccl_ext.h) and the library's log
(pccl_tools.h). Checked against the headers by tests/test_abi.py."""

EXT_CDEFS = """
typedef enum pcclExtDeparture_t {
    pcclExtInRun = 0, pcclExtLeft = 1, pcclExtKicked = 2, pcclExtMasterLost = 3, pcclExtShutDown = 4
} pcclExtDeparture_t;
pcclResult_t pcclExtLeave(pcclComm_t *communicator);
pcclResult_t pcclExtGetDeparture(const pcclComm_t *communicator, pcclExtDeparture_t *departure_out);
pcclResult_t pcclExtCommSetRunKey(pcclComm_t *communicator, const void *key, size_t len);
pcclResult_t pcclExtMasterSetRunKey(pcclMasterInstance_t *master, const void *key, size_t len, bool encrypt);
pcclResult_t pcclExtCommSetName(pcclComm_t *communicator, const char *name);
pcclResult_t pcclExtCommSetMasterHost(pcclComm_t *communicator, const char *host_port);

typedef enum pcclLogLevel_t { PCCL_LOG_ERROR = 0, PCCL_LOG_WARN = 1, PCCL_LOG_INFO = 2, PCCL_LOG_DEBUG = 3 } pcclLogLevel_t;
typedef void (*pcclToolLogSink_t)(pcclLogLevel_t level, const char *component, const char *msg, void *ctx);
void pcclToolLogSetLevel(pcclLogLevel_t level);
void pcclToolLogSetSink(pcclToolLogSink_t sink, void *ctx);
"""
