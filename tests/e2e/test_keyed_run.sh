#!/usr/bin/env bash
# A keyed run, then a keyed and encrypted one, each with `pccl join --key-file`: two peers run
# checked all-reduces, a third joins mid-run through an accept round and receives the shared
# state from a peer (authenticated, then encrypted, p2p transfer), and all three end with the
# same hash at the last revision. The encrypted run is repeated with every all-reduce striped over
# a pool of 8 connections (one AEAD stream per connection).
. "$(dirname "$0")/lib.sh"
head -c 48 /dev/urandom | base64 > "$WORK/run.key"
chmod 600 "$WORK/run.key"
STEPS=60
PEER_EXTRA=()

run_keyed() { # NAME [MASTER FLAGS...]
    local n=$1; shift
    start_master --key-file "$WORK/run.key" "$@"
    local args=(--key-file "$WORK/run.key" --workload synthetic --steps $STEPS --size 400000 --tensors 2
                --step-delay 20 --min-world 2 "${PEER_EXTRA[@]}")
    start_peer "${n}1" "${args[@]}"; local a=$LAST_PID
    start_peer "${n}2" "${args[@]}"; local b=$LAST_PID
    wait_events "$WORK/${n}1.log" step 3 30
    start_peer "${n}3" "${args[@]}"; local c=$LAST_PID
    for p in $a $b $c; do wait_pid "$p" 90 || fail "$n: a peer exited with $?"; done
    local h
    h=$(json_field "$WORK/${n}1.log" done hash)
    [ -n "$h" ] || fail "$n: no final hash"
    for i in 1 2 3; do
        [ "$(json_field "$WORK/$n$i.log" done hash)" = "$h" ] || fail "$n$i hash differs"
        [ "$(json_field "$WORK/$n$i.log" done revision)" = $STEPS ] || fail "$n$i did not reach revision $STEPS"
        [ "$(json_field "$WORK/$n$i.log" done final_sync_ok)" = true ] || fail "$n$i final sync failed"
    done
    [ "$(sum_field "$WORK/${n}3.log" step ss_rx_bytes)" -gt 0 ] || fail "$n: the late peer received no shared state"
    grep -q '"world_size":3' "$WORK/${n}1.log" || fail "$n: the late peer never took part in an all-reduce"
    kill -INT "$MASTER_PID"
    wait_pid "$MASTER_PID" 10 || fail "$n: master exited with $? on SIGINT"
    cp "$WORK/master.log" "$WORK/master-$n.log"
    grep -q "refused" "$WORK/master-$n.log" && fail "$n: the master refused one of the run's peers"
    echo "$n: 3 keyed peers, hash $h"
}

run_keyed k
grep -q "keyed run: peers must prove the run key$" "$WORK/master-k.log" || fail "k: the master did not run keyed"
run_keyed e --encrypt
grep -q "traffic is encrypted" "$WORK/master-e.log" || fail "e: the master did not encrypt"
PEER_EXTRA=(--pool 8)
PCCL_STRIPE_LOCAL=1 PCCL_STRIPE_MIN_BYTES=1 PCCL_LOG_LEVEL=debug run_keyed s --encrypt
striped=0
for m in $(grep -oE "commenced: [a-z_]+, op [0-9]+, slots 0x[0-9a-f]+" "$WORK/master-s.log" | sed 's/.* //'); do
    (( m & (m - 1) )) && striped=$((striped + 1)) # more than one slot
done
[ "$striped" -gt 0 ] || fail "s: no all-reduce was striped over several connections"
echo "ok: keyed, encrypted, and encrypted striped runs complete with equal hashes"
