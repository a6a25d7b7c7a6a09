#!/usr/bin/env bash
# Strangers flooding an open run's ports (docs/security.md, "Strangers"). tests/e2e/flood.py floods
# from 127.0.0.2 and up while it samples the target's descriptors, memory and CPU time:
#  A: 3000 RING hellos with random uuids at a peer's p2p port: its descriptors stay bounded (no
#     stream registered, no thread each) and it spends less than a core on them; the same again
#     with the peer out of descriptors;
#  B: BENCH requests asking the peer to stream for 60 s, and shared-state requests: it sends nothing;
#  C: 2000 connections that never send HELLO to the master: its descriptors stay bounded, and a
#     newcomer joins meanwhile and takes steps;
#  D: 60 connections that each send an 8 MiB RESUME before registering: the master buffers at most
#     its budget for them.
# The run goes on through all of it: the peers keep taking steps and end with equal hashes.
. "$(dirname "$0")/lib.sh"
FLOOD="$(dirname "$0")/flood.py"

steps_of() { count_events "$WORK/$1.log" step; }
# still_stepping NAME BEFORE: NAME took steps since BEFORE (within 30 s)
still_stepping() {
    for _ in $(seq 1 600); do [ "$(steps_of "$1")" -gt "$2" ] && return 0; sleep 0.05; done
    fail "$1 took no step after the flood"
}
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

start_master
start_peer p1 --workload synthetic --steps 100000 --size 65536 --step-delay 20; P1=$LAST_PID
start_peer p2 --workload synthetic --steps 100000 --size 65536 --step-delay 20; P2=$LAST_PID
wait_events "$WORK/p1.log" step 3 60
P1PORT=$(python3 "$FLOOD" listen "$P1" | head -1)
[ -n "$P1PORT" ] || fail "no p2p port of p1"

s=$(steps_of p1)
A=$(timeout 120 python3 "$FLOOD" ring "$P1PORT" "$P1" 3000) || fail "A: flood.py failed"
echo "A: $A"
[ "$(field "$A" connected)" -ge 1000 ] || fail "A: the flood did not get through: $A"
[ "$(field "$A" max_fds)" -le $(( $(field "$A" base_fds) + 100 )) ] || fail "A: the peer's descriptors grew: $A"
python3 -c 'import json,sys; a=json.loads(sys.argv[1]); sys.exit(a["cpu_s"] >= a["wall_s"])' "$A" ||
    fail "A: the peer spent a core or more on the flood: $A"
still_stepping p1 "$s"

# A2: the same with p1 out of descriptors (its limit lowered to 24 above what it holds): strangers
# give theirs back, so the flood passes in seconds without spinning, and the ring goes on.
s=$(steps_of p1)
soft=$(prlimit --pid "$P1" --nofile --output SOFT --noheadings)
prlimit --pid "$P1" --nofile=$(( $(ls /proc/"$P1"/fd | wc -l) + 24 )): || fail "A2: prlimit failed"
A2=$(timeout 60 python3 "$FLOOD" ring "$P1PORT" "$P1" 2000) || fail "A2: the flood did not pass within 60 s"
echo "A2: $A2"
[ "$(field "$A2" connected)" -ge 1000 ] || fail "A2: the flood did not get through: $A2"
python3 -c 'import json,sys; a=json.loads(sys.argv[1]); sys.exit(a["cpu_s"] >= a["wall_s"])' "$A2" ||
    fail "A2: the peer spent a core or more on the flood: $A2"
still_stepping p1 "$s"
prlimit --pid "$P1" --nofile="$soft": || fail "A2: cannot restore the limit"

s=$(steps_of p1)
B=$(timeout 60 python3 "$FLOOD" bench "$P1PORT" "$P1" 16) || fail "B: flood.py failed"
echo "B: $B"
[ "$(field "$B" received_bytes)" = 0 ] || fail "B: the peer streamed to a stranger: $B"
S=$(timeout 60 python3 "$FLOOD" ss "$P1PORT" "$P1" 8) || fail "B: flood.py ss failed"
echo "B: $S"
[ "$(field "$S" received_bytes)" = 0 ] || fail "B: the peer answered a stranger's shared-state request: $S"
still_stepping p1 "$s"

s=$(steps_of p1)
timeout 60 python3 "$FLOOD" hold "$PORT" "$MASTER_PID" 2000 > "$WORK/c.json" & F=$!; PIDS+=($F)
sleep 1
start_peer p3 --workload synthetic --steps 100000 --size 65536 --step-delay 20; P3=$LAST_PID
wait_pid "$F" 90 || fail "C: flood.py failed"
C=$(cat "$WORK/c.json"); echo "C: $C"
[ "$(field "$C" connected)" -ge 1000 ] || fail "C: the flood did not get through: $C"
[ "$(field "$C" max_fds)" -le $(( $(field "$C" base_fds) + 512 + 32 )) ] || fail "C: the master's descriptors grew: $C"
wait_events "$WORK/p3.log" step 3 60
still_stepping p1 "$s"

s=$(steps_of p1)
D=$(timeout 60 python3 "$FLOOD" oversize "$PORT" "$MASTER_PID" 60) || fail "D: flood.py failed"
echo "D: $D"
[ "$(field "$D" sent_bytes)" -ge $((64 << 20)) ] || fail "D: the flood did not get through: $D"
# The budget is 64 MiB; allocator slack makes it 100. ThreadSanitizer keeps 4 bytes of shadow per byte the
# process touches (and ASan a quarantine of freed blocks), so under a sanitizer (TSAN_OPTIONS/ASAN_OPTIONS set,
# as scripts/sanitize.sh does) the allowance is 5 times that; without the budget the flood takes 480 MiB.
allow=$((100 * 1024)); [ -n "${TSAN_OPTIONS:-}${ASAN_OPTIONS:-}" ] && allow=$((5 * allow))
[ "$(field "$D" max_rss_kb)" -le $(( $(field "$D" base_rss_kb) + allow )) ] || fail "D: the master's memory grew: $D"
still_stepping p1 "$s"
grep -q "unregistered connections: .* refused" "$WORK/master.log" || fail "the master logged no refusals"

# The run ends as usual: each peer leaves on SIGTERM with the state the others hold at that revision
# (a peer may take one more step with the others after the first leaves).
for p in "$P1" "$P2" "$P3"; do kill -TERM "$p"; done
for p in "$P1" "$P2" "$P3"; do wait_pid "$p" 60 || fail "a peer exited with $?"; done
for n in p1 p2 p3; do [ "$(json_field "$WORK/$n.log" left ok)" = true ] || fail "$n did not leave cleanly"; done
same_state p1 p2 p3
echo "ok: floods of ring, bench, shared-state, pre-HELLO and oversize RESUME connections stayed bounded; the run went on"
