# lib.sh - helpers for end-to-end tests: processes on loopback, every wait
# bounded, every process started here killed by PID on exit.
set -u
BIN=${1:?usage: $0 BIN_DIR}
PCCL="$BIN/pccl"
WORK=$(mktemp -d /tmp/pccl-e2e.XXXXXX)
PIDS=()

cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    if [ "${KEEP_WORK:-0}" = 1 ]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# The control protocol's version (libpccl/src/base/wire.h), for tests that speak it raw.
WIRE_VERSION=$(sed -n 's/^#define WIRE_VERSION \([0-9]*\).*/\1/p' "$(dirname "${BASH_SOURCE[0]}")/../../libpccl/src/base/wire.h")

fail() {
    echo "FAIL: $*" >&2
    for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 15 "$f"; } >&2; done
    exit 1
}

# start_master [FLAGS...]: sets MASTER_PID, PORT and APORT (the admin port); MASTER_LISTEN and MASTER_ADMIN
# (default 127.0.0.1:0) are its addresses
start_master() {
    # emptied here, not by the background job's redirection: a second master must not be read from the first's log
    : > "$WORK/master.log"
    PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-info} "$PCCL" master --listen "${MASTER_LISTEN:-127.0.0.1:0}" \
        --admin "${MASTER_ADMIN:-127.0.0.1:0}" "$@" > "$WORK/master.log" 2>&1 &
    MASTER_PID=$!
    PIDS+=("$MASTER_PID")
    for _ in $(seq 1 100); do
        PORT=$(grep -o 'listening on [^ ]*' "$WORK/master.log" 2>/dev/null | sed 's/.*://')
        # pccl master prints both lines at once
        APORT=$(grep -o 'admin on [^ ]*' "$WORK/master.log" 2>/dev/null | sed 's/.*://')
        [ -n "$PORT" ] && return 0
        sleep 0.05
    done
    fail "master did not start"
}

# start_peer NAME ARGS...: sets LAST_PID; output in $WORK/NAME.log; MASTER_HOST (default 127.0.0.1) is the host
# it dials the master at
start_peer() {
    local name=$1; shift
    "$PCCL" join --master "${MASTER_HOST:-127.0.0.1}:$PORT" --json "$@" > "$WORK/$name.log" 2> "$WORK/$name.err" &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}

# wait_pid PID SECONDS: waits for exit, returns its status, fails on timeout
wait_pid() {
    local pid=$1 limit=$2 i
    for i in $(seq 1 $((limit * 20))); do
        if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; return $?; fi
        sleep 0.05
    done
    fail "process $pid still running after ${limit}s"
}

# count_events FILE EVENT
# Stops PID once an operation commenced (past the first SEEN commence lines of the master's log); if that operation
# is still not completed after the stop, PID is a member that has not reported it done and never will: PID is killed
# inside it (return 0) and the master must abort it. An operation the ring finished before the stop (it can be faster
# than this loop) lets PID go on, and a later one is tried, TRIES times in all (then return 1).
kill_inside_op() { # PID TRIES SEEN
    local pid=$1 tries=$2 seen=$3 op
    for _ in $(seq 1 "$tries"); do
        for _ in $(seq 1 3000); do [ "$(grep -c commenced "$WORK/master.log")" -gt "$seen" ] && break; sleep 0.005; done
        kill -STOP "$pid"
        sleep 0.3
        seen=$(grep -c commenced "$WORK/master.log")
        op=$(grep commenced "$WORK/master.log" | tail -n 1 | sed -E 's/.*commenced: ([a-z_]+, )?op ([0-9]+),.*/\2/')
        [[ "$op" =~ ^[0-9]+$ ]] || fail "the master's log names no operation in: $op"
        if ! grep -q "completed: op $op\$" "$WORK/master.log"; then kill -9 "$pid"; return 0; fi
        echo "op $op completed before the stop; the peer goes on"
        kill -CONT "$pid"
    done
    return 1
}

count_events() { grep -c "\"event\":\"$2\"" "$1" 2>/dev/null || true; }

# wait_events FILE EVENT N SECONDS
wait_events() {
    local i
    for i in $(seq 1 $(($4 * 20))); do
        [ "$(count_events "$1" "$2")" -ge "$3" ] && return 0
        sleep 0.05
    done
    fail "$1: fewer than $3 '$2' events after $4 s"
}

# json_field FILE EVENT FIELD: value of FIELD in the last EVENT line
json_field() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, sys
val = None
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith('{'): continue
    o = json.loads(line)
    if o.get('event') == sys.argv[2] and sys.argv[3] in o: val = o[sys.argv[3]]
print('' if val is None else (str(val).lower() if isinstance(val, bool) else val))
PY
}

# same_state NAME...: the peers' step logs agree on the hash of every revision two of them logged, and
# all of them logged the last revision of the first to leave (peers told to leave at once may do so a
# step apart, each at a revision the others also hold)
same_state() {
    python3 - "$WORK" "$@" <<'PY' || fail "peers disagree on the shared state: $*"
import json, sys
work, names = sys.argv[1], sys.argv[2:]
revs = {}
for n in names:
    revs[n] = {}
    for line in open(f"{work}/{n}.log"):
        if line.startswith('{'):
            o = json.loads(line)
            if o.get('event') == 'step': revs[n][o['revision']] = o['hash']
    if not revs[n]: sys.exit(f"{n} logged no step")
last = min(max(r) for r in revs.values())
for n in names:
    if last not in revs[n]: sys.exit(f"{n} has no revision {last}")
for n in names[1:]:
    for r in revs[n].keys() & revs[names[0]].keys():
        if revs[n][r] != revs[names[0]][r]: sys.exit(f"{n} and {names[0]} differ at revision {r}")
PY
}

# sum_field FILE EVENT FIELD: sum over all EVENT lines
sum_field() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, sys
s = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith('{'):
        o = json.loads(line)
        if o.get('event') == sys.argv[2]: s += o.get(sys.argv[3], 0)
print(int(s))
PY
}

# rev_of NAME: the last revision restart_peer.c printed to $WORK/NAME.log ("revision R world W")
rev_of() { grep -o '^revision [0-9]*' "$WORK/$1.log" 2>/dev/null | tail -1 | cut -d' ' -f2; }

# wait_rev NAME REV SECONDS: until NAME printed revision REV or later
wait_rev() {
    for _ in $(seq 1 $(($3 * 20))); do
        r=$(rev_of "$1"); [ -n "$r" ] && [ "$r" -ge "$2" ] && return 0; sleep 0.05
    done
    fail "$1 did not reach revision $2"
}

# rebuild_without_peer2: while peer 2 of pids is stopped, a new master on $PORT (log master2.log) rebuilds
# the run from the other two, which take 10 more steps; then peer 2 resumes and all three must finish
rebuild_without_peer2() {
    local stopped_at
    stopped_at=$(rev_of peer2)
    PCCL_LOG_LEVEL=info "$PCCL" master --listen "127.0.0.1:$PORT" --admin 127.0.0.1:0 > "$WORK/master2.log" 2>&1 &
    MASTER_PID=$!; PIDS+=("$MASTER_PID")
    # The rebuild waits MSM_REBUILD_MS for stopped peer 2; sanitizers on a loaded machine may take several times that.
    for _ in $(seq 1 600); do grep -q "rebuilt run from 2 peers" "$WORK/master2.log" && break; sleep 0.05; done
    grep -q "rebuilt run from 2 peers" "$WORK/master2.log" ||
        fail "the new master did not rebuild from the 2 running peers; peer 0: $(tail -n 4 "$WORK/peer0.err");" \
             "peer 1: $(tail -n 4 "$WORK/peer1.err")"
    wait_rev peer0 $((stopped_at + 10)) 60
    kill -CONT "${pids[2]}"
    for i in 0 1 2; do wait_pid "${pids[$i]}" 120 || fail "peer $i failed: $(tail -3 "$WORK/peer$i.err")"; done
}

# start_restart_peers N END: N restart_peer.c processes (peer0..), running to revision END; sets pids
start_restart_peers() {
    pids=()
    for r in $(seq 0 $(($1 - 1))); do
        PCCL_LOG_LEVEL=info "$BIN/restart_peer" "$PORT" "$2" 15 > "$WORK/peer$r.log" 2> "$WORK/peer$r.err" &
        pids+=($!); PIDS+=($!)
    done
}
