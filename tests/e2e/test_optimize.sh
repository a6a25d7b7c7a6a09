#!/usr/bin/env bash
# pcclOptimizeTopology on 4 peers: bandwidth of the missing pairs is measured,
# the ring is solved and re-wired, and all-reduces go on correctly; after a
# peer is killed the next optimization measures nothing new and succeeds.
. "$(dirname "$0")/lib.sh"
start_master
args=(--workload synthetic --steps 60 --size 400000 --step-delay 10 --min-world 4 --optimize)
for i in 1 2 3 4; do start_peer "p$i" "${args[@]}"; eval "P$i=$LAST_PID"; done
wait_events "$WORK/p1.log" step 10 60
kill -9 "$P4"
for p in "$P1" "$P2" "$P3"; do wait_pid "$p" 60 || fail "a peer exited with $?"; done
for n in p1 p2 p3; do
    ok=$(grep -c '"event":"optimize_topology","ok":true' "$WORK/$n.log" || true)
    [ "$ok" -ge 1 ] || fail "$n: no successful optimize_topology"
done
h=$(json_field "$WORK/p1.log" done hash)
for n in p2 p3; do [ "$(json_field "$WORK/$n.log" done hash)" = "$h" ] || fail "$n hash differs"; done
[ "$(json_field "$WORK/p1.log" done revision)" = 60 ] || fail "p1 did not finish"
echo "ok: optimize topology with measurements and re-wiring; $(grep -c 'new ring' "$WORK/master.log") ring change(s)"
