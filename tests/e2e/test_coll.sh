#!/usr/bin/env bash
# The collectives on 4 peers, checked exactly against results computed in coll_peer.c: broadcast (a shared-sources
# one too), all-gather, all-gather of variable counts and reduce-scatter (every reduce op), every dtype, in place
# and out of place mixed within each operation, ranks by rank key and by ring position, barrier, async operations
# of several kinds at once and the with-retry form.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_lib.sh"
start_master
coll_run 4 all 120
echo "ok: every collective checked on 4 peers"
