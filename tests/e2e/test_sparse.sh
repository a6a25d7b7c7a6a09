#!/usr/bin/env bash
# The sparse all-reduce with error feedback on 3 peers (sparse_peer.c run): unquantized and 2-bit packs, sum and
# avg, in place and out of place; each output equals the sum of the packs the members sent, each residual what its
# member did not send, and every output is bit-identical on every peer. Then settings that differ (sparse_peer.c
# mismatch): refused on every member with the reason, nothing written, and the run goes on.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sparse_lib.sh"
start_master
sparse_run 3 90 run 0 0.03 4
sparse_same_hashes 3
sparse_run 3 90 run 2 0.1 4
sparse_same_hashes 3
sparse_run 3 90 mismatch
for id in 0 1 2; do
    grep -q "settings differ between members (parameter mismatch): .*fraction 0.1 " "$WORK/s$id.log" ||
        fail "s$id: the fraction mismatch's reason was not logged"
    grep -q "settings differ between members (parameter mismatch): .*bits 4 " "$WORK/s$id.log" ||
        fail "s$id: the bits mismatch's reason was not logged"
done
sparse_same_hashes 3
echo "ok: sparse all-reduce exact and bit-identical on 3 peers; mismatched settings refused on every member"
