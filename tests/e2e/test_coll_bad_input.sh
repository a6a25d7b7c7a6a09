#!/usr/bin/env bash
# Bad input to the collectives on 3 peers (coll_peer.c bad): no root, two roots, counts, dtypes or reduce ops that
# differ, outputs too small for the world, rank keys from some members or equal: pcclInvalidUsage on every member
# with the master's reason logged, buffers unchanged; an unknown kind and other local mistakes: pcclInvalidArgument;
# then a correct all-gather and a barrier.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_lib.sh"
start_master
coll_run 3 bad 90
for id in 0 1 2; do
    f="$WORK/c$id.log"
    grep -q "broadcast tag [0-9]* rejected by the master: .*no member is the root" "$f" || fail "c$id: no-root reason not logged"
    grep -q "broadcast tag [0-9]* rejected by the master: .*two roots" "$f" || fail "c$id: two-roots reason not logged"
    grep -q "reduce_scatter tag [0-9]* rejected by the master" "$f" || fail "c$id: dtype mismatch reason not logged"
    grep -q "all_gather tag [0-9]* rejected by the master" "$f" || fail "c$id: all-gather rejection not logged"
    grep -q "unknown kind 9" "$f" || fail "c$id: the unknown kind was not named"
done
echo "ok: bad input refused on every member with its reason; the run went on"
