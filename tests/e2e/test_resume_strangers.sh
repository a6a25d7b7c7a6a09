#!/usr/bin/env bash
# Strangers sending RESUME (docs/protocol.md, "Master restart" and section 3), played by
# tests/e2e/resume_flood.py:
#  A: an open run's master past its restart window gets 25 RESUMEs of 4096 collectives and 4096 ring
#     entries each, into an unused group. Each is taken as a HELLO: the master answers a probe within
#     1 s throughout, the run's peers keep taking steps and never lose the master, and no stranger is
#     accepted into the run;
#  B: a master within its restart window gets 20 RESUMEs of 65536 tensor entries each (25 MB), held open
#     while its rebuild waits for a peer they name: its resident memory stays within the strangers'
#     budget (64 MiB) and a margin.
. "$(dirname "$0")/lib.sh"
FLOOD="$(dirname "$0")/resume_flood.py"
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
steps_of() { count_events "$WORK/$1.log" step; }

start_master
t0=$(date +%s%N)
start_peer p1 --workload synthetic --steps 100000 --size 65536 --step-delay 20; P1=$LAST_PID
start_peer p2 --workload synthetic --steps 100000 --size 65536 --step-delay 20; P2=$LAST_PID
wait_events "$WORK/p1.log" step 3 60
# past the restart window (MSM_RESUME_WINDOW_MS, 5 s after the master started)
left=$(( 6000 - ($(date +%s%N) - t0) / 1000000 )); [ "$left" -gt 0 ] && sleep "$(echo "$left / 1000" | bc -l)"

s=$(steps_of p1)
A=$(timeout 90 python3 "$FLOOD" flood "$PORT" 25 4096) || fail "A: resume_flood.py failed"
echo "A: $A"
[ "$(field "$A" connected)" -ge 20 ] || fail "A: the flood did not get through: $A"
[ "$(field "$A" probes)" -ge 10 ] || fail "A: too few probes answered: $A"
[ "$(field "$A" max_probe_ms)" -le 1000 ] || fail "A: the master took more than 1 s to answer: $A"
[ "$(steps_of p1)" -ge $((s + 10)) ] || fail "A: p1 took $(( $(steps_of p1) - s )) steps during the flood"
grep -q 'accepted into group 4242\|group 4242 rebuilt' "$WORK/master.log" && fail "A: a stranger was accepted into the run"
[ "$(grep -c 'joins as a new peer' "$WORK/master.log")" -ge 20 ] || fail "A: the RESUMEs were not taken as HELLOs"
grep -q 'lost the master' "$WORK/p1.err" "$WORK/p2.err" && fail "A: a peer lost the master during the flood"
for p in "$P1" "$P2"; do kill -TERM "$p"; done
for p in "$P1" "$P2"; do wait_pid "$p" 60 || fail "a peer exited with $?"; done
same_state p1 p2
kill "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null

start_master
B=$(timeout 60 python3 "$FLOOD" amplify "$PORT" "$MASTER_PID" 20 65536) || fail "B: resume_flood.py failed"
echo "B: $B"
[ "$(field "$B" sent_bytes)" -ge $((20 * 65536 * 19)) ] || fail "B: the flood did not get through: $B"
grep -q 're-registered' "$WORK/master.log" || fail "B: the RESUMEs did not join the rebuild"
# The budget is 64 MiB; allocator slack makes it 100 (as tests/e2e/test_flood.sh, D). ThreadSanitizer keeps
# 4 bytes of shadow per byte the process touches, so under a sanitizer the allowance is 5 times that.
allow=$((100 * 1024)); [ -n "${TSAN_OPTIONS:-}${ASAN_OPTIONS:-}" ] && allow=$((5 * allow))
[ "$(field "$B" max_rss_kb)" -le $(( $(field "$B" base_rss_kb) + allow )) ] || fail "B: the master's memory grew: $B"
echo "ok: RESUME floods were taken as HELLOs (probe answered within $(field "$A" max_probe_ms) ms, the run went on); 25 MB of tensor entries held the master to +$(( ($(field "$B" max_rss_kb) - $(field "$B" base_rss_kb)) / 1024 )) MiB"
