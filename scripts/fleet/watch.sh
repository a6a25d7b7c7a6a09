#!/usr/bin/env bash
# watch.sh - polls `pccl status` and reacts to its exit code:
#   0 healthy   -> nothing to do
#   3 master unreachable -> after UNREACHABLE_LIMIT polls in a row, run ON_DOWN
#   4 run stalled        -> kick the peers holding up the oldest operation
#                           (needs the admin token), then keep watching
#   5 no progress, 6 no peers -> nothing to do (no operation to unblock)
# Environment:
#   PCCL               the pccl binary (default: pccl on PATH)
#   ADMIN              admin port (default 127.0.0.1:48152)
#   TOKEN_FILE         admin token (default ./pccl-admin.token)
#   INTERVAL           seconds between polls (default 10)
#   STALL_AFTER        seconds an operation may take (default 120)
#   UNREACHABLE_LIMIT  polls (default 3)
#   ON_DOWN            command run when the master stays down (default: just log)
set -uo pipefail
PCCL=${PCCL:-pccl}
ADMIN=${ADMIN:-127.0.0.1:48152}
TOKEN_FILE=${TOKEN_FILE:-./pccl-admin.token}
INTERVAL=${INTERVAL:-10}
STALL_AFTER=${STALL_AFTER:-120}
UNREACHABLE_LIMIT=${UNREACHABLE_LIMIT:-3}
ON_DOWN=${ON_DOWN:-}
down=0

log() { echo "$(date -u +%FT%TZ) watch.sh: $*" >&2; }

# Peers that are silent longest are the likely culprits of a stall (a hung or
# preempted machine whose TCP connection is still open): kick the slowest one.
kick_slowest() {
    local json uuid
    json=$("$PCCL" status --admin "$ADMIN" --json --stall-after "$STALL_AFTER") 
    uuid=$(python3 -c 'import json,sys
s = json.load(sys.stdin)
peers = sorted(s["peers"], key=lambda p: -p["last_heartbeat_ms_ago"])
print(peers[0]["uuid"] if peers else "")' <<< "$json")
    [ -z "$uuid" ] && return
    log "run stalled; kicking the most silent peer $uuid"
    curl -fsS -m 5 -X POST -H "Authorization: Bearer $(cat "$TOKEN_FILE")" \
        "http://$ADMIN/v1/peers/$uuid/kick" > /dev/null || log "kick failed"
}

while :; do
    "$PCCL" status --admin "$ADMIN" --stall-after "$STALL_AFTER" > /dev/null 2>&1
    case $? in
        0) down=0 ;;
        3)
            down=$((down + 1))
            log "master unreachable ($down/$UNREACHABLE_LIMIT)"
            if [ "$down" -ge "$UNREACHABLE_LIMIT" ]; then
                [ -n "$ON_DOWN" ] && { log "running: $ON_DOWN"; bash -c "$ON_DOWN"; }
                down=0
            fi
            ;;
        4) down=0; kick_slowest ;;
        5 | 6) down=0 ;; # no progress without a stuck operation, or no peers yet: nobody to kick
        *) log "pccl status failed unexpectedly"; exit 1 ;;
    esac
    sleep "$INTERVAL"
done
