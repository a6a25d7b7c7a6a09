/*
 * sm/ - the master's pure state machine: membership, accept rounds, votes of collectives, shared-state
 * syncs and topology updates, the registry of peers and their identities, restarts (RESUME rebuilds) and the
 * admin queries on its state. Events in (messages, ticks, time and random bytes passed by the caller),
 * actions out (messages to send, connections to close); no sockets, no clock, no threads of its own.
 *
 * master_sm.h is its interface; msm_internal.h is shared by its files only. Depends on base/, sec/ of the
 * library and topology/.
 *
 * Cycle: master_sm <-> msm_internal: master_sm.c dispatches to the msm_*.c handlers through msm_internal.h,
 * which is built on master_sm.h's public types; the two headers are one interface split by audience.
 */
#ifndef PCCL_SM_H
#define PCCL_SM_H

#include "sm/master_sm.h"
#include "sm/msm_admin.h"
#include "sm/msm_algo.h" /* the algorithms' names, for the admin's counts by algorithm */

#endif
