#!/usr/bin/env bash
# Striped collectives by recursive halving and doubling (PCCL_ALGO=rhd; docs/algorithms.md, "Striping"):
# stripe_peer.c on 3 peers (a world that folds) with pools 1, 2 and 4 and on 4 peers with pools 1 and 3, the
# master striping every op over the whole pool: all-reduces of every dtype x (sum, avg, max), in place and out of
# place, exact; a float sum, a quantized avg, a reduce-scatter gathered by an all-gather of variable counts and a
# tree broadcast whose bits equal pool 1's on every peer. Then the same on 3 peers of a keyed, encrypted run with
# pool 3: the sealed links carry every stripe and the bits equal the open run's.
. "$(dirname "$0")/lib.sh"
export PCCL_ALGO=rhd
# stripe_round WORLD POOL NAME: the stripe_peers of one run, joined in order (the same ring positions each time)
stripe_round() {
    local W=$1 pool=$2 name=$3 pids=() r mask
    for r in $(seq 0 $((W - 1))); do
        PCCL_LOG_LEVEL=warn "$BIN/stripe_peer" "$PORT" "$r" "$W" "$pool" > "$WORK/$name-$r.log" 2> "$WORK/$name-$r.err" &
        pids+=($!); PIDS+=($!)
        for _ in $(seq 1 600); do grep -q joined "$WORK/$name-$r.err" && break; sleep 0.05; done
        grep -q joined "$WORK/$name-$r.err" || fail "stripe peer $r did not join ($name)"
    done
    for r in $(seq 0 $((W - 1))); do
        wait_pid "${pids[$r]}" 120 || { cat "$WORK/$name-$r.err" >&2; fail "stripe peer $r failed ($name)"; }
        grep -q '^hash' "$WORK/$name-$r.log" || fail "no hashes from peer $r ($name)"
    done
    mask=$(printf '%#x' $(( (1 << pool) - 1 )))
    for tag in 9000:all_reduce 9001:all_reduce 9002:reduce_scatter 9003:all_gather_v 9004:broadcast; do
        grep -q "tag ${tag%%:*} commenced: ${tag#*:}, op [0-9]*, slots $mask, $W peers, rhd$" "$WORK/master.log" ||
            fail "$name: the ${tag#*:} of tag ${tag%%:*} did not run rhd striped over $mask"
    done
}
# same_bits NAME REF WORLD: every peer of run NAME printed the hashes of run REF's peer 0
same_bits() {
    local r
    for r in $(seq 0 $(($3 - 1))); do
        cmp -s "$WORK/$1-$r.log" "$WORK/$2-0.log" || fail "peer $r of $1 differs from $2: $(cat "$WORK/$1-$r.log")"
    done
}
for run in "3 1" "3 2" "3 4" "4 1" "4 3"; do
    set -- $run
    PCCL_STRIPE_LOCAL=1 PCCL_STRIPE_MIN_BYTES=1 PCCL_LOG_LEVEL=debug start_master
    stripe_round "$1" "$2" "w$1p$2"
    same_bits "w$1p$2" "w$1p1" "$1"
    kill "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null
done
head -c 48 /dev/urandom | base64 > "$WORK/run.key"
chmod 600 "$WORK/run.key"
PCCL_STRIPE_LOCAL=1 PCCL_STRIPE_MIN_BYTES=1 PCCL_LOG_LEVEL=debug start_master --key-file "$WORK/run.key" --encrypt
PCCL_KEY_FILE="$WORK/run.key" stripe_round 3 3 keyed
same_bits keyed w3p1 3
echo "ok: striped rhd all-reduces, reduce-scatters, all-gathers and tree broadcasts on 3 and 4 peers, pools 1-4, keyed and encrypted; bits equal pool 1's"
