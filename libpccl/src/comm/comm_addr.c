/* comm_addr.c - where other peers reach this one: a fixed p2p port and an advertised address (behind NAT or port
 * forwarding, the address the master sees is not the one neighbours can dial). */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "comm/comm.h"

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
