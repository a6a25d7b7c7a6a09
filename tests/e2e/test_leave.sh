#!/usr/bin/env bash
# SIGTERM one of 3 `pccl join` peers mid-run: it leaves the run cleanly and exits 0 within a few
# seconds; the master aborts none of the others' collectives because of it (its aborted-collective
# counter is unchanged, it counts one peer left and logs "left the run"); the other two go on without
# it and finish with equal hashes. Then leave_peer.c checks pcclExtLeave itself (refusals, a leave, after it).
. "$(dirname "$0")/lib.sh"
start_master
[ -n "$APORT" ] || fail "no admin port in the master's log"

# counter NAME: a counter of the master's /v1/status
counter() {
    python3 - "$APORT" "$1" <<'PY'
import json, sys, urllib.request
print(int(json.load(urllib.request.urlopen("http://127.0.0.1:%s/v1/status" % sys.argv[1], timeout=5))["counters"][sys.argv[2]]))
PY
}

STEPS=${PCCL_TEST_LEAVE_STEPS:-150} # fewer under TSan (scripts/sanitize.sh): its steps are slow
args=(--workload synthetic --steps $STEPS --size 4000000 --step-delay 2 --min-world 3)
start_peer p1 "${args[@]}"; P1=$LAST_PID
start_peer p2 "${args[@]}"; P2=$LAST_PID
start_peer p3 "${args[@]}"; P3=$LAST_PID
wait_events "$WORK/p1.log" step 20 60
sleep 0.3 # the admin port's documents are renewed every 250 ms
aborted=$(counter collectives_aborted)
[[ "$aborted" =~ ^[0-9]+$ ]] || fail "no collectives_aborted counter in /v1/status"
kill -TERM "$P2"
t0=$(date +%s%N)
wait_pid "$P2" 5
st=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$st" -eq 0 ] || fail "the peer that got SIGTERM exited with $st"
[ "$(json_field "$WORK/p2.log" left ok)" = true ] || fail "p2 reported no successful leave"
before=$(count_events "$WORK/p1.log" step)
wait_events "$WORK/p1.log" step $((before + 10)) 60 # the others go on without p2
sleep 0.3
[ "$(counter collectives_aborted)" = "$aborted" ] || fail "collectives aborted: $aborted before the leave, $(counter collectives_aborted) after"
[ "$(counter peers_left)" = 1 ] || fail "the master counts $(counter peers_left) peers left, not 1"
grep -q 'left the run' "$WORK/master.log" || fail "the master did not log 'left the run'"
for p in "$P1" "$P3"; do wait_pid "$p" 120 || fail "a remaining peer exited with $?"; done
[ "$(counter collectives_aborted)" = "$aborted" ] || fail "a collective was aborted after the leave"
for n in p1 p3; do
    [ "$(json_field "$WORK/$n.log" done revision)" = $STEPS ] || fail "$n did not reach revision $STEPS"
    [ "$(json_field "$WORK/$n.log" step world_size)" = 2 ] || fail "$n's last step did not run with 2 peers"
done
h=$(json_field "$WORK/p1.log" done hash)
[ "$(json_field "$WORK/p3.log" done hash)" = "$h" ] || fail "p3's hash differs from p1's"
# The library call on its own: its refusals, then a leave from a run of one peer.
"$BIN/leave_peer" "$PORT" > "$WORK/leave_peer.log" 2>&1 || fail "leave_peer: $(cat "$WORK/leave_peer.log")"
# the admin port's documents are renewed every 250 ms (later on a loaded machine)
for _ in $(seq 1 50); do [ "$(counter peers_left)" = 2 ] && break; sleep 0.1; done
[ "$(counter peers_left)" = 2 ] || fail "the master counts $(counter peers_left) peers left after leave_peer, not 2"
echo "ok: SIGTERM -> exit 0 in ${ms} ms, no collective aborted ($aborted before and after), survivors' hash $h"
