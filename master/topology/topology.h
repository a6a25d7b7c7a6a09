/*
 * topology/ - ring orders from measured bandwidth: the exact solver for small worlds, the search with
 * local improvement and repair for larger ones, and their bounds (topology_solver.h). Pure functions over
 * a bandwidth matrix; the background search runs on a thread the server owns and cancels through a flag.
 */
#ifndef PCCL_TOPOLOGY_H
#define PCCL_TOPOLOGY_H

#include "topology/topology_solver.h"

#endif
