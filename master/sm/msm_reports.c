/*
 * msm_reports.c - removing a peer that its ring neighbours cannot reach.
 *
 * A peer whose p2p port became unreachable (firewall, crashed listener) while
 * its control connection still works would make every collective of its group
 * fail forever. Peers report a neighbour they could not connect to, or whose
 * connection never arrived (PEER_UNREACHABLE). One report proves nothing — a
 * lying or broken reporter must not be able to evict anyone — so a peer is
 * kicked only when two distinct peers of its group reported it: in a ring of
 * three or more its predecessor and its successor both do. Reports are
 * forgotten when a collective of the group succeeds (connectivity is proven)
 * and when either side leaves. In a group of two the two reports point at each
 * other and nobody is kicked (it cannot be told who is at fault).
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sm/msm_internal.h"

void msm_reports_forget_conn(msm_t *m, uint64_t conn) {
    int kept = 0;
    for (int i = 0; i < m->nreports; i++)
        if (m->reports[i].reporter != conn && m->reports[i].target != conn) m->reports[kept++] = m->reports[i];
    m->nreports = kept;
}

void msm_reports_forget_group(msm_t *m, uint32_t group) {
    int kept = 0;
    for (int i = 0; i < m->nreports; i++) {
        msm_peer_t *t = msm_find(m, m->reports[i].target);
        if (t && t->group != group) m->reports[kept++] = m->reports[i];
    }
    m->nreports = kept;
}

void msm_report_unreachable(msm_t *m, msm_peer_t *reporter, const uint8_t uuid[16]) {
    msm_peer_t *t = NULL;
    for (int i = 0; i < m->npeers && !t; i++)
        if (memcmp(m->peers[i].uuid, uuid, 16) == 0) t = &m->peers[i];
    /* Reports about strangers, other groups or oneself are ignored rather than punished:
     * the target may just have left. */
    if (!t || t == reporter || !t->accepted || t->group != reporter->group) return;
    int distinct = 1;
    for (int i = 0; i < m->nreports; i++) {
        if (m->reports[i].target != t->conn) continue;
        if (m->reports[i].reporter == reporter->conn) return; /* already counted */
        distinct++;
    }
    if (m->nreports == m->cap_reports) {
        int cap = m->cap_reports ? m->cap_reports * 2 : 16;
        void *r = realloc(m->reports, (size_t)cap * sizeof *m->reports);
        if (!r) return;
        m->reports = r;
        m->cap_reports = cap;
    }
    m->reports[m->nreports].reporter = reporter->conn;
    m->reports[m->nreports].target = t->conn;
    m->nreports++;
    char rname[MSM_NAME_MAX], tname[MSM_NAME_MAX];
    PLOG_INFO("master", "%s reports %s unreachable (%d report(s))", msm_peer_name(reporter, rname),
              msm_peer_name(t, tname), distinct);
    if (distinct >= 2) msm_kick(m, t, "unreachable by %d of its ring neighbours", distinct);
}
