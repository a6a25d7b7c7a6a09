#!/usr/bin/env bash
# The all-reduce by recursive doubling (docs/algorithms.md). PCCL_ALGO=rd on 2, 3 and 5 peers (3 and 5 fold) and
# on 3 peers of a keyed, encrypted run: every dtype x reduce op, in place and out of place, async ops on a pool,
# each checked exactly on every member, and the master commenced every all-reduce as rd. Quantized (quant_peer.c)
# on 3 peers with 4 and 2 bits and on 4 with every 8- and 16-bit dtype: within the bound and bit-identical on every
# member. Then 2 peers without PCCL_ALGO: the master chooses rd for the small all-reduces and the ring for the
# largest.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/algo_lib.sh"
export PCCL_LOG_LEVEL=info
PCCL_LOG_LEVEL=debug start_master
forced_rounds rd 2 3 5
ops_round 2 ""
[ "$RD" -gt 0 ] && [ "$RING" -gt 0 ] || fail "auto on 2 peers: $RD rd and $RING ring all-reduces, want both"
rd0=$(algo_count rd)
PCCL_ALGO=rd quant_round 3 low
PCCL_ALGO=rd quant_round 4
[ $(($(algo_count rd) - rd0)) -ge 400 ] || fail "the quantized all-reduces did not run rd"
kill "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null
head -c 48 /dev/urandom | base64 > "$WORK/run.key"
chmod 600 "$WORK/run.key"
PCCL_LOG_LEVEL=debug start_master --key-file "$WORK/run.key" --encrypt
PCCL_KEY_FILE="$WORK/run.key" forced_rounds rd 3
echo "ok: PCCL_ALGO=rd exact on 2, 3, 5 peers and keyed on 3, quantized bit-identical on 3 and 4; auto chose rd and the ring on 2"
