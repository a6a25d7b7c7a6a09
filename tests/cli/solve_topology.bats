#!/usr/bin/env bats
# `pccl solve-topology`: fixtures with known optimal rings, --json shape,
# malformed matrices (exit 1, message names the problem), bad flags (exit 2).
# PCCL_BIN points at the binary (default build/bin/pccl under the repo root).

bats_require_minimum_version 1.5.0 # run --separate-stderr

setup() {
    REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
    PCCL="${PCCL_BIN:-$REPO/build/bin/pccl}"
    DATA="$REPO/tests/data"
    if [ ! -x "$PCCL" ]; then
        echo "pccl binary not found at $PCCL (set PCCL_BIN)" >&2
        return 1
    fi
}

# Writes stdin to a file in the test's temp dir and prints its path.
fixture() {
    local f="$BATS_TEST_TMPDIR/$1"
    cat > "$f"
    echo "$f"
}

# Runs python assertions on the JSON in $output (bound to `d`).
check_json() {
    printf '%s' "$output" | python3 -c "import json, sys; d = json.load(sys.stdin); $1"
}

# ---- known optimal rings ----

@test "csv: bottleneck beats total time, human output" {
    run --separate-stderr "$PCCL" solve-topology --matrix "$DATA/topology_4.csv"
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "ring: 0 -> 1 -> 2 -> 3 -> 0" ]
    [ "${lines[1]}" = "bottleneck: 500.0 Mbit/s (edge 0->1)" ]
    [[ "${lines[2]}" == "total transfer time: 0.008 s/Mbit"* ]]
    [ "${lines[3]}" = "optimal: yes (exact, n=4)" ]
}

@test "csv --json: shape and values" {
    run --separate-stderr "$PCCL" solve-topology --matrix "$DATA/topology_4.csv" --json
    [ "$status" -eq 0 ]
    check_json '
assert set(d) >= {"ring", "bottleneck_mbps", "total_time", "optimal", "n", "solve_ms"}, d
assert d["ring"] == [0, 1, 2, 3], d
assert all(isinstance(x, int) for x in d["ring"])
assert d["bottleneck_mbps"] == 500
assert abs(d["total_time"] - 0.008) < 1e-12
assert d["total_time_unit"] == "s/Mbit"
assert d["optimal"] is True and d["bottleneck_optimal"] is True
assert d["bottleneck_edge"] == [0, 1]
assert d["n"] == 4
assert isinstance(d["solve_ms"], (int, float)) and d["solve_ms"] >= 0
'
    [ "${#lines[@]}" -eq 1 ]
}

@test "json object with bandwidth_mbps and null diagonal" {
    run --separate-stderr "$PCCL" solve-topology --matrix "$DATA/topology_5.json" --json
    [ "$status" -eq 0 ]
    check_json '
assert d["ring"] == [0, 2, 1, 3, 4], d
assert d["bottleneck_mbps"] == 250
assert abs(d["total_time"] - 0.0085) < 1e-12
assert d["optimal"] is True and d["n"] == 5
'
}

@test "json array of rows with many ties" {
    run --separate-stderr "$PCCL" solve-topology --matrix "$DATA/topology_6_ties.json" --json
    [ "$status" -eq 0 ]
    check_json '
assert d["ring"] == [0, 1, 3, 4, 5, 2], d
assert d["bottleneck_mbps"] == 200
assert abs(d["total_time"] - 0.01375) < 1e-12
assert d["optimal"] is True
'
}

@test "n=24 two clusters: heuristic finds the proven best bottleneck" {
    run --separate-stderr "$PCCL" solve-topology --matrix "$DATA/topology_clusters_24.csv" --time-limit 200 --json
    [ "$status" -eq 0 ]
    check_json '
assert sorted(d["ring"]) == list(range(24)) and d["ring"][0] == 0, d
assert d["n"] == 24
assert d["bottleneck_mbps"] == 4000 and d["bottleneck_edge"] == [20, 3], d
assert d["bottleneck_optimal"] is True and d["bottleneck_bound_mbps"] == 4000
assert d["optimal"] is False
assert 0 < d["total_time"] < 1
assert d["solve_ms"] < 5000
'
}

@test "heuristic human output says what is proven" {
    run --separate-stderr "$PCCL" solve-topology --matrix "$DATA/topology_clusters_24.csv" --time-limit 50
    [ "$status" -eq 0 ]
    [ "${lines[1]}" = "bottleneck: 4000.0 Mbit/s (edge 20->3)" ]
    [[ "${lines[3]}" == "optimal: bottleneck proven optimal; total time not proven (heuristic, n=24"* ]]
}

@test "--time-limit 0: no deadline, deterministic descents" {
    run --separate-stderr "$PCCL" solve-topology --matrix "$DATA/topology_clusters_24.csv" --time-limit 0 --json
    [ "$status" -eq 0 ]
    check_json 'assert d["n"] == 24 and d["bottleneck_mbps"] > 0'
}

@test "format is detected by content, not by file name" {
    f=$(printf '  \n# comment\n0,2\n3,0\n' | fixture matrix.json)
    run --separate-stderr "$PCCL" solve-topology --matrix "$f" --json
    [ "$status" -eq 0 ]
    check_json 'assert d["ring"] == [0, 1] and d["bottleneck_mbps"] == 2'
    f=$(printf '\n   [[0, 7], [5, 0]]\n' | fixture matrix.csv)
    run --separate-stderr "$PCCL" solve-topology --matrix "$f" --json
    [ "$status" -eq 0 ]
    check_json 'assert d["bottleneck_mbps"] == 5 and abs(d["total_time"] - (1/7 + 1/5)) < 1e-12'
}

# ---- malformed matrices: exit 1 ----

@test "ragged csv row names the row and the counts" {
    f=$(printf '0,1,2\n1,0,2\n1,2\n' | fixture ragged.csv)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"ragged.csv:3: row 2 has 2 values, expected 3"* ]]
}

@test "ragged json row" {
    f=$(echo '[[0,1,2],[1,0],[1,2,0]]' | fixture ragged.json)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"row 1 has 2 values, expected 3"* ]]
}

@test "negative value" {
    f=$(printf '0,1,2\n-5,0,2\n1,2,0\n' | fixture neg.csv)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"neg.csv:2: entry [1][0] is negative ('-5')"* ]]
}

@test "negative value in json" {
    f=$(echo '{"bandwidth_mbps": [[0, -1], [1, 0]]}' | fixture neg.json)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"entry [0][1] is negative"* ]]
}

@test "NaN and Inf are rejected with row and column" {
    f=$(printf '0,1,2\n1,0,nan\n1,2,0\n' | fixture nan.csv)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"entry [1][2] is not a finite number ('nan')"* ]]
    f=$(printf '0,inf\n1,0\n' | fixture inf.csv)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"entry [0][1] is not a finite number ('inf')"* ]]
}

@test "non-numeric token" {
    f=$(printf '0,1,2\n1,0,2\n1,abc,0\n' | fixture word.csv)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"entry [2][1] is not a number ('abc')"* ]]
    f=$(echo '[[0, "fast"], [1, 0]]' | fixture word.json)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"entry [0][1] is not a number"* ]]
}

@test "n = 1 is not a ring" {
    f=$(echo '0' | fixture one.csv)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"matrix is 1x1; a ring needs at least 2 peers"* ]]
    f=$(echo '[[0]]' | fixture one.json)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"a ring needs at least 2 peers"* ]]
}

@test "missing file" {
    run "$PCCL" solve-topology --matrix "$BATS_TEST_TMPDIR/does-not-exist.csv"
    [ "$status" -eq 1 ]
    [[ "$output" == *"cannot open '$BATS_TEST_TMPDIR/does-not-exist.csv': No such file or directory"* ]]
}

@test "non-square, empty, invalid JSON, wrong JSON shape" {
    f=$(printf '0,1,2\n1,0,2\n' | fixture wide.csv)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"2 rows of 3 values; the matrix must be square"* ]]
    f=$(printf '# nothing here\n\n' | fixture empty.csv)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"no matrix rows found"* ]]
    f=$(printf '[[0, 1],\n [1, 0]\n' | fixture broken.json)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"invalid JSON near line"* ]]
    f=$(echo '{"bw": [[0, 1], [1, 0]]}' | fixture key.json)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *'no "bandwidth_mbps" member'* ]]
}

@test "no ring avoids unreachable links" {
    f=$(printf '0,100,0\n0,0,100\n0,100,0\n' | fixture cut.csv)
    run "$PCCL" solve-topology --matrix "$f"
    [ "$status" -eq 1 ]
    [[ "$output" == *"no ring avoids unreachable links"* ]]
}

# ---- flags: exit 2 ----

@test "bad flags are usage errors" {
    run "$PCCL" solve-topology --matrix "$DATA/topology_4.csv" --bogus
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown option '--bogus'"* ]]
    run "$PCCL" solve-topology
    [ "$status" -eq 2 ]
    [[ "$output" == *"--matrix FILE is required"* ]]
    run "$PCCL" solve-topology --matrix
    [ "$status" -eq 2 ]
    run "$PCCL" solve-topology --matrix "$DATA/topology_4.csv" --time-limit soon
    [ "$status" -eq 2 ]
    [[ "$output" == *"--time-limit"* ]]
    run "$PCCL" solve-topology --matrix "$DATA/topology_4.csv" --time-limit -5
    [ "$status" -eq 2 ]
    run "$PCCL" solve-topology --matrix "$DATA/topology_4.csv" stray
    [ "$status" -eq 2 ]
}

@test "help and registration" {
    run "$PCCL" solve-topology --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"usage: pccl solve-topology --matrix FILE"* ]]
    run "$PCCL" --help
    [[ "$output" == *"solve-topology"* ]]
    run "$PCCL" __complete solve-topology
    [ "$status" -eq 0 ]
    [[ "$output" == *"--time-limit"* ]]
}
