# admin_helpers.bash - a real master with its admin port and synthetic peers for the bats files that talk to
# the admin port (status.bats, kick.bats): setup/teardown kill every process they started by PID.
# PCCL_BIN points at the binary (default build/bin/pccl under the repo root).
# HTTP requests use python3's urllib (always installed with the test deps).

setup() {
    PCCL=${PCCL_BIN:-$BATS_TEST_DIRNAME/../../build/bin/pccl}
    TMP=$(mktemp -d)
    PEERS=()
    TOKEN=s3cret-token-0123456789 # make_token's default
}

# make_token FILE [TEXT]: an admin token file as the master and the admin commands accept it (private, 16+ bytes)
make_token() {
    (umask 077; echo "${2:-$TOKEN}" > "$1")
}

teardown() {
    for p in "${PEERS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    if [ -n "${MPID:-}" ]; then kill -9 "$MPID" 2>/dev/null || true; fi
    for p in "${PEERS[@]}" ${MPID:-}; do wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}

# start_master [ARGS...]: sets MPID, PORT (control) and APORT (admin); MASTER_LISTEN and MASTER_ADMIN (default
# 127.0.0.1:0) are its addresses
start_master() {
    : > "$TMP/master.out" # a second master must not be read from the first's output
    "$PCCL" master --listen "${MASTER_LISTEN:-127.0.0.1:0}" --admin "${MASTER_ADMIN:-127.0.0.1:0}" "$@" \
        > "$TMP/master.out" 2> "$TMP/master.err" &
    MPID=$!
    for _ in $(seq 1 100); do
        PORT=$(grep -o 'listening on [^ ]*' "$TMP/master.out" 2>/dev/null | sed 's/.*://')
        APORT=$(grep -o 'admin on [^ ]*' "$TMP/master.out" 2>/dev/null | sed 's/.*://')
        [ -n "$PORT" ] && [ -n "$APORT" ] && return 0
        sleep 0.05
    done
    return 1
}

# start_peer: a synthetic peer that runs until killed; appends to PEERS, sets LAST
start_peer() {
    "$PCCL" join --master 127.0.0.1:"$PORT" --workload synthetic --steps 1000000 --step-delay 20 \
        > "$TMP/peer$#.out" 2>&1 &
    LAST=$!
    PEERS+=("$LAST")
}

# http METHOD PATH [TOKEN [HOST]]: prints "CODE BODY"; HOST replaces the Host header
http() {
    python3 - "$1" "http://127.0.0.1:$APORT$2" "${3:-}" "${4:-}" <<'PY'
import sys, urllib.request, urllib.error
method, url, token, host = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
if token: req.add_header("Authorization", "Bearer " + token)
if host: req.add_header("Host", host)
try:
    with urllib.request.urlopen(req, timeout=5) as r: print(r.status, r.read().decode())
except urllib.error.HTTPError as e: print(e.code, e.read().decode())
PY
}

# wait_accepted N: until the status shows N accepted peers (10 s)
wait_accepted() {
    for _ in $(seq 1 100); do
        n=$("$PCCL" status --admin 127.0.0.1:"$APORT" --json 2>/dev/null |
            python3 -c 'import json,sys; print(sum(p["phase"]=="accepted" for p in json.load(sys.stdin)["peers"]))' 2>/dev/null)
        [ "${n:-0}" -eq "$1" ] && return 0
        sleep 0.1
    done
    return 1
}
