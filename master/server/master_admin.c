/*
 * master_admin.c - the loop-thread side of the admin port (see admin.h).
 *
 * Two libuv handles on the master's loop: a 250 ms timer that rebuilds and
 * publishes the snapshot documents, and an async handle through which the
 * HTTP thread wakes the loop for queued kick/shutdown commands. The operations
 * in flight, their members and start times are read from the state machine's
 * records (its clock is the loop's uv_now, set before every event). Everything
 * here runs on the loop thread, so it may read the state machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "base/base.h"
#include "admin/admin.h"
#include "server/master_internal.h"
#include "sm/sm.h"
#include "server/master_admin_kinds.h"
#include "server/process_metrics.h"

/*
 * Rates of a group: two samples of its counters, renewed every RATE_WINDOW_MS, so a rate is the change over the
 * last 2 to 4 seconds (none in the first second a group is seen).
 */
#define RATE_GROUPS 256
#define RATE_WINDOW_MS 2000
#define RATE_MIN_SPAN_MS 1000

typedef struct group_rate {
    uint32_t group;
    uint64_t t[2], revision[2], bytes[2]; /* [0] the older sample, [1] the newer */
    /* Progress: while the group has a ring, when its revision last changed (or when the ring formed). */
    int active;
    uint64_t seen_revision, advanced_ms;
} group_rate_t;

struct pccl_master_admin {
    group_rate_t rates[RATE_GROUPS];
    int nrates;
    admin_server_t *srv;
    uv_timer_t timer;
    uv_async_t async;
    int closed;
    uint64_t started_ms;
    double started_unix_s; /* wall clock at start, for process_start_time_seconds */
};

#define OPS_MAX 4096


static const char *phase_of(const msm_peer_view_t *v) {
    if (v->accepted) return "accepted";
    return strcmp(v->state, "connecting") == 0 ? "connected" : "registered";
}

static cJSON *ring_json(pcclMasterInstance_t *m, uint32_t group, int len, int detailed) {
    cJSON *ring = cJSON_CreateArray();
    uint64_t *conns = len > 0 ? malloc((size_t)len * sizeof *conns) : NULL;
    int n = conns ? msm_group_ring(m->sm, group, conns, len) : 0;
    int np = msm_peer_count(m->sm);
    for (int i = 0; i < n; i++) {
        msm_peer_view_t v;
        for (int j = 0; j < np; j++) {
            if (msm_peer_view(m->sm, j, &v) != 0 || v.conn != conns[i]) continue;
            char hex[33], ip[ADDR_STRLEN];
            admin_uuid_hex(v.uuid, hex);
            if (!detailed) {
                cJSON_AddItemToArray(ring, cJSON_CreateString(hex));
                break;
            }
            addr_ip_str(&v.ip, ip);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "uuid", hex);
            cJSON_AddStringToObject(e, "address", ip);
            cJSON_AddNumberToObject(e, "p2p_port", v.p2p_port);
            cJSON_AddItemToArray(ring, e);
            break;
        }
    }
    free(conns);
    return ring;
}

/* NAT traversal (docs/nat.md): where its control connection came from, whether the master could dial it,
 * and how each of its p2p connections was made (its last EDGES report). */
static void nat_json(cJSON *p, const msm_peer_view_t *v) {
    static const char *const kinds[] = {"direct", "punched", "relayed"};
    char obs[ADDR_STRLEN];
    ccoip_socket_address_t o = {.inet = v->obs_ip, .port = v->obs_port};
    addr_str(&o, obs);
    cJSON_AddStringToObject(p, "observed", v->obs_port ? obs : "");
    if (v->reach == WIRE_REACH_UNKNOWN) cJSON_AddNullToObject(p, "reachable");
    else cJSON_AddBoolToObject(p, "reachable", v->reach == WIRE_REACH_YES);
    cJSON *edges = cJSON_AddArrayToObject(p, "edges");
    for (uint32_t i = 0; edges && i < v->nedges; i++) {
        char hex[33];
        admin_uuid_hex(v->edges[i].uuid, hex);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "peer", hex);
        cJSON_AddStringToObject(e, "kind", kinds[v->edges[i].kind <= WIRE_EDGE_RELAYED ? v->edges[i].kind : 0]);
        cJSON_AddItemToArray(edges, e);
    }
}

static cJSON *peers_json(pcclMasterInstance_t *m, uint64_t now, uint8_t **uuids_out, int *nuuids) {
    cJSON *peers = cJSON_CreateArray();
    int np = msm_peer_count(m->sm);
    uint8_t *uuids = np ? malloc((size_t)np * 16) : NULL;
    int nu = 0;
    for (int i = 0; i < np; i++) {
        msm_peer_view_t v;
        if (msm_peer_view(m->sm, i, &v) != 0) continue;
        if (uuids) memcpy(uuids + 16 * nu++, v.uuid, 16);
        char hex[33], ip[ADDR_STRLEN];
        admin_uuid_hex(v.uuid, hex);
        addr_ip_str(&v.ip, ip);
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "uuid", hex);
        cJSON_AddStringToObject(p, "name", v.name);
        cJSON_AddStringToObject(p, "address", ip);
        cJSON_AddNumberToObject(p, "p2p_port", v.p2p_port);
        cJSON_AddNumberToObject(p, "group", v.group);
        cJSON_AddStringToObject(p, "phase", phase_of(&v));
        cJSON_AddStringToObject(p, "state", v.state);
        cJSON_AddNumberToObject(p, "revision", (double)v.revision);
        /* Any packet counts: heartbeats are the only traffic of an idle peer. */
        cJSON_AddNumberToObject(p, "last_heartbeat_ms_ago", now >= v.last_seen_ms ? (double)(now - v.last_seen_ms) : 0);
        nat_json(p, &v);
        cJSON_AddItemToArray(peers, p);
    }
    *uuids_out = uuids;
    *nuuids = nu;
    return peers;
}

/* The operations in flight (at most OPS_MAX), oldest first; *n their number. Caller frees. */
static msm_op_view_t *op_views(pcclMasterInstance_t *m, int *n) {
    *n = msm_op_views(m->sm, NULL, 0);
    if (*n > OPS_MAX) *n = OPS_MAX;
    msm_op_view_t *v = *n ? malloc((size_t)*n * sizeof *v) : NULL;
    if (!v) *n = 0;
    else msm_op_views(m->sm, v, *n);
    return v;
}

/* The members of the index-th operation (waiting 0), or the peers it waits on (waiting 1), as uuids. */
static cJSON *members_json(pcclMasterInstance_t *m, int index, int waiting) {
    cJSON *arr = cJSON_CreateArray();
    int n = waiting ? msm_op_view_waiting(m->sm, index, NULL, 0) : msm_op_view_members(m->sm, index, NULL, 0);
    uint64_t *conns = n > 0 ? malloc((size_t)n * sizeof *conns) : NULL;
    if (conns) n = waiting ? msm_op_view_waiting(m->sm, index, conns, n) : msm_op_view_members(m->sm, index, conns, n);
    else n = 0;
    int np = msm_peer_count(m->sm);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < np; j++) {
            msm_peer_view_t v;
            if (msm_peer_view(m->sm, j, &v) != 0 || v.conn != conns[i]) continue;
            char hex[33];
            admin_uuid_hex(v.uuid, hex);
            cJSON_AddItemToArray(arr, cJSON_CreateString(hex));
            break;
        }
    free(conns);
    return arr;
}

/* Appends the in-flight operations of group (or MSM_RUN_WIDE) to arr, with their ages and members. */
static void ops_json(pcclMasterInstance_t *m, const msm_op_view_t *ops, int nops, uint32_t group, uint64_t now,
                     cJSON *arr) {
    for (int j = 0; j < nops; j++) {
        const msm_op_view_t *o = &ops[j];
        if (o->group != group) continue;
        int coll = strcmp(o->kind, "collective") == 0;
        cJSON *op = cJSON_CreateObject();
        cJSON_AddStringToObject(op, "kind", o->kind);
        if (coll) cJSON_AddNumberToObject(op, "tag", (double)o->tag);
        else cJSON_AddNullToObject(op, "tag");
        if (coll && o->collective) cJSON_AddStringToObject(op, "collective_kind", o->collective);
        else cJSON_AddNullToObject(op, "collective_kind");
        cJSON_AddStringToObject(op, "state", o->running ? "running" : "voting");
        if (coll && o->running) cJSON_AddNumberToObject(op, "op_seq", (double)o->op_seq);
        else cJSON_AddNullToObject(op, "op_seq");
        cJSON_AddNumberToObject(op, "members", o->members);
        cJSON_AddItemToObject(op, "member_uuids", members_json(m, j, 0));
        cJSON_AddItemToObject(op, "waiting_on", members_json(m, j, 1));
        cJSON_AddNumberToObject(op, "age_ms", now > o->started_ms ? (double)(now - o->started_ms) : 0);
        cJSON_AddItemToArray(arr, op);
    }
}

/* The group's samples (created zeroed on first sight), or NULL once RATE_GROUPS groups are tracked. */
static group_rate_t *rate_of(struct pccl_master_admin *a, uint32_t group) {
    for (int i = 0; i < a->nrates; i++)
        if (a->rates[i].group == group) return &a->rates[i];
    if (a->nrates == RATE_GROUPS) return NULL;
    group_rate_t *r = &a->rates[a->nrates++];
    memset(r, 0, sizeof *r);
    r->group = group;
    return r;
}

/* Notes a change of the group's revision; called for every group at each publish. */
static void track_progress(struct pccl_master_admin *a, const msm_group_view_t *g, uint64_t now) {
    group_rate_t *r = rate_of(a, g->id);
    if (!r) return;
    uint64_t rev = g->has_revision ? g->last_revision : 0;
    if (g->ring_len == 0) r->active = 0;
    else if (!r->active || rev != r->seen_revision) {
        r->active = 1;
        r->seen_revision = rev;
        r->advanced_ms = now;
    }
}

/* Milliseconds since the group's revision last changed (or its ring formed); 0 when not tracked. */
static uint64_t advance_age_ms(struct pccl_master_admin *a, uint32_t group, uint64_t now) {
    group_rate_t *r = rate_of(a, group);
    return r && r->active && now > r->advanced_ms ? now - r->advanced_ms : 0;
}

/* The group's counters and their rates per second ("revisions_per_s", "reduced_bytes_per_s"; null while unknown). */
static void rates_json(struct pccl_master_admin *a, const msm_group_view_t *g, uint64_t now, cJSON *out) {
    uint64_t rev = g->has_revision ? g->last_revision : 0;
    cJSON_AddNumberToObject(out, "collectives_completed", (double)g->collectives_completed);
    cJSON_AddNumberToObject(out, "reduced_bytes", (double)g->reduced_bytes);
    group_rate_t *r = rate_of(a, g->id);
    if (r && (r->t[1] == 0 || rev < r->revision[0] || g->reduced_bytes < r->bytes[0])) {
        /* First sight, or the group was rebuilt and its counters restarted. */
        for (int k = 0; k < 2; k++) {
            r->t[k] = now ? now : 1;
            r->revision[k] = rev;
            r->bytes[k] = g->reduced_bytes;
        }
    } else if (r && now - r->t[1] >= RATE_WINDOW_MS) {
        r->t[0] = r->t[1];
        r->revision[0] = r->revision[1];
        r->bytes[0] = r->bytes[1];
        r->t[1] = now;
        r->revision[1] = rev;
        r->bytes[1] = g->reduced_bytes;
    }
    if (!r || now < r->t[0] + RATE_MIN_SPAN_MS) {
        cJSON_AddNullToObject(out, "revisions_per_s");
        cJSON_AddNullToObject(out, "reduced_bytes_per_s");
        return;
    }
    double span_s = (double)(now - r->t[0]) / 1000;
    cJSON_AddNumberToObject(out, "revisions_per_s", (double)(rev - r->revision[0]) / span_s);
    cJSON_AddNumberToObject(out, "reduced_bytes_per_s", (double)(g->reduced_bytes - r->bytes[0]) / span_s);
}

static cJSON *groups_json(pcclMasterInstance_t *m, const msm_op_view_t *ops, int nops, uint64_t now,
                          int topology) {
    cJSON *groups = cJSON_CreateArray();
    msm_group_view_t gv[256];
    int ng = msm_group_views(m->sm, gv, 256);
    if (ng > 256) ng = 256;
    for (int i = 0; i < ng && !topology; i++) track_progress(m->admin, &gv[i], now);
    for (int i = 0; i < ng; i++) {
        if (gv[i].ring_len == 0 && !topology) {
            int has_ops = 0;
            for (int j = 0; j < nops; j++) has_ops |= ops[j].group == gv[i].id;
            if (!has_ops) continue;
        }
        cJSON *g = cJSON_CreateObject();
        cJSON_AddNumberToObject(g, "id", gv[i].id);
        cJSON_AddItemToObject(g, "ring", ring_json(m, gv[i].id, gv[i].ring_len, topology));
        if (!topology) {
            if (gv[i].has_revision) cJSON_AddNumberToObject(g, "last_revision", (double)gv[i].last_revision);
            else cJSON_AddNullToObject(g, "last_revision");
            rates_json(m->admin, &gv[i], now, g);
            cJSON_AddItemToObject(g, "collectives_by_kind", pccl__coll_kinds_json(gv[i].by_kind));
            /* What `pccl status` calls progress: with accepted peers, the revision moves. */
            if (gv[i].ring_len > 0)
                cJSON_AddNumberToObject(g, "last_revision_advance_ms_ago",
                                        (double)advance_age_ms(m->admin, gv[i].id, now));
            else cJSON_AddNullToObject(g, "last_revision_advance_ms_ago");
            ops_json(m, ops, nops, gv[i].id, now, cJSON_AddArrayToObject(g, "operations"));
        }
        cJSON_AddItemToArray(groups, g);
    }
    return groups;
}

/* Measured links (from optimize topology) as [{from, to, mbps, rtt_us}] by uuid (rtt_us null: not measured); null
 * while nothing was measured. */
static cJSON *bandwidth_json(pcclMasterInstance_t *m) {
    int n = msm_bw_views(m->sm, NULL, 0);
    msm_bw_view_t *bw = n > 0 ? malloc((size_t)n * sizeof *bw) : NULL;
    if (!bw) return cJSON_CreateNull();
    n = msm_bw_views(m->sm, bw, n);
    int np = msm_peer_count(m->sm);
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        char from[33] = "", to[33] = "";
        for (int j = 0; j < np; j++) {
            msm_peer_view_t v;
            if (msm_peer_view(m->sm, j, &v) != 0) continue;
            if (v.conn == bw[i].from) admin_uuid_hex(v.uuid, from);
            if (v.conn == bw[i].to) admin_uuid_hex(v.uuid, to);
        }
        if (!from[0] || !to[0]) continue; /* a departed peer's link */
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "from", from);
        cJSON_AddStringToObject(e, "to", to);
        cJSON_AddNumberToObject(e, "mbps", bw[i].mbps);
        if (bw[i].rtt_us > 0) cJSON_AddNumberToObject(e, "rtt_us", bw[i].rtt_us);
        else cJSON_AddNullToObject(e, "rtt_us");
        cJSON_AddItemToArray(arr, e);
    }
    free(bw);
    return arr;
}

/* "# HELP name help" and "# TYPE name type" */
static void metric_head(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Per-group series: revision, completed collectives, reduced bytes; groups with accepted peers only. */
static void group_metrics(pcclMasterInstance_t *m, FILE *f, uint64_t now) {
    msm_group_view_t gv[256];
    int ng = msm_group_views(m->sm, gv, 256);
    if (ng > 256) ng = 256;
    metric_head(f, "pccl_group_revision", "gauge", "Last shared-state revision of each peer group.");
    for (int i = 0; i < ng; i++)
        if (gv[i].ring_len > 0 && gv[i].has_revision)
            fprintf(f, "pccl_group_revision{group=\"%u\"} %llu\n", gv[i].id, (unsigned long long)gv[i].last_revision);
    metric_head(f, "pccl_group_collectives_completed_total", "counter", "Collective operations a group completed.");
    for (int i = 0; i < ng; i++)
        if (gv[i].ring_len > 0)
            fprintf(f, "pccl_group_collectives_completed_total{group=\"%u\"} %llu\n", gv[i].id,
                    (unsigned long long)gv[i].collectives_completed);
    metric_head(f, "pccl_group_reduced_bytes_total", "counter",
                "Bytes (count x dtype size) of the collectives a group completed.");
    for (int i = 0; i < ng; i++)
        if (gv[i].ring_len > 0)
            fprintf(f, "pccl_group_reduced_bytes_total{group=\"%u\"} %llu\n", gv[i].id,
                    (unsigned long long)gv[i].reduced_bytes);
    metric_head(f, "pccl_group_revision_age_seconds", "gauge",
                "Seconds since a group's revision last advanced (or since its ring formed), for groups with peers.");
    for (int i = 0; i < ng; i++)
        if (gv[i].ring_len > 0)
            fprintf(f, "pccl_group_revision_age_seconds{group=\"%u\"} %.3f\n", gv[i].id,
                    (double)advance_age_ms(m->admin, gv[i].id, now) / 1000);
}

/* The peer's name in per-peer series: the name it announced, else its uuid's first 8 hex digits (as `pccl status`
 * and the logs show it). */
static void peer_name(const msm_peer_view_t *v, char out[64]) {
    if (v->name && v->name[0]) {
        snprintf(out, 64, "%s", v->name);
        return;
    }
    char hex[33];
    admin_uuid_hex(v->uuid, hex);
    snprintf(out, 64, "%.8s", hex);
}

/* A label value as the Prometheus text format wants it: backslash, double quote and newline escaped. */
static void label_value(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') fputc('\\', f);
        if (*s == '\n') fputs("\\n", f);
        else fputc(*s, f);
    }
}

/* Per-peer series by uuid and name: pccl_peer_info (its address), its revision, seconds since its last packet. */
static void peer_metrics(pcclMasterInstance_t *m, FILE *f, uint64_t now) {
    static const struct {
        const char *name, *help;
    } series[] = {
        {"pccl_peer_info", "Each peer the master knows, with its name and p2p address; always 1."},
        {"pccl_peer_revision", "Shared-state revision of each peer's last sync."},
        {"pccl_peer_heartbeat_age_seconds", "Seconds since the master last heard from each peer (any packet, "
                                            "heartbeats included)."},
    };
    int np = msm_peer_count(m->sm);
    for (size_t k = 0; k < sizeof series / sizeof series[0]; k++) {
        metric_head(f, series[k].name, "gauge", series[k].help);
        for (int i = 0; i < np; i++) {
            msm_peer_view_t v;
            if (msm_peer_view(m->sm, i, &v) != 0) continue;
            char hex[33], name[64], ip[ADDR_STRLEN];
            admin_uuid_hex(v.uuid, hex);
            peer_name(&v, name);
            fprintf(f, "%s{uuid=\"%s\",name=\"", series[k].name, hex);
            label_value(f, name);
            if (k == 0) {
                addr_ip_str(&v.ip, ip);
                int v6 = strchr(ip, ':') != NULL;
                fprintf(f, "\",address=\"%s%s%s:%u\"} 1\n", v6 ? "[" : "", ip, v6 ? "]" : "", v.p2p_port);
            } else if (k == 1) {
                fprintf(f, "\",group=\"%u\"} %llu\n", v.group, (unsigned long long)v.revision);
            } else {
                double age = now > v.last_seen_ms ? (double)(now - v.last_seen_ms) / 1000 : 0;
                fprintf(f, "\",group=\"%u\"} %.3f\n", v.group, age);
            }
        }
    }
}

/* Connections refused before or outside the run's rules, by reason (apart from pccl_peers_kicked_total). */
static void refused_metrics(pcclMasterInstance_t *m, const msm_stats_t *st, FILE *f) {
    metric_head(f, "pccl_connections_refused_total", "counter",
                "Connections the master refused: another protocol version, not pccl's magic, a malformed frame, "
                "a failed key handshake or frame authentication.");
    fprintf(f, "pccl_connections_refused_total{reason=\"version\"} %llu\n", (unsigned long long)st->refused_version);
    fprintf(f, "pccl_connections_refused_total{reason=\"magic\"} %llu\n", (unsigned long long)st->refused_magic);
    fprintf(f, "pccl_connections_refused_total{reason=\"malformed\"} %llu\n",
            (unsigned long long)m->refused_malformed);
    fprintf(f, "pccl_connections_refused_total{reason=\"handshake\"} %llu\n",
            (unsigned long long)m->refused_handshake);
}

static char *metrics_text(pcclMasterInstance_t *m, const msm_stats_t *st, uint32_t connected, uint64_t now,
                          uint64_t oldest_op_ms) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    metric_head(f, "pccl_build_info", "gauge", "The master's pccl version; always 1.");
    fprintf(f, "pccl_build_info{version=\"%s\"} 1\n", PCCL_VERSION_STRING);
    metric_head(f, "process_start_time_seconds", "gauge", "Start time of the master since the Unix epoch in seconds.");
    fprintf(f, "process_start_time_seconds %.3f\n", m->admin->started_unix_s);
    fprintf(f, "# HELP pccl_peers Peers known to the master by phase.\n# TYPE pccl_peers gauge\n");
    fprintf(f, "pccl_peers{phase=\"connected\"} %u\n", connected);
    fprintf(f, "pccl_peers{phase=\"registered\"} %u\n", st->registered);
    fprintf(f, "pccl_peers{phase=\"accepted\"} %u\n", st->accepted);
    fprintf(f, "# HELP pccl_groups Peer groups with at least one accepted peer.\n# TYPE pccl_groups gauge\n");
    fprintf(f, "pccl_groups %u\n", st->groups);
    fprintf(f, "# HELP pccl_collectives_total Collective operations finished, by result.\n"
               "# TYPE pccl_collectives_total counter\n");
    fprintf(f, "pccl_collectives_total{result=\"completed\"} %llu\n", (unsigned long long)st->collectives_completed);
    fprintf(f, "pccl_collectives_total{result=\"aborted\"} %llu\n", (unsigned long long)st->collectives_aborted);
    pccl__coll_kinds_metrics(f, st->by_kind);
    pccl__coll_algos_metrics(f, st->by_algo);
    fprintf(f, "# HELP pccl_syncs_total Shared-state syncs completed.\n# TYPE pccl_syncs_total counter\n");
    fprintf(f, "pccl_syncs_total %llu\n", (unsigned long long)st->syncs_completed);
    fprintf(f, "# HELP pccl_peers_kicked_total Peers kicked by the master.\n# TYPE pccl_peers_kicked_total counter\n");
    fprintf(f, "pccl_peers_kicked_total %llu\n", (unsigned long long)st->peers_kicked);
    fprintf(f, "# HELP pccl_peers_left_total Peers that left the run cleanly (LEAVE).\n"
               "# TYPE pccl_peers_left_total counter\n");
    fprintf(f, "pccl_peers_left_total %llu\n", (unsigned long long)st->peers_left);
    fprintf(f, "# HELP pccl_master_packets_received_total Control packets received.\n"
               "# TYPE pccl_master_packets_received_total counter\n");
    fprintf(f, "pccl_master_packets_received_total %llu\n", (unsigned long long)m->packets_received);
    fprintf(f, "# HELP pccl_master_bytes_sent_total Control bytes sent.\n"
               "# TYPE pccl_master_bytes_sent_total counter\n");
    fprintf(f, "pccl_master_bytes_sent_total %llu\n", (unsigned long long)m->bytes_sent);
    fprintf(f, "# HELP pccl_reregistrations_total Peers that re-registered (RESUME) after a master restart.\n"
               "# TYPE pccl_reregistrations_total counter\n");
    fprintf(f, "pccl_reregistrations_total %llu\n", (unsigned long long)st->reregistrations);
    fprintf(f, "# HELP pccl_rebuilds_total Runs rebuilt from re-registered peers.\n"
               "# TYPE pccl_rebuilds_total counter\n");
    fprintf(f, "pccl_rebuilds_total %llu\n", (unsigned long long)st->rebuilds);
    metric_head(f, "pccl_oldest_operation_age_seconds", "gauge",
                "Age of the oldest operation in flight (vote or running) in seconds; 0 when none.");
    fprintf(f, "pccl_oldest_operation_age_seconds %.3f\n", (double)oldest_op_ms / 1000);
    group_metrics(m, f, now);
    peer_metrics(m, f, now);
    refused_metrics(m, st, f);
    process_metrics_write(f);
    fclose(f);
    return buf;
}

/* The relays of `pccl master --relay`, as "HOST:PORT" strings in the order given. */
static cJSON *relays_json(pcclMasterInstance_t *m) {
    uint32_t n;
    const ccoip_socket_address_t *r = msm_relays(m->sm, &n);
    cJSON *arr = cJSON_CreateArray();
    for (uint32_t i = 0; i < n; i++) {
        char s[ADDR_STRLEN];
        addr_str(&r[i], s);
        cJSON_AddItemToArray(arr, cJSON_CreateString(s));
    }
    return arr;
}

static void publish(pcclMasterInstance_t *m) {
    struct pccl_master_admin *a = m->admin;
    uint64_t now = uv_now(&m->loop);
    msm_stats_t st;
    msm_get_stats(m->sm, &st);
    uint8_t *uuids = NULL;
    int nuuids = 0, nops;
    msm_op_view_t *ops = op_views(m, &nops);

    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "version", PCCL_VERSION_STRING);
    cJSON_AddNumberToObject(s, "master_port", m->port);
    cJSON_AddNumberToObject(s, "uptime_ms", (double)(now - a->started_ms));
    cJSON *peers = peers_json(m, now, &uuids, &nuuids);
    cJSON_AddItemToObject(s, "peers", peers);
    cJSON_AddItemToObject(s, "groups", groups_json(m, ops, nops, now, 0));
    ops_json(m, ops, nops, MSM_RUN_WIDE, now, cJSON_AddArrayToObject(s, "run_operations"));
    cJSON_AddItemToObject(s, "relays", relays_json(m));
    cJSON *c = cJSON_AddObjectToObject(s, "counters");
    cJSON_AddNumberToObject(c, "collectives_completed", (double)st.collectives_completed);
    cJSON_AddNumberToObject(c, "collectives_aborted", (double)st.collectives_aborted);
    cJSON_AddNumberToObject(c, "collectives_rejected", (double)st.collectives_rejected);
    cJSON_AddItemToObject(c, "collectives_by_kind", pccl__coll_kinds_json(st.by_kind));
    cJSON_AddItemToObject(c, "collectives_by_algorithm", pccl__coll_algos_json(st.by_algo));
    cJSON_AddNumberToObject(c, "syncs", (double)st.syncs_completed);
    cJSON_AddNumberToObject(c, "peers_kicked", (double)st.peers_kicked);
    cJSON_AddNumberToObject(c, "peers_left", (double)st.peers_left);
    cJSON_AddNumberToObject(c, "control_bytes_sent", (double)m->bytes_sent);
    cJSON_AddNumberToObject(c, "control_packets_received", (double)m->packets_received);
    uint64_t oldest = 0;
    for (int i = 0; i < nops; i++)
        if (now > ops[i].started_ms && now - ops[i].started_ms > oldest) oldest = now - ops[i].started_ms;
    cJSON_AddNumberToObject(s, "oldest_operation_age_ms", (double)oldest);

    cJSON *t = cJSON_CreateObject();
    cJSON_AddItemToObject(t, "groups", groups_json(m, ops, nops, now, 1));
    free(ops);
    cJSON_AddItemToObject(t, "bandwidth", bandwidth_json(m));

    uint32_t connected = (uint32_t)msm_peer_count(m->sm) - st.registered - st.accepted;
    char *status = cJSON_PrintUnformatted(s), *topo = cJSON_PrintUnformatted(t);
    char *metrics = metrics_text(m, &st, connected, now, oldest);
    cJSON_Delete(s);
    cJSON_Delete(t);
    if (!status || !topo || !metrics) {
        free(status);
        free(topo);
        free(metrics);
        free(uuids);
        return; /* keep the previous snapshot */
    }
    admin_server_publish(a->srv, status, topo, metrics, uuids, nuuids);
}

/* The snapshots are rebuilt every ADMIN_PUBLISH_MS, or less often when one rebuild costs more than
 * 1/ADMIN_PUBLISH_SHARE of that time (hundreds of peers): the admin documents take a bounded share of the loop,
 * whatever the run's size, and are at most a few seconds old. */
#define ADMIN_PUBLISH_MS 250
#define ADMIN_PUBLISH_SHARE 20
#define ADMIN_PUBLISH_MAX_MS 5000

static void on_timer(uv_timer_t *h) {
    uint64_t t0 = uv_hrtime();
    publish(h->data);
    uint64_t cost_ms = (uv_hrtime() - t0) / 1000000u, next = cost_ms * ADMIN_PUBLISH_SHARE;
    if (next < ADMIN_PUBLISH_MS) next = ADMIN_PUBLISH_MS;
    if (next > ADMIN_PUBLISH_MAX_MS) next = ADMIN_PUBLISH_MAX_MS;
    uv_timer_start(h, on_timer, next, 0);
}

static void on_commands(uv_async_t *h) {
    pcclMasterInstance_t *m = h->data;
    admin_cmd_t cmd;
    while (admin_server_take(m->admin->srv, &cmd)) {
        if (cmd.type == ADMIN_CMD_SHUTDOWN) {
            PLOG_WARN("master", "shutdown requested on the admin port by %s (%s)", cmd.client,
                      cmd.keep_run ? "the peers keep the run" : "ending the run");
            if (cmd.keep_run) pcclInterruptMaster(m);
            else pccl__master_end_run(m, "shutdown requested on the admin port");
            continue;
        }
        char hex[33];
        admin_uuid_hex(cmd.uuid, hex);
        msm_set_time(m->sm, uv_now(&m->loop));
        if (msm_kick_uuid(m->sm, cmd.uuid, "kicked by the operator (admin port)") != 0)
            PLOG_WARN("master", "admin kick of %s by %s: no such peer (already gone)", hex, cmd.client);
        else
            PLOG_WARN("master", "peer %s kicked on the admin port by %s", hex, cmd.client);
    }
    publish(m);
}

/* Runs on the HTTP thread: only wakes the loop (uv_async_send is thread-safe). */
static void notify_loop(void *ctx) {
    pcclMasterInstance_t *m = ctx;
    uv_async_send(&m->admin->async);
}

int pccl__master_enable_admin(pcclMasterInstance_t *m, ccoip_socket_address_t addr, const char *token,
                              const admin_host_rules_t *hosts) {
    if (!m || m->admin || atomic_load(&m->running) || (addr.inet.protocol != inetIPv4 && addr.inet.protocol != inetIPv6))
        return -PERR_INVALID;
    struct pccl_master_admin *a = calloc(1, sizeof *a);
    if (!a) return -PERR_NOMEM;
    m->admin = a;
    /* The handles exist before the HTTP thread can call notify_loop. */
    uv_async_init(&m->loop, &a->async, on_commands);
    uv_timer_init(&m->loop, &a->timer);
    a->async.data = a->timer.data = m;
    a->started_ms = uv_now(&m->loop);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    a->started_unix_s = (double)wall.tv_sec + wall.tv_nsec / 1e9;
    char err[160];
    a->srv = admin_server_start(&addr, token, hosts, notify_loop, m, err, sizeof err);
    if (!a->srv) {
        PLOG_ERROR("master", "%s", err);
        pccl__admin_on_stop(m);
        uv_run(&m->loop, UV_RUN_NOWAIT); /* run the close callbacks */
        free(a);
        m->admin = NULL;
        return -PERR_FAILED;
    }
    publish(m);
    uv_timer_start(&a->timer, on_timer, ADMIN_PUBLISH_MS, 0);
    return 0;
}

uint16_t pccl__master_admin_port(const pcclMasterInstance_t *m) {
    return m && m->admin ? admin_server_port(m->admin->srv) : 0;
}

int pccl__master_interrupted(pcclMasterInstance_t *m) { return m ? atomic_load(&m->interrupted) : 0; }

void pccl__admin_on_stop(pcclMasterInstance_t *m) {
    struct pccl_master_admin *a = m->admin;
    if (!a || a->closed) return;
    a->closed = 1;
    /* Join the HTTP thread first: after this nothing can uv_async_send on a closing handle. */
    admin_server_stop(a->srv);
    uv_close((uv_handle_t *)&a->async, NULL);
    uv_close((uv_handle_t *)&a->timer, NULL);
}

void pccl__admin_free(pcclMasterInstance_t *m) {
    struct pccl_master_admin *a = m->admin;
    if (!a) return;
    admin_server_free(a->srv);
    free(a);
    m->admin = NULL;
}
