/* tools.c - pccl_tools.h: the library's log, addresses, keys, identities and bandwidth probe for the pccl
 * command, each mapped once to pcclResult_t here. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <sodium.h>

#include "api/api.h"
#include "base/base.h"
#include "p2p/p2p.h"
#include "pccl_tools.h"
#include "sec/sec.h"

struct pcclToolKey {
    sec_cfg_t sec;
};

void pcclToolLogSetLevel(pcclLogLevel_t level) { pccl_log_set_level(level); }

pcclResult_t pcclToolLogParseLevel(const char *s, pcclLogLevel_t *out) {
    int l = s ? pccl_log_parse_level(s) : -PERR_INVALID;
    if (l < 0) return perr_result(l);
    *out = (pcclLogLevel_t)l;
    return pcclSuccess;
}

void pcclToolLogSetJson(int json) { pccl_log_set_json(json); }

void pcclToolLogSetSink(pcclToolLogSink_t sink, void *ctx) { pccl_log_set_sink(sink, ctx); }

void pcclToolLog(pcclLogLevel_t level, const char *component, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pccl_log_v(level, component, fmt, ap);
    va_end(ap);
}

void pcclToolLogPlain(pcclLogLevel_t level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pccl_log_vplain(level, fmt, ap);
    va_end(ap);
}

/* The tools' one mapping where perr_result's default does not say it: a name that does not resolve is a
 * failure to reach the host (retry), not a bad argument. */
static pcclResult_t tool_result(int rc) { return rc == -PERR_UNRESOLVED ? pcclRankConnectionFailed : perr_result(rc); }

pcclResult_t pcclToolParseAddress(const char *s, uint16_t default_port, int flags, ccoip_socket_address_t *out,
                                  char *err, size_t errlen) {
    char why[320] = "";
    int rc = !s ? -PERR_SYNTAX
             : flags & PCCL_TOOL_ADDR_ADVERTISED
                 ? addr_parse_advertised(s, out, why, sizeof why)
                 : addr_parse(s, flags & PCCL_TOOL_ADDR_REQUIRE_PORT ? 0 : default_port,
                              flags & PCCL_TOOL_ADDR_REQUIRE_PORT, out, why, sizeof why);
    if (rc != 0 && err) snprintf(err, errlen, "%s", why[0] ? why : "no address");
    return tool_result(rc);
}

pcclResult_t pcclToolResolveAll(const char *s, uint16_t default_port, ccoip_socket_address_t *out, int max, int *n,
                                char *err, size_t errlen) {
    char why[320] = "";
    int rc = !s || !out || !n || max < 1 ? -PERR_SYNTAX : addr_resolve_all(s, default_port, out, max, why, sizeof why);
    if (rc > 0) *n = rc;
    if (rc < 0 && err) snprintf(err, errlen, "%s", why[0] ? why : "no address");
    return tool_result(rc < 0 ? rc : 0);
}

void pcclToolAddressString(const ccoip_socket_address_t *a, int with_port, char out[PCCL_TOOL_ADDR_STRLEN]) {
    if (with_port) addr_str(a, out);
    else addr_ip_str(&a->inet, out);
}

size_t pcclToolSockaddr(const ccoip_socket_address_t *a, void *out, size_t cap) {
    struct sockaddr_storage ss;
    socklen_t n = addr_to_sockaddr(a, &ss);
    if (cap < n) return 0;
    memcpy(out, &ss, n);
    return n;
}

pcclResult_t pcclToolKeyLoad(const char *path, pcclToolKey_t **out, char *err, size_t errlen) {
    char why[320] = "";
    pcclToolKey_t *k = calloc(1, sizeof *k);
    if (!k) return pcclInternalError;
    int rc = path ? sec_key_from_file(path, &k->sec, why, sizeof why) : sec_key_from_env(&k->sec, why, sizeof why);
    if (rc < 0) {
        if (err) snprintf(err, errlen, "%s", why);
        free(k);
        return pcclInvalidArgument;
    }
    k->sec.encrypt = 0;
    *out = k;
    return pcclSuccess;
}

pcclResult_t pcclToolKeyEncrypt(pcclToolKey_t *k, int encrypt) {
    if (!k || (encrypt && !k->sec.keyed)) return pcclInvalidUsage;
    k->sec.encrypt = encrypt != 0;
    return pcclSuccess;
}

pcclToolKeyKind_t pcclToolKeyKind(const pcclToolKey_t *k) {
    return !k || !k->sec.keyed ? pcclToolKeyOpen : k->sec.encrypt ? pcclToolKeyEncrypted : pcclToolKeyKeyed;
}

void pcclToolKeyFree(pcclToolKey_t *k) {
    if (k) sodium_memzero(k, sizeof *k);
    free(k);
}

pcclResult_t pcclToolReadToken(const char *path, char *out, size_t cap, char *err, size_t errlen) {
    char why[320] = "";
    int rc = sec_token_from_file(path, out, cap, why, sizeof why);
    if (rc != 0 && err) snprintf(err, errlen, "%s", why);
    return rc == 0 ? pcclSuccess : pcclInvalidArgument;
}

pcclResult_t pcclToolLoadIdentity(const char *path, char public_key[PCCL_TOOL_PUBLIC_KEY_STRLEN], uint8_t uuid[16],
                                  int *created, char *err, size_t errlen) {
    ident_t id;
    char why[320] = "";
    int rc = ident_load_file(path, &id, created, why, sizeof why);
    if (rc != 0) {
        if (err) snprintf(err, errlen, "%s", why);
        return rc == -PERR_INVALID ? pcclInvalidArgument : pcclInternalError;
    }
    if (public_key) ident_pk_str(id.pk, public_key);
    if (uuid) ident_uuid(id.pk, uuid);
    sodium_memzero(&id, sizeof id);
    return pcclSuccess;
}

int pcclToolNameValid(const char *s) { return s && ident_name_valid(s); }

void pcclToolDefaultName(char out[PCCL_TOOL_NAME_MAX + 1]) { ident_default_name(out); }

pcclResult_t pcclToolProbe(const ccoip_socket_address_t *to, const pcclToolKey_t *key,
                           pcclToolProbeDirection_t direction, int duration_ms, int streams, int timeout_ms,
                           pcclToolProbeResult_t *out) {
    static const uint8_t uuid[16] = {0};
    static const sec_cfg_t open_run = {0};
    if (!to || !out || (direction != pcclToolProbeUpload && direction != pcclToolProbeDownload))
        return pcclInvalidArgument;
    bw_result_t r;
    int rc = bw_measure(to, uuid, key ? &key->sec : &open_run, NULL,
                        direction == pcclToolProbeUpload ? BW_CLIENT_SENDS : BW_SERVER_SENDS, duration_ms, streams,
                        timeout_ms, NULL, &r);
    if (rc != 0) return rc == -PERR_INVALID ? pcclInvalidArgument : pcclRankConnectionFailed;
    *out = (pcclToolProbeResult_t){.bytes = r.bytes, .ns = r.ns, .mbps = r.mbps};
    return pcclSuccess;
}

int pcclToolProbeListen(const ccoip_socket_address_t *addr, ccoip_socket_address_t *bound) {
    *bound = *addr;
    int fd = net_listen(addr, &bound->port);
    return fd >= 0 ? fd : -1; /* errno set */
}

pcclResult_t pcclToolProbeServe(int fd, const pcclToolKey_t *key, int timeout_ms, int max_ms, char *err,
                                size_t errlen) {
    static const uint8_t self[16] = {0};
    static const sec_cfg_t open_run = {0};
    char why[160] = "";
    p2p_intro_t who;
    sec_link_t *link = NULL;
    net_set_nodelay(fd);
    int rc = p2p_greet(fd, key ? &key->sec : &open_run, self, NULL, &who, &link, why, sizeof why);
    if (rc == 0 && who.kind != P2P_KIND_BENCH) {
        snprintf(why, sizeof why, "not a bandwidth probe");
        rc = -PERR_PROTOCOL;
    }
    if (rc == 0) bw_serve_connection(link, fd, timeout_ms, max_ms > BW_MAX_DURATION_MS ? BW_MAX_DURATION_MS : max_ms,
                                     1, NULL);
    sec_link_free(link);
    if (rc != 0 && err) snprintf(err, errlen, "%s", why);
    return rc == 0 ? pcclSuccess : pcclRankConnectionFailed;
}
