#!/usr/bin/env bats
# Peer identities: `pccl identity FILE` (created 0600, stable, refused when open to others or malformed),
# `pccl join --identity-file` keeps a peer's uuid, and `pccl master --allow-keys FILE` admits only listed keys:
# an unlisted peer is refused, and on SIGHUP a peer whose key was removed is kicked while the others go on.
# Helpers (master, peers, http) in admin_helpers.bash.

load admin_helpers

# status_field NAME FIELD: FIELD of the peer called NAME in /v1/status (empty when absent)
status_field() {
    http GET /v1/status | cut -d' ' -f2- |
        python3 -c 'import json,sys; [print(p[sys.argv[2]]) for p in json.load(sys.stdin)["peers"] if p["name"] == sys.argv[1]]' "$1" "$2"
}

@test "pccl identity creates a private identity file once and prints its key and uuid" {
    run "$PCCL" identity "$TMP/id"
    [ "$status" -eq 0 ]
    [[ "$output" == *"created '$TMP/id'"* ]]
    line=$(grep ' # uuid ' <<< "$output")
    [[ "$line" =~ ^[A-Za-z0-9+/]{43}=\ \#\ uuid\ [0-9a-f]{32}$ ]]
    [ "$(stat -c %a "$TMP/id")" = 600 ]
    run "$PCCL" identity "$TMP/id"
    [ "$status" -eq 0 ]
    [ "$output" = "$line" ] # the same identity, nothing created
    chmod 644 "$TMP/id"
    run "$PCCL" identity "$TMP/id"
    [ "$status" -eq 1 ]
    [[ "$output" == *"accessible by group or others"* ]]
    echo "not a seed" > "$TMP/bad"; chmod 600 "$TMP/bad"
    run "$PCCL" identity "$TMP/bad"
    [ "$status" -eq 1 ]
    [[ "$output" == *"is malformed"* ]]
    run "$PCCL" join --master 127.0.0.1:1 --identity-file "$TMP/bad" --workload synthetic
    [ "$status" -eq 4 ]
    [[ "$output" == *"is malformed"* ]]
    run "$PCCL" identity
    [ "$status" -eq 2 ]
    run "$PCCL" join --master 127.0.0.1:1 --name "$(printf 'a\tb')"
    [ "$status" -eq 2 ]
}

@test "allow-keys: an unlisted peer is refused; SIGHUP kicks a removed key and the others go on" {
    for p in a b c; do "$PCCL" identity "$TMP/$p.id" > "$TMP/$p.pub" 2>/dev/null; done
    { echo "# the run's peers"; cat "$TMP/a.pub"; echo; cat "$TMP/b.pub"; } > "$TMP/allow"
    start_master --allow-keys "$TMP/allow"
    PCCL_NAME=alpha PCCL_IDENTITY_FILE=$TMP/a.id start_peer; A=$LAST
    PCCL_NAME=beta PCCL_IDENTITY_FILE=$TMP/b.id start_peer; B=$LAST
    wait_accepted 2
    # the uuid of a listed peer is the one its identity gives
    [ "$(status_field alpha uuid)" = "$(sed 's/.*# uuid //' "$TMP/a.pub")" ]
    run timeout 30 "$PCCL" join --master 127.0.0.1:"$PORT" --identity-file "$TMP/c.id" --name gamma \
        --workload synthetic --steps 5
    [ "$status" -eq 3 ] # kicked
    [[ "$output" == *"not in the master's allow-keys list"* ]]
    grep -q 'is not in the master.s allow-keys list' "$TMP/master.err"

    # beta's key leaves the list; a line the parser refuses is not there, so the reload takes
    grep -v "$(cut -d' ' -f1 "$TMP/b.pub")" "$TMP/allow" > "$TMP/allow.new"; mv "$TMP/allow.new" "$TMP/allow"
    kill -HUP "$MPID"
    for _ in $(seq 1 100); do kill -0 "$B" 2>/dev/null || break; sleep 0.1; done
    ! kill -0 "$B" 2>/dev/null
    wait "$B" || [ $? -eq 3 ]
    grep -q '"beta" .*removed from the master.s allow-keys list' "$TMP/master.err"
    kill -0 "$A" && kill -0 "$MPID"
    [ "$(status_field alpha phase)" = accepted ]
    [ -z "$(status_field beta phase)" ]

    # a malformed file on SIGHUP keeps the old list: alpha stays
    echo "garbage-key" >> "$TMP/allow"
    kill -HUP "$MPID"
    for _ in $(seq 1 50); do grep -q 'allow-keys not reloaded' "$TMP/master.err" && break; sleep 0.1; done
    grep -q "allow-keys not reloaded, the old list stays: allow-keys file '$TMP/allow' line [0-9]*: not a public key" "$TMP/master.err"
    [ "$(status_field alpha phase)" = accepted ]
}

@test "allow-keys: a missing or malformed file at start is exit 1 with the reason" {
    run timeout 10 "$PCCL" master --listen 127.0.0.1:0 --no-admin --allow-keys "$TMP/none"
    [ "$status" -eq 1 ]
    [[ "$output" == *"cannot open allow-keys file '$TMP/none'"* ]]
    printf '# ok\nAAAA\n' > "$TMP/allow"
    run timeout 10 "$PCCL" master --listen 127.0.0.1:0 --no-admin --allow-keys "$TMP/allow"
    [ "$status" -eq 1 ]
    [[ "$output" == *"line 2: not a public key"* ]]
}

@test "a peer with an identity file keeps its uuid when it joins again" {
    start_master
    PCCL_NAME=delta PCCL_IDENTITY_FILE=$TMP/d.id start_peer; D=$LAST
    PCCL_NAME=echo start_peer
    wait_accepted 2
    first=$(status_field delta uuid)
    [ -n "$first" ]
    kill -9 "$D"; wait "$D" 2>/dev/null || true
    PCCL_NAME=delta PCCL_IDENTITY_FILE=$TMP/d.id start_peer
    wait_accepted 2
    [ "$(status_field delta uuid)" = "$first" ]
    grep -q "pccl join: peer $first \"delta\"" "$TMP/peer0.out" # it says who it is at start
}
