/*
 * server/ - the master process around the state machine: the libuv loop, the listener and its
 * connections, the key handshake of keyed runs, the allow-keys file, process metrics, and the handlers the
 * admin port calls. One loop thread owns every connection and the state machine; other threads reach it
 * through uv_async handles only.
 *
 * This is the one master header the pccl command uses (pccl master): the master's C API beyond pccl.h.
 * Depends on sm/, topology/, admin/ and the library's base/ and sec/.
 */
#ifndef PCCL_SERVER_H
#define PCCL_SERVER_H

#include "admin/admin.h"
#include "server/master_internal.h"
#include "topology/topology.h"

#endif
