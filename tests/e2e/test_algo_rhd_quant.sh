#!/usr/bin/env bash
# Quantized all-reduces by recursive halving and doubling (PCCL_ALGO=rhd; docs/algorithms.md, "Quantized"):
# quant_peer.c on 3 and 5 peers (worlds that fold) with 4 and 2 bits and on 4 peers with every 8- and 16-bit
# quantized dtype: every source dtype x algorithm x width x reduce op, edge-case data, in place and out of place,
# each result within the documented bound of the exact float64 reduction (checked by each peer) and bit-identical
# on every member (the per-tag hashes compared here), and the master commenced the quantized all-reduces as rhd.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/algo_lib.sh"
PCCL_LOG_LEVEL=debug start_master
export PCCL_ALGO=rhd
quant_round 3 low
quant_round 4
quant_round 5 low
rhd=$(grep -c "commenced: all_reduce,.*, rhd$" "$WORK/master.log")
[ "$rhd" -ge 400 ] || fail "only $rhd all-reduces ran rhd"
! grep -q "commenced: all_reduce,.*, ring$" "$WORK/master.log" || fail "an all-reduce ran the ring"
echo "ok: quantized rhd all-reduces bit-identical and within bounds on 3, 4 and 5 peers ($rhd ran rhd)"
