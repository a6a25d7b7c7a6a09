#!/usr/bin/env bats
# scripts/fleet: master.sh creates a token and serves the admin port, peer.sh
# rejoins after its peer is kicked or its run failed (backing off exponentially
# with jitter, capped), stops on exit 0, on the exit codes that would repeat
# (usage, local configuration) and on SIGTERM, watch.sh acts on `pccl status`
# exit codes.

setup() {
    REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
    export PCCL=${PCCL_BIN:-$REPO/build/bin/pccl}
    TMP=$(mktemp -d)
    PIDS=()
}

teardown() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 0.3
    for p in "${PIDS[@]}"; do
        for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do kill -9 "$c" 2>/dev/null || true; done
        kill -9 "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}

# start_fleet_master: master.sh on loopback with its token in $TMP/token; sets PORT and APORT
start_fleet_master() {
    LISTEN=127.0.0.1:0 ADMIN=127.0.0.1:0 TOKEN_FILE="$TMP/token" "$REPO/scripts/fleet/master.sh" > "$TMP/m.out" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 100); do grep -q 'admin on' "$TMP/m.out" && break; sleep 0.05; done
    PORT=$(grep -o 'listening on [0-9.]*:[0-9]*' "$TMP/m.out" | sed 's/.*://')
    APORT=$(grep -o 'admin on [0-9.]*:[0-9]*' "$TMP/m.out" | sed 's/.*://')
}

accepted_uuids() {
    "$PCCL" status --admin 127.0.0.1:"$APORT" --json 2>/dev/null |
        python3 -c 'import json,sys; print(" ".join(sorted(p["uuid"] for p in json.load(sys.stdin)["peers"] if p["phase"]=="accepted")))'
}

@test "peer.sh rejoins after a kick; master.sh made a private token" {
    start_fleet_master
    [ "$(stat -c %a "$TMP/token")" = 600 ]
    for i in 1 2; do
        MASTER=127.0.0.1:$PORT "$REPO/scripts/fleet/peer.sh" --workload synthetic --steps 1000000 --step-delay 20 \
            > "$TMP/p$i.out" 2>&1 &
        PIDS+=($!)
    done
    for _ in $(seq 1 100); do [ "$(accepted_uuids | wc -w)" -eq 2 ] && break; sleep 0.1; done
    before=$(accepted_uuids)
    victim=${before%% *}
    python3 -c '
import sys, urllib.request
r = urllib.request.Request(sys.argv[1], method="POST", data=b"", headers={"Authorization": "Bearer " + sys.argv[2]})
print(urllib.request.urlopen(r, timeout=5).status)' "http://127.0.0.1:$APORT/v1/peers/$victim/kick" "$(cat "$TMP/token")"
    # The kicked peer's peer.sh restarts it after 1 s; it is accepted again under a new uuid.
    for _ in $(seq 1 150); do
        now=$(accepted_uuids)
        [ "$(wc -w <<< "$now")" -eq 2 ] && [[ "$now" != *"$victim"* ]] && break
        sleep 0.1
    done
    [ "$(wc -w <<< "$now")" -eq 2 ]
    [[ "$now" != *"$victim"* ]]
    grep -q 'rejoining in 1s' "$TMP"/p*.out
}

@test "watch.sh runs ON_DOWN when the master stays unreachable (exit 3)" {
    ADMIN=127.0.0.1:1 INTERVAL=0.2 UNREACHABLE_LIMIT=2 ON_DOWN="touch $TMP/down" \
        timeout 10 "$REPO/scripts/fleet/watch.sh" > "$TMP/w.out" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 50); do [ -f "$TMP/down" ] && break; sleep 0.1; done
    [ -f "$TMP/down" ]
    grep -q 'master unreachable (2/2)' "$TMP/w.out"
}

@test "peer.sh does not retry a local configuration error (exit 4) nor a usage error (exit 2)" {
    MASTER=127.0.0.1:1 run timeout 10 "$REPO/scripts/fleet/peer.sh" --workload fashion-mnist --data "$TMP/none"
    [ "$status" -eq 4 ]
    [[ "$output" == *"local configuration error (exit 4), not retrying"* ]]
    [[ "$output" != *"rejoining"* ]]
    MASTER=127.0.0.1:1 run timeout 10 "$REPO/scripts/fleet/peer.sh" --bogus
    [ "$status" -eq 2 ]
    [[ "$output" == *"usage error (exit 2), not retrying"* ]]
}

@test "peer.sh retries a failed run (exit 1)" {
    # --connect-timeout 0: pccl join would otherwise wait the reconnect window for the master to come up
    MASTER=127.0.0.1:1 MAX_BACKOFF=1 "$REPO/scripts/fleet/peer.sh" --workload synthetic --connect-timeout 0 \
        > "$TMP/p.out" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 100); do [ "$(grep -c 'rejoining' "$TMP/p.out")" -ge 2 ] && break; sleep 0.1; done
    [ "$(grep -c 'pccl join exited with 1; rejoining' "$TMP/p.out")" -ge 2 ]
}

@test "peer.sh retries a master host name that does not resolve (yet): exit 1, not a usage error" {
    MASTER=pccl-master.invalid:48148 MAX_BACKOFF=1 "$REPO/scripts/fleet/peer.sh" --workload synthetic \
        > "$TMP/p.out" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 100); do [ "$(grep -c 'rejoining' "$TMP/p.out")" -ge 2 ] && break; sleep 0.1; done
    [ "$(grep -c 'pccl join exited with 1; rejoining' "$TMP/p.out")" -ge 2 ]
    grep -q "cannot resolve 'pccl-master.invalid'" "$TMP/p.out"
}

@test "SIGTERM to peer.sh: its pccl join leaves the run, exits 0, and is not restarted" {
    start_fleet_master
    MASTER=127.0.0.1:$PORT "$REPO/scripts/fleet/peer.sh" --workload synthetic --steps 1000000 --json > "$TMP/p.out" 2>&1 &
    P=$!
    PIDS+=($P)
    for _ in $(seq 1 100); do [ "$(accepted_uuids | wc -w)" -eq 1 ] && break; sleep 0.1; done
    [ "$(accepted_uuids | wc -w)" -eq 1 ]
    kill -TERM "$P"
    run timeout 10 tail --pid="$P" -f /dev/null
    [ "$status" -eq 0 ]
    grep -q '"event":"left","ok":true' "$TMP/p.out"
    [[ "$(cat "$TMP/p.out")" != *"rejoining"* ]]
    for _ in $(seq 1 20); do [ -z "$(accepted_uuids)" ] && break; sleep 0.1; done # the status is renewed every 250 ms
    [ -z "$(accepted_uuids)" ]
}

@test "peer.sh backs off: doubling up to MAX_BACKOFF, plus a jitter below half of it" {
    MASTER=127.0.0.1:1 MAX_BACKOFF=2 "$REPO/scripts/fleet/peer.sh" --workload synthetic --connect-timeout 0 > "$TMP/p.out" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 200); do [ "$(grep -c 'rejoining' "$TMP/p.out")" -ge 3 ] && break; sleep 0.1; done
    run python3 - "$TMP/p.out" <<'PY'
import re, sys
got = [(int(s), int(j)) for s, j in re.findall(r"rejoining in (\d+)s \(\+(\d+)ms jitter\)", open(sys.argv[1]).read())]
assert [s for s, _ in got[:3]] == [1, 2, 2], got
assert all(0 <= j < s * 500 for s, j in got), got
PY
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "peer.sh refuses a MAX_BACKOFF that is not a positive number of seconds" {
    for bad in 0 -1 x 1.5; do
        MASTER=127.0.0.1:1 MAX_BACKOFF=$bad run timeout 10 "$REPO/scripts/fleet/peer.sh" --workload synthetic
        [ "$status" -eq 2 ]
        [[ "$output" == *"MAX_BACKOFF=$bad is not a number of seconds"* ]]
    done
}

@test "peer.sh does not restart a peer that exited 0 (its run reached --steps)" {
    start_fleet_master
    for i in 1 2; do
        MASTER=127.0.0.1:$PORT "$REPO/scripts/fleet/peer.sh" --workload synthetic --steps 3 > "$TMP/p$i.out" 2>&1 &
        PIDS+=($!)
        P[$i]=$!
    done
    for i in 1 2; do
        run timeout 60 tail --pid="${P[$i]}" -f /dev/null
        [ "$status" -eq 0 ]
        wait "${P[$i]}"
        grep -q 'pccl join exited 0 (the run is over for this peer), not restarting' "$TMP/p$i.out"
        [[ "$(cat "$TMP/p$i.out")" != *"rejoining"* ]]
    done
}
