#!/usr/bin/env bash
# All-gathers by recursive doubling and reduce-scatters by recursive halving in worlds that are not a power of two
# (PCCL_ALGO=rhd; docs/algorithms.md): coll_peer.c's all-gathers (one count and variable counts) and reduce-scatters
# (every reduce op), every dtype, in place and out of place, ranked by ring position, on 3, 5 and 6 peers, each
# checked exactly on every member in rank order, and the master commenced them as rhd (the even members of the
# first 2r positions fold into their odd neighbours).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_lib.sh"
PCCL_LOG_LEVEL=debug start_master
export PCCL_ALGO=rhd PCCL_LOG_LEVEL=info
for W in 3 5 6; do
    PCCL_ALGO=rhd coll_run "$W" gather 60
    grep -qE "commenced: all_gather,.*, $W peers, rhd$" "$WORK/master.log" || fail "no all-gather of $W peers ran rhd"
    grep -qE "commenced: all_gather_v,.*, $W peers, rhd$" "$WORK/master.log" || fail "no all-gather-v of $W peers ran rhd"
    grep -qE "commenced: reduce_scatter,.*, $W peers, rhd$" "$WORK/master.log" ||
        fail "no reduce-scatter of $W peers ran rhd"
done
! grep -qE "commenced: (all_gather(_v)?|reduce_scatter),.*, ring$" "$WORK/master.log" ||
    fail "an all-gather or reduce-scatter ranked by position ran the ring"
n=$(grep -cE "commenced: all_gather(_v)?,.*, rhd$" "$WORK/master.log")
[ "$n" -ge 100 ] || fail "only $n all-gathers ran rhd"
rs=$(grep -cE "commenced: reduce_scatter,.*, rhd$" "$WORK/master.log")
[ "$rs" -ge 80 ] || fail "only $rs reduce-scatters ran rhd"
echo "ok: $n all-gathers by recursive doubling and $rs reduce-scatters by recursive halving exact on 3, 5 and 6 peers"
