/*
 * admin.c - the admin port's HTTP side (libmicrohttpd, one internal polling
 * thread). Handlers only read the latest published snapshot (copied under a
 * mutex), serve the dashboard's files compiled into the binary, or queue a
 * command for the loop thread; they never block on the master, so a slow or
 * hostile HTTP client cannot delay a collective.
 */
#include "admin/admin.h"
#include "admin/dashboard.h"

#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "base/base.h"

/* One client (an address) cannot take the admin port from the others: a dashboard or a poller needs a
 * few connections; idle ones close after 10 s. Requests carry no body: 32 KiB per connection is plenty. */
#define ADMIN_MAX_CONNECTIONS 64
#define ADMIN_MAX_CONNECTIONS_PER_CLIENT 16
#define ADMIN_MAX_REQUEST_MEMORY (32 * 1024)

#define QUEUE_CAP 64
#define ADMIN_HTTP_MISDIRECTED 421 /* Misdirected Request: not an authority this server answers for */

/* The dashboard loads nothing but its own files and /v1/status from this origin: no inline script or style, no
 * other host, and no page of another origin may frame it. */
#define DASHBOARD_CSP "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

struct admin_server {
    struct MHD_Daemon *daemon;
    uint16_t port;
    char *token; /* NULL: POST endpoints always refused */
    admin_host_rules_t hosts;
    /* refused requests are logged at most once a second (HTTP thread only), the rest counted */
    time_t refused_logged_at;
    unsigned long refused_unlogged;
    admin_notify_fn notify;
    void *ctx;
    pthread_mutex_t mu; /* guards the snapshot and the queue */
    char *status, *topology, *metrics;
    uint8_t *uuids;
    int nuuids;
    admin_cmd_t queue[QUEUE_CAP];
    int qhead, qlen;
};

void admin_uuid_hex(const uint8_t uuid[16], char out[33]) {
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[uuid[i] >> 4];
        out[2 * i + 1] = hex[uuid[i] & 15];
    }
    out[32] = 0;
}

/* 32 hex digits into out. @return 0, or -PERR_INVALID. */
static int parse_uuid(const char *s, size_t len, uint8_t out[16]) {
    if (len != 32) return -PERR_INVALID;
    for (int i = 0; i < 32; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (v < 0) return -PERR_INVALID;
        if (i % 2 == 0) out[i / 2] = (uint8_t)(v << 4);
        else out[i / 2] |= (uint8_t)v;
    }
    return 0;
}

/* mode: MHD_RESPMEM_MUST_COPY for a body that dies with the handler, PERSISTENT for the compiled-in files.
 * csp: a Content-Security-Policy header, or NULL. */
static enum MHD_Result respond_bytes(struct MHD_Connection *conn, unsigned code, const char *type, const void *body,
                                     size_t len, enum MHD_ResponseMemoryMode mode, const char *allow,
                                     const char *csp) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, mode);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (csp) MHD_add_response_header(r, "Content-Security-Policy", csp);
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned code, const char *type, const char *body,
                               const char *allow) {
    return respond_bytes(conn, code, type, body, strlen(body), MHD_RESPMEM_MUST_COPY, allow, NULL);
}

/* Error bodies are built from fixed text only: nothing from the request is echoed. */
static enum MHD_Result respond_error(struct MHD_Connection *conn, unsigned code, const char *msg, const char *allow) {
    char body[256];
    snprintf(body, sizeof body, "{\"error\":\"%s\",\"code\":%u}\n", msg, code);
    return respond(conn, code, "application/json", body, allow);
}

/* Copies one published document under the lock and sends it. */
static enum MHD_Result respond_snapshot(admin_server_t *s, struct MHD_Connection *conn, char *const *doc,
                                        const char *type) {
    pthread_mutex_lock(&s->mu);
    char *copy = *doc ? strdup(*doc) : NULL;
    pthread_mutex_unlock(&s->mu);
    if (!copy) return respond_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "no snapshot yet", NULL);
    enum MHD_Result r = respond(conn, MHD_HTTP_OK, type, copy, NULL);
    free(copy);
    return r;
}

/* The dashboard's file at url ("/" is its index.html), or NULL. */
static const dashboard_file_t *dashboard_file(const char *url) {
    if (strcmp(url, "/") == 0) url = "/index.html";
    for (size_t i = 0; i < dashboard_nfiles; i++)
        if (strcmp(dashboard_files[i].path, url) == 0) return &dashboard_files[i];
    return NULL;
}

static const char *content_type(const char *path) {
    static const struct {
        const char *ext, *type;
    } types[] = {{".html", "text/html; charset=utf-8"},
                 {".js", "text/javascript; charset=utf-8"},
                 {".css", "text/css; charset=utf-8"},
                 {".svg", "image/svg+xml"}};
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0) return types[i].type;
    return "application/octet-stream";
}

/* The client's address as text ("?" when unknown). */
static void client_addr(struct MHD_Connection *conn, char *out, size_t cap) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, cap, "?");
    if (!ci || !ci->client_addr) return;
    socklen_t len = ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    char host[INET6_ADDRSTRLEN], port[8];
    if (getnameinfo(ci->client_addr, len, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) == 0)
        snprintf(out, cap, ci->client_addr->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

/* Logs a refused request with the client's address; a flood costs one line a second plus a count. */
static void log_refused(admin_server_t *s, struct MHD_Connection *conn, const char *method, const char *url,
                        unsigned code, const char *why) {
    time_t now = time(NULL);
    if (now == s->refused_logged_at) {
        s->refused_unlogged++;
        return;
    }
    char client[64], more[64] = "";
    client_addr(conn, client, sizeof client);
    if (s->refused_unlogged) snprintf(more, sizeof more, " (and %lu more refused before)", s->refused_unlogged);
    /* The URL is the client's text: printed only up to its first byte outside printable ASCII. */
    int urllen = 0;
    while (urllen < 80 && url[urllen] >= 0x20 && url[urllen] < 0x7f) urllen++;
    PLOG_WARN("admin", "refused %s %.*s from %s: %u %s%s", method, urllen, url, client, code, why, more);
    s->refused_logged_at = now;
    s->refused_unlogged = 0;
}

/* Constant-time comparison so the token cannot be guessed byte by byte from timings. */
static int token_ok(const admin_server_t *s, struct MHD_Connection *conn) {
    if (!s->token) return 0;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7) != 0) return 0;
    const char *given = h + 7;
    size_t gl = strlen(given), tl = strlen(s->token);
    unsigned diff = (unsigned)(gl ^ tl);
    for (size_t i = 0; i < tl; i++) diff |= (unsigned char)s->token[i] ^ (unsigned char)(i < gl ? given[i] : 0);
    return diff == 0;
}

static int push_cmd(admin_server_t *s, struct MHD_Connection *conn, admin_cmd_t *c) {
    client_addr(conn, c->client, sizeof c->client);
    pthread_mutex_lock(&s->mu);
    int ok = s->qlen < QUEUE_CAP;
    if (ok) s->queue[(s->qhead + s->qlen++) % QUEUE_CAP] = *c;
    pthread_mutex_unlock(&s->mu);
    if (ok) s->notify(s->ctx);
    return ok;
}

static int uuid_known(admin_server_t *s, const uint8_t uuid[16]) {
    pthread_mutex_lock(&s->mu);
    int found = 0;
    for (int i = 0; i < s->nuuids && !found; i++) found = memcmp(s->uuids + 16 * i, uuid, 16) == 0;
    pthread_mutex_unlock(&s->mu);
    return found;
}

static enum MHD_Result refuse_token(admin_server_t *s, struct MHD_Connection *conn, const char *method,
                                    const char *url) {
    log_refused(s, conn, method, url, MHD_HTTP_FORBIDDEN, s->token ? "wrong or missing token" : "no token configured");
    return respond_error(conn, MHD_HTTP_FORBIDDEN, "a valid admin token is required", NULL);
}

static enum MHD_Result handle_kick(admin_server_t *s, struct MHD_Connection *conn, const char *id, size_t idlen) {
    admin_cmd_t c = {.type = ADMIN_CMD_KICK};
    if (parse_uuid(id, idlen, c.uuid) != 0)
        return respond_error(conn, MHD_HTTP_NOT_FOUND, "peer uuid must be 32 hex digits", NULL);
    if (!token_ok(s, conn)) return refuse_token(s, conn, "POST", "/v1/peers/.../kick");
    if (!uuid_known(s, c.uuid)) return respond_error(conn, MHD_HTTP_NOT_FOUND, "no such peer", NULL);
    if (!push_cmd(s, conn, &c)) return respond_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "command queue full", NULL);
    char hex[33], body[96];
    admin_uuid_hex(c.uuid, hex);
    snprintf(body, sizeof body, "{\"kicked\":\"%s\"}\n", hex);
    return respond(conn, MHD_HTTP_ACCEPTED, "application/json", body, NULL);
}

static enum MHD_Result handle_shutdown(admin_server_t *s, struct MHD_Connection *conn) {
    if (!token_ok(s, conn)) return refuse_token(s, conn, "POST", "/v1/shutdown");
    const char *keep = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "keep_run");
    admin_cmd_t c = {.type = ADMIN_CMD_SHUTDOWN, .keep_run = keep && (!strcmp(keep, "1") || !strcmp(keep, "true"))};
    if (keep && !c.keep_run && strcmp(keep, "0") && strcmp(keep, "false"))
        return respond_error(conn, MHD_HTTP_BAD_REQUEST, "keep_run must be 1, true, 0 or false", NULL);
    if (!push_cmd(s, conn, &c)) return respond_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "command queue full", NULL);
    return respond(conn, MHD_HTTP_ACCEPTED, "application/json",
                   c.keep_run ? "{\"shutdown\":true,\"run\":\"kept\"}\n" : "{\"shutdown\":true,\"run\":\"ended\"}\n", NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **state) {
    admin_server_t *s = cls;
    static int marker;
    (void)version;
    (void)upload_data;
    /* First call: headers only. Request bodies are ignored (discarded below). */
    if (!*state) {
        *state = &marker;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    /* Before anything is read or done: a Host the port does not serve is a browser sent by another site. */
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!admin_host_allowed(&s->hosts, host)) {
        log_refused(s, conn, method, url, ADMIN_HTTP_MISDIRECTED, "Host is not a name of this admin port");
        return respond_error(conn, ADMIN_HTTP_MISDIRECTED,
                             "Host is not a name of this admin port (pccl master --admin-host NAME)", NULL);
    }
    int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    int post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    if (strcmp(url, "/v1/status") == 0) {
        if (!get) return respond_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed", "GET, HEAD");
        return respond_snapshot(s, conn, &s->status, "application/json");
    }
    if (strcmp(url, "/v1/topology") == 0) {
        if (!get) return respond_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed", "GET, HEAD");
        return respond_snapshot(s, conn, &s->topology, "application/json");
    }
    if (strcmp(url, "/metrics") == 0) {
        if (!get) return respond_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed", "GET, HEAD");
        return respond_snapshot(s, conn, &s->metrics, "text/plain; version=0.0.4; charset=utf-8");
    }
    if (strcmp(url, "/v1/shutdown") == 0) {
        if (!post) return respond_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed", "POST");
        return handle_shutdown(s, conn);
    }
    static const char prefix[] = "/v1/peers/", suffix[] = "/kick";
    size_t ul = strlen(url), pl = sizeof prefix - 1, sl = sizeof suffix - 1;
    if (ul > pl + sl && strncmp(url, prefix, pl) == 0 && strcmp(url + ul - sl, suffix) == 0 &&
        !memchr(url + pl, '/', ul - pl - sl)) {
        if (!post) return respond_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed", "POST");
        return handle_kick(s, conn, url + pl, ul - pl - sl);
    }
    const dashboard_file_t *f = dashboard_file(url);
    if (f) {
        if (!get) return respond_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed", "GET, HEAD");
        return respond_bytes(conn, MHD_HTTP_OK, content_type(f->path), f->data, f->len, MHD_RESPMEM_PERSISTENT, NULL,
                             DASHBOARD_CSP);
    }
    return respond_error(conn, MHD_HTTP_NOT_FOUND, "not found", NULL);
}

/* Bounded: idle HTTP connections are closed after 10 s, and at most 64 are served at once. */
static struct MHD_Daemon *start_daemon(admin_server_t *s, const ccoip_socket_address_t *addr, unsigned family_flags) {
    struct sockaddr_storage sa;
    addr_to_sockaddr(addr, &sa);
    return MHD_start_daemon(MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | family_flags, 0, NULL, NULL, on_request, s,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)ADMIN_MAX_CONNECTIONS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)ADMIN_MAX_CONNECTIONS_PER_CLIENT,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)ADMIN_MAX_REQUEST_MEMORY, MHD_OPTION_END);
}

admin_server_t *admin_server_start(const ccoip_socket_address_t *addr, const char *token,
                                   const admin_host_rules_t *hosts, admin_notify_fn notify, void *ctx, char *err,
                                   size_t errlen) {
    admin_server_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->notify = notify;
    s->ctx = ctx;
    if (hosts) s->hosts = *hosts;
    s->hosts.listen = addr->inet;
    if (token && *token && !(s->token = strdup(token))) {
        snprintf(err, errlen, "out of memory");
        admin_server_free(s);
        return NULL;
    }
    /* 0.0.0.0 and [::] serve IPv4 and IPv6 as the control port does ([::], dual-stack), or IPv4 alone on a
     * host without IPv6; another address serves itself alone. */
    ccoip_socket_address_t v6, v4;
    int dual = addr_listen_dual(addr, &v6, &v4);
    s->daemon = dual ? start_daemon(s, &v6, MHD_USE_DUAL_STACK) : NULL;
    if (!s->daemon && dual) s->daemon = start_daemon(s, &v4, 0);
    if (!s->daemon && !dual) s->daemon = start_daemon(s, addr, addr->inet.protocol == inetIPv6 ? MHD_USE_IPv6 : 0);
    if (!s->daemon) {
        char a[ADDR_STRLEN];
        addr_str(addr, a);
        snprintf(err, errlen, "cannot serve the admin port on %s (port in use or address not local)", a);
        admin_server_free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : addr->port;
    return s;
}

uint16_t admin_server_port(const admin_server_t *s) { return s ? s->port : 0; }

void admin_server_publish(admin_server_t *s, char *status_json, char *topology_json, char *metrics_text,
                          uint8_t *uuids, int n) {
    pthread_mutex_lock(&s->mu);
    char *old[3] = {s->status, s->topology, s->metrics};
    uint8_t *old_uuids = s->uuids;
    s->status = status_json;
    s->topology = topology_json;
    s->metrics = metrics_text;
    s->uuids = uuids;
    s->nuuids = n;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < 3; i++) free(old[i]);
    free(old_uuids);
}

int admin_server_take(admin_server_t *s, admin_cmd_t *out) {
    pthread_mutex_lock(&s->mu);
    int got = s->qlen > 0;
    if (got) {
        *out = s->queue[s->qhead];
        s->qhead = (s->qhead + 1) % QUEUE_CAP;
        s->qlen--;
    }
    pthread_mutex_unlock(&s->mu);
    return got;
}

void admin_server_stop(admin_server_t *s) {
    if (!s || !s->daemon) return;
    MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
}

void admin_server_free(admin_server_t *s) {
    if (!s) return;
    admin_server_stop(s);
    free(s->status);
    free(s->topology);
    free(s->metrics);
    free(s->uuids);
    free(s->token);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
