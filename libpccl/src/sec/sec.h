/*
 * sec/ - keys and the secure channel: run keys and their files (sec_key.h), the key handshake (sec_hs.h),
 * authenticated and encrypted frames (sec_frame.h), a link that seals a connection's traffic (sec_link.h),
 * the peers' signed identities (identity.h), and the greeting and tokens of the relay (sec_relay.h).
 *
 * Owns no threads. A handshake or a link belongs to the connection that made it and is used by one thread at
 * a time. All primitives come from libsodium and OpenSSL. Depends on base/ only, so the master shares it.
 *
 * Cycle: sec_frame <-> sec_hs: the handshake agrees on a frame cipher from sec_frame's list, and frames are
 * keyed by the handshake's session; splitting the cipher list out would leave a header of two functions.
 */
#ifndef PCCL_SEC_H
#define PCCL_SEC_H

#include "sec/identity.h"
#include "sec/sec_frame.h"
#include "sec/sec_hs.h"
#include "sec/sec_key.h"
#include "sec/sec_link.h"
#include "sec/sec_relay.h"

#endif
