#!/usr/bin/env bats
# Observability of a real master with real peers: --log-format json makes every stderr line JSON (master, a
# kicked peer, usage errors), log lines name peers by uuid prefix and address, /metrics passes
# `promtool check metrics` and has the build, process, group, operation-age, collectives by kind, per-peer (info, revision, heartbeat
# age by uuid and name) and refused-connection series; the shipped Prometheus rules pass `promtool check rules`
# and their alerts fire as `promtool test rules` says.
# Helpers (master, peers, http) in admin_helpers.bash.

load admin_helpers

# all_json FILE: every line of FILE is a JSON object with ts, level, component and msg (fails otherwise)
all_json() {
    python3 - "$1" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines, "no lines"
for line in lines:
    o = json.loads(line)
    assert isinstance(o, dict) and {"ts", "level", "component", "msg"} <= o.keys(), line
PY
}

# json_peer NAME: a synthetic peer logging JSON, stdout and stderr apart; appends to PEERS, sets LAST
json_peer() {
    "$PCCL" join --master 127.0.0.1:"$PORT" --workload synthetic --steps 1000000 --step-delay 20 \
        --log-format json --log-level info > "$TMP/$1.out" 2> "$TMP/$1.err" &
    LAST=$!
    PEERS+=("$LAST")
}

@test "--log-format json: every stderr line of the master and of a kicked peer is JSON" {
    make_token "$TMP/token"
    start_master --admin-token-file "$TMP/token" --log-format json --log-level debug
    json_peer a; json_peer b
    wait_accepted 2
    victim=$(http GET /v1/status | cut -d' ' -f2- | python3 -c 'import json,sys; print(json.load(sys.stdin)["peers"][0]["uuid"])')
    run http POST "/v1/peers/$victim/kick" "$TOKEN"
    [ "${output%% *}" = 202 ]
    # the kicked peer's join fails: its last words are on stderr
    for _ in $(seq 1 100); do grep -q "kicking peer ${victim:0:8}" "$TMP/master.err" && break; sleep 0.1; done
    for p in "${PEERS[@]}"; do kill -0 "$p" 2>/dev/null || { wait "$p" || true; }; done
    sleep 0.5
    kill "${PEERS[@]}" 2>/dev/null || true
    kill -INT "$MPID"; wait "$MPID" || true
    all_json "$TMP/master.err"
    all_json "$TMP/a.err"
    all_json "$TMP/b.err"
    # log lines name the peer by uuid prefix, name (the host name here, quoted inside the JSON string) and
    # address, not by connection id
    grep -q "kicking peer ${victim:0:8} \\\\\"$(hostname)\\\\\" (127\.0\.0\.1:[0-9]*): kicked by the operator" "$TMP/master.err"
    grep -q "peer [0-9a-f]\{8\} \\\\\"$(hostname)\\\\\" (127\.0\.0\.1:[0-9]*) registered (group 0)" "$TMP/master.err"
    ! grep -q "peer conn=" "$TMP/master.err"
    # the kicked peer said so, as JSON, through the command's own message too
    cat "$TMP/a.err" "$TMP/b.err" | grep -q '"component":"cli".*pccl join: '
}

@test "--log-format json: usage errors and the master's startup errors are JSON" {
    run "$PCCL" master --log-format json --listen 127.0.0.1:0 --bogus
    [ "$status" -eq 2 ]
    printf '%s\n' "$output" > "$TMP/usage.err"
    all_json "$TMP/usage.err"
    grep -q "unknown option" "$TMP/usage.err"
    PCCL_LOG_FORMAT=json run "$PCCL" master --listen 127.0.0.1:0 --admin-token-file "$TMP/missing"
    [ "$status" -ne 0 ]
    printf '%s\n' "$output" > "$TMP/token.err"
    all_json "$TMP/token.err"
    # text stays text
    run "$PCCL" master --listen 127.0.0.1:0 --bogus
    [[ "${lines[0]}" == "pccl master: unknown option"* ]]
}

@test "/metrics of a master with peers passes promtool check metrics and has the new series" {
    command -v promtool || skip "promtool missing (Debian package prometheus, scripts/deps.sh)"
    start_master
    PCCL_NAME=worker-a start_peer; PCCL_NAME=worker-b start_peer
    wait_accepted 2
    # until the group has a revision and completed collectives
    for _ in $(seq 1 100); do
        http GET /metrics | grep -q '^pccl_group_collectives_completed_total{group="0"} [1-9]' && break; sleep 0.1
    done
    http GET /metrics | sed '1s/^200 //' > "$TMP/metrics"
    run promtool check metrics < "$TMP/metrics"
    echo "$output"
    [ "$status" -eq 0 ]
    grep -q '^pccl_build_info{version="[0-9][^"]*"} 1$' "$TMP/metrics"
    start=$(sed -n 's/^process_start_time_seconds //p' "$TMP/metrics")
    now=$(date +%s)
    python3 -c "import sys; s, n = float(sys.argv[1]), float(sys.argv[2]); assert n - 120 < s <= n + 1" "$start" "$now"
    grep -q '^pccl_group_revision{group="0"} [1-9][0-9]*$' "$TMP/metrics"
    grep -q '^pccl_group_reduced_bytes_total{group="0"} [1-9][0-9]*$' "$TMP/metrics"
    grep -q '^pccl_oldest_operation_age_seconds [0-9.]*$' "$TMP/metrics"
    grep -q '^pccl_group_revision_age_seconds{group="0"} [0-9.]*$' "$TMP/metrics"
    # collectives by kind and result, and their bytes by kind: every kind a series; the synthetic peers all-reduce
    for k in all_reduce broadcast all_gather all_gather_v reduce_scatter barrier; do
        for r in completed aborted rejected; do
            grep -q "^pccl_collective_operations_total{kind=\"$k\",result=\"$r\"} [0-9]*$" "$TMP/metrics" || { echo "no $k $r"; false; }
        done
        grep -q "^pccl_collective_bytes_total{kind=\"$k\"} [0-9]*$" "$TMP/metrics" || { echo "no $k bytes"; false; }
    done
    done_ar=$(sed -n 's/^pccl_collective_operations_total{kind="all_reduce",result="completed"} //p' "$TMP/metrics")
    [ "$done_ar" -gt 0 ]
    [ "$done_ar" = "$(sed -n 's/^pccl_collectives_total{result="completed"} //p' "$TMP/metrics")" ]
    grep -q '^pccl_collective_bytes_total{kind="all_reduce"} [1-9][0-9]*$' "$TMP/metrics"
    grep -q '^pccl_collective_bytes_total{kind="broadcast"} 0$' "$TMP/metrics"
    # completed collectives by algorithm: every one under the algorithm the master chose
    by_algo=0
    for a in ring rhd rd; do
        n=$(sed -n "s/^pccl_collective_algorithm_total{algo=\"$a\"} \([0-9]*\)$/\1/p" "$TMP/metrics")
        [ -n "$n" ] || { echo "no $a series"; false; }
        by_algo=$((by_algo + n))
    done
    [ "$by_algo" = "$done_ar" ]
    # per peer: an info series with its name and address, and its series by uuid and name
    [ "$(grep -c '^pccl_peer_heartbeat_age_seconds{uuid="[0-9a-f]\{32\}",name="worker-[ab]",group="0"} [0-9.]*$' "$TMP/metrics")" -eq 2 ]
    [ "$(grep -c '^pccl_peer_revision{uuid="[0-9a-f]\{32\}",name="worker-[ab]",group="0"} [0-9]*$' "$TMP/metrics")" -eq 2 ]
    [ "$(grep -c '^pccl_peer_info{uuid="[0-9a-f]\{32\}",name="worker-[ab]",address="127\.0\.0\.1:[0-9]*"} 1$' "$TMP/metrics")" -eq 2 ]
    # the conventional process collector series, read from /proc/self
    for m in process_resident_memory_bytes process_virtual_memory_bytes process_cpu_seconds_total process_open_fds \
             process_max_fds process_start_time_seconds; do
        grep -q "^# TYPE $m " "$TMP/metrics" || { echo "no $m"; false; }
    done
    rss=$(sed -n 's/^process_resident_memory_bytes //p' "$TMP/metrics")
    kb=$(awk '/^VmRSS:/ {print $2}' /proc/"$MPID"/status)
    python3 -c "import sys; r, k = int(sys.argv[1]), int(sys.argv[2]) * 1024; assert 0.5 * k < r < 2 * k, (r, k)" "$rss" "$kb"
    fds=$(sed -n 's/^process_open_fds //p' "$TMP/metrics")
    [ "$fds" -ge 5 ] && [ "$fds" -le "$(ls /proc/"$MPID"/fd | wc -l)" ]
    [ "$(sed -n 's/^process_max_fds //p' "$TMP/metrics")" = "$(awk '/^Max open files/ {print $4}' /proc/"$MPID"/limits)" ]
}

@test "/metrics counts protocol refusals apart from kicks" {
    start_master
    # a frame of body length 1 (at least 2: the type) and one of 1 GiB: both malformed, neither a kick
    python3 - "$PORT" <<'PY'
import socket, struct, sys, time
for body in (1, 1 << 30):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    s.sendall(struct.pack(">I", body) + b"\0\0")
    try: s.recv(1)
    except OSError: pass
    s.close()
PY
    for _ in $(seq 1 50); do
        http GET /metrics | grep -q '^pccl_connections_refused_total{reason="malformed"} 2$' && break; sleep 0.1
    done
    run http GET /metrics
    [[ "$output" == *'pccl_connections_refused_total{reason="malformed"} 2'* ]]
    [[ "$output" == *'pccl_connections_refused_total{reason="version"} 0'* ]]
    [[ "$output" == *'pccl_peers_kicked_total 0'* ]]
}

@test "deploy/prometheus: the rules pass promtool check rules and their alerts fire as tested" {
    command -v promtool || skip "promtool missing (Debian package prometheus, scripts/deps.sh)"
    REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
    run promtool check rules "$REPO/deploy/prometheus/pccl-rules.yml"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"SUCCESS"* ]]
    run promtool test rules "$REPO/deploy/prometheus/pccl-rules.test.yml"
    echo "$output"
    [ "$status" -eq 0 ]
    # every alert is exercised by the test file, and the dashboard is valid JSON that queries pccl's series
    for a in $(sed -n 's/^ *- alert: //p' "$REPO/deploy/prometheus/pccl-rules.yml"); do
        grep -q "alertname: $a$" "$REPO/deploy/prometheus/pccl-rules.test.yml" || { echo "untested alert $a"; false; }
    done
    # the dashboard's queries parse: promtool checks them as recording rules ($instance as a regex)
    python3 - "$REPO/deploy/grafana/pccl-dashboard.json" "$TMP/dashboard-rules.yml" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
assert len(exprs) >= 10 and all(re.search(r"\b(pccl_|process_|up\b)", e) for e in exprs), exprs
rules = [{"record": "dashboard:q%d" % i, "expr": e.replace("$instance", ".*")} for i, e in enumerate(exprs)]
json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(sys.argv[2], "w"))
PY
    run promtool check rules "$TMP/dashboard-rules.yml"
    echo "$output"
    [ "$status" -eq 0 ]
}
