/*
 * pccl_tools.h - what the pccl command (cli/) and other tools need of the library beyond the PCCL API: the
 * library's log, address parsing, run keys and admin tokens, peer identities and names, and the bandwidth
 * probe. Not part of PCCL 1.0; a program that only runs collectives needs none of it.
 *
 * Every function returning pcclResult_t leaves a one-line reason in err (when given) on failure.
 */
#ifndef PCCL_TOOLS_H
#define PCCL_TOOLS_H

#include <stddef.h>
#include <stdint.h>

#include "pccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------- the library's log (PCCL_LOG_LEVEL, PCCL_LOG_FORMAT) ---------- */

typedef enum pcclLogLevel_t { PCCL_LOG_ERROR = 0, PCCL_LOG_WARN = 1, PCCL_LOG_INFO = 2, PCCL_LOG_DEBUG = 3 } pcclLogLevel_t;

PCCL_EXPORT void pcclToolLogSetLevel(pcclLogLevel_t level);
/* "error", "warn", "info" or "debug" into *out. @return pcclSuccess or pcclInvalidArgument. */
PCCL_EXPORT pcclResult_t pcclToolLogParseLevel(const char *s, pcclLogLevel_t *out);
/* 1: one JSON record per line (PCCL_LOG_FORMAT=json); 0: text. */
PCCL_EXPORT void pcclToolLogSetJson(int json);
/* A log line of component at level (shown when the level allows it). */
PCCL_EXPORT void pcclToolLog(pcclLogLevel_t level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Where the library's log records go instead of stderr (a language binding's logging): level, component and the
 * message (no timestamp, no newline), on the thread that logged, after the level filter. The sink must not call
 * into the library. */
typedef void (*pcclToolLogSink_t)(pcclLogLevel_t level, const char *component, const char *msg, void *ctx);
/* Installs sink with its ctx (NULL: stderr again). Returns once no thread is inside the previous sink, so that
 * whatever it uses may be released afterwards. */
PCCL_EXPORT void pcclToolLogSetSink(pcclToolLogSink_t sink, void *ctx);
/* A message for the person at the terminal, shown whatever the level: in text format exactly as formatted, in
 * JSON format one record per line of it (component "cli"). */
PCCL_EXPORT void pcclToolLogPlain(pcclLogLevel_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------- addresses ---------- */

/* "[ffff:...:ffff]:65535" and a NUL. */
#define PCCL_TOOL_ADDR_STRLEN 56
enum {
    PCCL_TOOL_ADDR_REQUIRE_PORT = 1, /* a missing port is a spelling error (default_port is then ignored) */
    PCCL_TOOL_ADDR_ADVERTISED = 2,   /* an address other peers dial: the any address (0.0.0.0, ::) is refused */
};
/* Parses and resolves "HOST[:PORT]", "IPV4[:PORT]" or "[IPV6][:PORT]" (flags: PCCL_TOOL_ADDR_*; without a port,
 * default_port). @return pcclSuccess; pcclInvalidArgument for a spelling no host or port can have (a usage
 * error); pcclRankConnectionFailed for a well-formed name that does not resolve (DNS may come back: retry). */
PCCL_EXPORT pcclResult_t pcclToolParseAddress(const char *s, uint16_t default_port, int flags,
                                              ccoip_socket_address_t *out, char *err, size_t errlen);
/* Every address "HOST[:PORT]" resolves to, in getaddrinfo's order, duplicates dropped (an IP literal is one):
 * what a dialler tries in turn until one connects. *n: how many were written to out[0, max) (at least 1 on
 * success). @return as pcclToolParseAddress. */
PCCL_EXPORT pcclResult_t pcclToolResolveAll(const char *s, uint16_t default_port, ccoip_socket_address_t *out,
                                            int max, int *n, char *err, size_t errlen);
/* "HOST:PORT" ("[IPV6]:PORT"), or without the port when with_port is 0. */
PCCL_EXPORT void pcclToolAddressString(const ccoip_socket_address_t *a, int with_port,
                                       char out[PCCL_TOOL_ADDR_STRLEN]);

/* The address as a struct sockaddr_in or sockaddr_in6 written to out (cap bytes: a struct sockaddr_storage
 * holds either). @return its length, or 0 when cap is too small. */
PCCL_EXPORT size_t pcclToolSockaddr(const ccoip_socket_address_t *a, void *out, size_t cap);

/* ---------- run keys and admin tokens ---------- */

/* A run key as the library uses it (PCCL_KEY_FILE): open (no key), keyed, or keyed and encrypted. */
typedef struct pcclToolKey pcclToolKey_t;
typedef enum pcclToolKeyKind_t { pcclToolKeyOpen = 0, pcclToolKeyKeyed = 1, pcclToolKeyEncrypted = 2 } pcclToolKeyKind_t;
/* Reads the run key of path (NULL: the file PCCL_KEY_FILE names, open when unset) after the checks the library
 * makes (private, owned by the caller). @return pcclSuccess and *out (pcclToolKeyFree), or pcclInvalidArgument. */
PCCL_EXPORT pcclResult_t pcclToolKeyLoad(const char *path, pcclToolKey_t **out, char *err, size_t errlen);
/* Encrypted connections (1) or not (0) under key. @return pcclSuccess, or pcclInvalidUsage: an open run's key. */
PCCL_EXPORT pcclResult_t pcclToolKeyEncrypt(pcclToolKey_t *key, int encrypt);
PCCL_EXPORT pcclToolKeyKind_t pcclToolKeyKind(const pcclToolKey_t *key);
PCCL_EXPORT void pcclToolKeyFree(pcclToolKey_t *key);
/* The admin token of path (its first line, trailing blanks stripped) after the checks of a key file, into
 * out[cap]. @return pcclSuccess or pcclInvalidArgument. */
PCCL_EXPORT pcclResult_t pcclToolReadToken(const char *path, char *out, size_t cap, char *err, size_t errlen);

/* ---------- peer identities and names ---------- */

#define PCCL_TOOL_NAME_MAX 63        /* printable bytes of a peer's name */
#define PCCL_TOOL_PUBLIC_KEY_STRLEN 45 /* base64 of a public key, with its NUL */
/* Loads the identity file path, creating it (private) when missing: its public key (base64) and uuid; *created
 * (may be NULL) says whether it was created now. @return pcclSuccess; pcclInvalidArgument (refused or malformed);
 * pcclInternalError (cannot create, open or read it, or libsodium failed). */
PCCL_EXPORT pcclResult_t pcclToolLoadIdentity(const char *path, char public_key[PCCL_TOOL_PUBLIC_KEY_STRLEN],
                                              uint8_t uuid[16], int *created, char *err, size_t errlen);
/* 1 when s is a valid peer name: at most PCCL_TOOL_NAME_MAX bytes, each printable ASCII (may be empty). */
PCCL_EXPORT int pcclToolNameValid(const char *s);
/* A peer's default name: PCCL_NAME, else the host name. */
PCCL_EXPORT void pcclToolDefaultName(char out[PCCL_TOOL_NAME_MAX + 1]);

/* ---------- the bandwidth probe (docs/protocol.md, bandwidth probe) ---------- */

typedef enum pcclToolProbeDirection_t {
    pcclToolProbeUpload = 1,   /* this side sends, the server counts */
    pcclToolProbeDownload = 2, /* the server sends, this side counts */
} pcclToolProbeDirection_t;
typedef struct pcclToolProbeResult_t {
    uint64_t bytes;
    uint64_t ns;
    double mbps; /* 10^6 bits per second, measured at the receiver */
} pcclToolProbeResult_t;
#define PCCL_TOOL_PROBE_MAX_MS 60000
/* Measures one direction for duration_ms over streams (1..64) parallel connections to a pccl peer's p2p port
 * or a server of pcclToolProbeServe, proving key when it is keyed (NULL: open); bounded by duration_ms +
 * timeout_ms. @return pcclSuccess and *out; pcclInvalidArgument (out of range); pcclRankConnectionFailed. */
PCCL_EXPORT pcclResult_t pcclToolProbe(const ccoip_socket_address_t *to, const pcclToolKey_t *key,
                                       pcclToolProbeDirection_t direction, int duration_ms, int streams,
                                       int timeout_ms, pcclToolProbeResult_t *out);
/* Listens on addr for probes; *bound: where it listens (its port when addr's is 0). @return a listening
 * descriptor, or -1 with errno. */
PCCL_EXPORT int pcclToolProbeListen(const ccoip_socket_address_t *addr, ccoip_socket_address_t *bound);
/* Serves one accepted connection fd (greeting, key proof, then the probe of up to max_ms; either direction),
 * bounded by timeout_ms of silence; does not close fd. @return pcclSuccess, or pcclRankConnectionFailed with the
 * reason in err (a refused greeting or a failed probe). */
PCCL_EXPORT pcclResult_t pcclToolProbeServe(int fd, const pcclToolKey_t *key, int timeout_ms, int max_ms, char *err,
                                            size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
