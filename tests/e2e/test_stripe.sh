#!/usr/bin/env bash
# Striped all-reduce (one op over every connection of the pool) on 3 loopback peers, pool sizes
# 1 to 8: every dtype in and out of place checked exactly (stripe_peer.c), the master's log shows
# each op took the whole pool, and rounding-sensitive float and quantized results have the same
# bits on every peer and every pool size as with pool 1 (one connection).
. "$(dirname "$0")/lib.sh"
PCCL_STRIPE_LOCAL=1 PCCL_STRIPE_MIN_BYTES=1 PCCL_LOG_LEVEL=debug start_master
for pool in 1 2 3 4 5 6 7 8; do
    pids=()
    for r in 0 1 2; do
        PCCL_LOG_LEVEL=warn "$BIN/stripe_peer" "$PORT" "$r" 3 "$pool" > "$WORK/s$r-$pool.log" 2> "$WORK/s$r-$pool.err" &
        pids+=($!); PIDS+=($!)
        # Joined one after the other, the peers take the same ring positions for every pool size, so
        # each element is reduced in the same order and pool 1's bits are the reference.
        for _ in $(seq 1 600); do grep -q joined "$WORK/s$r-$pool.err" && break; sleep 0.05; done
        grep -q joined "$WORK/s$r-$pool.err" || fail "stripe peer $r did not join (pool $pool)"
    done
    for r in 0 1 2; do
        wait_pid "${pids[$r]}" 120 || { cat "$WORK/s$r-$pool.err" >&2; fail "stripe peer $r failed with pool $pool"; }
    done
    mask=$(printf '%#x' $(( (1 << pool) - 1 )))
    grep -q "tag 9000 commenced: [a-z_]*, op [0-9]*, slots $mask," "$WORK/master.log" || fail "pool $pool: op not striped over $mask"
    for r in 0 1 2; do
        grep -q '^hash' "$WORK/s$r-$pool.log" || fail "no hashes from peer $r"
        cmp -s "$WORK/s$r-$pool.log" "$WORK/s0-1.log" || fail "peer $r with pool $pool differs from pool 1: $(cat "$WORK/s$r-$pool.log")"
    done
    # Each pool size is a new run of the same tags: the next one must not see this one's ops.
    grep -c "tag 9000 commenced" "$WORK/master.log" | grep -qx "$pool" || fail "pool $pool: tag 9000 commenced more than once"
done
echo "ok: striped all-reduce exact for every dtype on pools 1-8, bit-identical to pool 1"
