/* comm_addr.c - where other peers reach this one: a fixed p2p port and an advertised address (behind NAT or port
 * forwarding, the address the master sees is not the one neighbours can dial); and where this peer reaches its
 * master: a host name whose every address is tried (pcclExtCommSetMasterHost). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "comm/comm.h"
#include "pccl_ext.h"

pcclResult_t pcclExtCommSetMasterHost(pcclComm_t *c, const char *host_port) {
    if (!c || !host_port || strlen(host_port) >= sizeof c->master_host) return pcclInvalidArgument;
    if (comm_state(c) != PEER_CREATED) return pcclInvalidUsage;
    ccoip_socket_address_t a[ADDR_MAX_RESOLVED];
    char err[320];
    /* Only the spelling is checked here: a name that does not resolve yet is resolved again at each connect. */
    if (addr_resolve_all(host_port, c->params.master_address.port, a, ADDR_MAX_RESOLVED, err, sizeof err) ==
        -PERR_SYNTAX) {
        PLOG_ERROR(c->log_name, "pcclExtCommSetMasterHost: %s", err);
        return pcclInvalidArgument;
    }
    snprintf(c->master_host, sizeof c->master_host, "%s", host_port);
    return pcclSuccess;
}

int comm_master_addrs(const pcclComm_t *c, ccoip_socket_address_t out[ADDR_MAX_RESOLVED]) {
    if (!c->master_host[0]) {
        out[0] = c->params.master_address;
        return 1;
    }
    char err[320];
    int n = addr_resolve_all(c->master_host, c->params.master_address.port, out, ADDR_MAX_RESOLVED, err, sizeof err);
    if (n > 0) return n;
    PLOG_WARN(c->log_name, "the master's address: %s", err);
    errno = EHOSTUNREACH;
    return -PERR_IO;
}

void comm_master_where(const pcclComm_t *c, char *out, size_t cap) {
    char a[ADDR_STRLEN];
    addr_str(&c->params.master_address, a);
    snprintf(out, cap, "%s", c->master_host[0] ? c->master_host : a);
}

int comm_addr_from_env(pcclComm_t *c) {
    char err[320];
    const char *port = getenv("PCCL_P2P_PORT");
    if (port && *port) {
        char *end;
        long v = strtol(port, &end, 10);
        if (*end || v < 1 || v > 65535) {
            PLOG_ERROR("pccl", "PCCL_P2P_PORT=%s is not a port (1..65535)", port);
            return -PERR_INVALID;
        }
        c->p2p_listen_port = (uint16_t)v;
    }
    const char *adv = getenv("PCCL_ADVERTISE_ADDRESS");
    if (adv && *adv) {
        if (addr_parse_advertised(adv, &c->adv, err, sizeof err) != 0) {
            PLOG_ERROR("pccl", "PCCL_ADVERTISE_ADDRESS: %s", err);
            return -PERR_INVALID;
        }
        c->has_adv = 1;
    }
    return 0;
}

void comm_addr_announce(const pcclComm_t *c, uint16_t *port, uint8_t *has_adv, ccoip_inet_address_t *adv_ip) {
    *port = c->has_adv && c->adv.port ? c->adv.port : c->p2p.port;
    *has_adv = (uint8_t)c->has_adv;
    if (c->has_adv) *adv_ip = c->adv.inet;
    else memset(adv_ip, 0, sizeof *adv_ip);
}
