#!/usr/bin/env bash
# SIGKILL one of 4 peers inside a reduce-scatter by recursive halving, an all-gather of variable counts by
# recursive doubling and a broadcast along the binomial tree (PCCL_ALGO=rhd, ranked by ring position, striped over
# 2 connections per partner), then a rejoin (coll_lib.sh's coll_kill): the master aborts the operation on every
# member, the buffer in place comes back restored and the input out of place untouched, the 3 survivors retry (a
# world that folds) and the contents of every result name exactly the members that made it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_lib.sh"
export PCCL_ALGO=rhd PCCL_TEST_RANK_BY_POSITION=1 PCCL_STRIPE_LOCAL=1
for kind in reduce_scatter all_gather_v broadcast; do
    coll_kill "$kind" 4
    grep -q "commenced: $kind, op [0-9]*, slots 0x3, 3 peers, rhd$" "$WORK/master.log" ||
        fail "the 3 survivors' $kind did not run rhd on 2 stripes"
    grep -q "commenced: $kind, op [0-9]*, slots 0x3, 4 peers, rhd$" "$WORK/master.log" ||
        fail "no $kind of 4 peers ran rhd on 2 stripes"
    ! grep -q "commenced: $kind,.*, ring$" "$WORK/master.log" || fail "a $kind ran the ring"
    kill "$MASTER_PID" && wait "$MASTER_PID" 2>/dev/null # its last lines must not land in the next log
done
echo "ok: kills inside an rhd reduce-scatter, all-gather-v and tree broadcast aborted, restored and retried"
