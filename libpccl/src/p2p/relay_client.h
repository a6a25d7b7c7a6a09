/*
 * relay_client.h - a connection through a relay of last resort (internal; docs/relay.md). Both ends of an
 * edge that can neither dial nor punch connect to one relay (`pccl relay`, announced by `pccl master
 * --relay`) with the same token and opposite roles; the relay pairs them and then moves their bytes both
 * ways without reading them. What travels over the paired socket is the ordinary p2p greeting, so keyed runs
 * authenticate (and with --encrypt encrypt) end to end through the relay.
 *
 * Tokens and the greeting are sec_relay.h's (relay_token_make mints a token under the run's PSK).
 */
#ifndef PCCL_RELAY_CLIENT_H
#define PCCL_RELAY_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "sec/sec.h"

/*
 * Connects to relay, sends the greeting of token and role (RELAY_ROLE_DIALER 0, RELAY_ROLE_TARGET 1) and waits
 * for the relay to pair it with the other side's connection, all within timeout_ms; cancel (may be NULL) ends
 * the wait early. @return a blocking socket with TCP_NODELAY whose bytes are the other side's, or, with a
 * one-line reason in err: -PERR_IO (no connection, or the relay closed it), -PERR_TIMEOUT, -PERR_CANCELLED,
 * -PERR_REFUSED (the relay refused: the token, a limit, another version), -PERR_INVALID (a bad role).
 */
int relay_dial(const ccoip_socket_address_t *relay, const uint8_t token[RELAY_TOKEN_BYTES], int role,
               int timeout_ms, const net_cancel_t *cancel, char *err, size_t errlen);

#endif
