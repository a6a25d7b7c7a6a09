#!/usr/bin/env bash
# Nobody can take a member's uuid at a master restart: 3 peers (restart_peer.c) train; an impostor that read
# their uuids from /v1/status RESUMEs with each of them (with a key of its own) as soon as the restarted master
# listens, before the members reconnect, and keeps trying for a while. Every attempt is refused ("not its
# public key's"); the members resume under their own uuids, no peer exits, the revision keeps advancing and the
# final shared state is the same everywhere.
. "$(dirname "$0")/lib.sh"
END=${RESTART_END:-160}
start_master
admin_port() { grep -o 'admin on [0-9.]*:[0-9]*' "$WORK/master.log" | tail -1 | sed 's/.*://'; }
# uuids of the accepted peers, sorted, one a line
member_uuids() {
    "$PCCL" status --admin "127.0.0.1:$(admin_port)" --json |
        python3 -c 'import json,sys; print("\n".join(sorted(p["uuid"] for p in json.load(sys.stdin)["peers"] if p["phase"] == "accepted")))'
}

start_restart_peers 3 "$END"
wait_rev peer0 30 60
for _ in $(seq 1 100); do [ "$(member_uuids | wc -l)" = 3 ] && break; sleep 0.1; done
before_uuids=$(member_uuids)
[ "$(echo "$before_uuids" | wc -l)" = 3 ] || fail "expected 3 accepted peers, got: $before_uuids"

# shellcheck disable=SC2086 # one argument per uuid
"$BIN/impostor" "$PORT" 12 $before_uuids > "$WORK/impostor.log" 2>&1 &
IMP=$!; PIDS+=("$IMP")
kill -9 "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null
before=$(rev_of peer0)
sleep 1
PCCL_LOG_LEVEL=info "$PCCL" master --listen "127.0.0.1:$PORT" --admin 127.0.0.1:0 >> "$WORK/master.log" 2>&1 &
MASTER_PID=$!; PIDS+=("$MASTER_PID")
wait_rev peer0 $((before + 20)) 60
for r in 0 1 2; do kill -0 "${pids[$r]}" 2>/dev/null || fail "peer $r exited: $(tail -3 "$WORK/peer$r.err")"; done
grep -q "rebuilt run from 3 peers" "$WORK/master.log" || fail "the run was not rebuilt from its 3 members"
after_uuids=$(member_uuids)
[ "$after_uuids" = "$before_uuids" ] || fail "the members' uuids changed: $before_uuids -> $after_uuids"

wait_pid "$IMP" 30 || fail "the impostor got in: $(grep -v '^refused' "$WORK/impostor.log")"
grep -q "^refused: RESUME claims a uuid that is not its public key's" "$WORK/impostor.log" ||
    fail "the impostor's RESUMEs were not refused for the uuid: $(head -3 "$WORK/impostor.log")"
first_refusal=$(grep -n "^refused" "$WORK/impostor.log" | head -1 | cut -d: -f1)
[ -n "$first_refusal" ] || fail "the impostor never reached the restarted master"
for i in 0 1 2; do wait_pid "${pids[$i]}" 120 || fail "peer $i failed: $(tail -3 "$WORK/peer$i.err")"; done
sums=$(grep -h '^done' "$WORK"/peer*.log | sort -u)
[ "$(echo "$sums" | wc -l)" = 1 ] || fail "shared states differ: $sums"
echo "$sums" | grep -q "^done $END " || fail "the run did not reach revision $END: $sums"
echo "ok: $(tail -1 "$WORK/impostor.log"); the members kept their uuids through the restart (revision $before -> $END)"
