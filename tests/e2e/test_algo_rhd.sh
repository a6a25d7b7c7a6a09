#!/usr/bin/env bash
# Recursive halving and doubling (docs/algorithms.md). PCCL_ALGO=rhd on 3, 4 and 5 peers, then on 4 peers of a
# keyed, encrypted run: every dtype x reduce op, in place and out of place, async ops on a pool, each checked
# exactly on every member (so the members end bit-identical), and the master commenced every all-reduce as rhd.
# Then 4 peers without PCCL_ALGO: the master chooses recursive doubling (rd) for the small all-reduces and the ring
# for the largest;
# coll_peer's collectives with PCCL_ALGO=rhd: reduce-scatters and all-gathers ranked by ring position run rhd,
# broadcasts from one holder the binomial tree.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_lib.sh"
. "$(dirname "$0")/algo_lib.sh"
export PCCL_LOG_LEVEL=info
PCCL_LOG_LEVEL=debug start_master
forced_rounds rhd 3 4 5
ops_round 4 ""
[ "$RD" -gt 0 ] && [ "$RING" -gt 0 ] || fail "auto on 4 peers: $RD rd, $RHD rhd and $RING ring all-reduces, want rd and ring"
grep -q "commenced: all_reduce,.*4 peers, ring$" "$WORK/master.log" || fail "auto never chose the ring"
# The collectives of coll_peer.c on 4 peers with PCCL_ALGO=rhd: the reduce-scatters and all-gathers ranked by ring
# position run recursive halving or doubling (every dtype and reduce op, checked exactly), broadcasts from one
# holder the binomial tree, the others the ring.
rs0=$(grep -c "commenced: reduce_scatter,.*, rhd$" "$WORK/master.log")
PCCL_ALGO=rhd coll_run 4 all 120
rs=$(($(grep -c "commenced: reduce_scatter,.*, rhd$" "$WORK/master.log") - rs0))
[ "$rs" -gt 0 ] || fail "no reduce-scatter ran rhd"
grep -q "commenced: reduce_scatter,.*, ring$" "$WORK/master.log" || fail "ranked reduce-scatters did not run the ring"
grep -qE "commenced: all_gather(_v)?,.*, rhd$" "$WORK/master.log" || fail "no all-gather ran rhd"
grep -qE "commenced: broadcast,.*, rhd$" "$WORK/master.log" || fail "no broadcast ran the binomial tree"
grep -qE "commenced: broadcast,.*, ring$" "$WORK/master.log" || fail "shared-sources broadcasts did not run the ring"
! grep -qE "commenced: barrier,.*, rhd$" "$WORK/master.log" || fail "a barrier ran rhd"
kill "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null
head -c 48 /dev/urandom | base64 > "$WORK/run.key"
chmod 600 "$WORK/run.key"
PCCL_LOG_LEVEL=debug start_master --key-file "$WORK/run.key" --encrypt
PCCL_KEY_FILE="$WORK/run.key" forced_rounds rhd 4
echo "ok: PCCL_ALGO=rhd exact on 3, 4, 5 peers and keyed on 4; auto chose rd and the ring by size"
