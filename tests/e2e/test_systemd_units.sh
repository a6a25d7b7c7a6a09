#!/usr/bin/env bash
# test_systemd_units.sh BIN_DIR - the systemd units `cmake --install` writes (packaging/systemd/): each is
# hardened to an exposure of at most 3.0 in `systemd-analyze security` (the peer with its GPU drop-in too),
# passes `systemd-analyze verify` without a warning, names the installed pccl, and the master's ExecStart
# runs as written (a credential for the token, arguments from PCCL_MASTER_ARGS) and stops cleanly on SIGTERM.
# systemd-analyze reads unit files offline: no running systemd is needed.
source "$(dirname "$0")/lib.sh"
BUILD=$(cd "$BIN/.." && pwd)
command -v systemd-analyze > /dev/null || fail "systemd-analyze missing (Debian package systemd, scripts/deps.sh)"

PREFIX=$WORK/prefix
cmake --install "$BUILD" --prefix "$PREFIX" > "$WORK/install.log" 2>&1 || fail "cmake --install"
UNITS=$PREFIX/lib/systemd/system
GPU=$PREFIX/share/pccl/systemd/pccl-peer-gpu.conf
for f in "$UNITS/pccl-master.service" "$UNITS/pccl-peer@.service" "$GPU"; do
    [ -f "$f" ] || fail "$f not installed"
done
grep -q "^ExecStart=$PREFIX/bin/pccl master " "$UNITS/pccl-master.service" || fail "master unit does not run $PREFIX/bin/pccl"
grep -q "^ExecStart=$PREFIX/bin/pccl join " "$UNITS/pccl-peer@.service" || fail "peer unit does not run $PREFIX/bin/pccl"

# A drop-in's settings come after the unit's: the same as appending it to the unit file.
mkdir -p "$WORK/gpu"
cat "$UNITS/pccl-peer@.service" "$GPU" > "$WORK/gpu/pccl-gpu-peer@.service"
for unit in "$UNITS/pccl-master.service" "$UNITS/pccl-peer@.service" "$WORK/gpu/pccl-gpu-peer@.service"; do
    name=$(basename "$unit")
    (cd "$WORK" && systemd-analyze security --offline=true --threshold=30 "$unit") > "$WORK/$name.security" 2>&1 \
        || fail "$name: exposure above 3.0: $(tail -n 1 "$WORK/$name.security")"
    score=$(sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p' "$WORK/$name.security")
    [ -n "$score" ] || fail "$name: no exposure level in: $(tail -n 3 "$WORK/$name.security")"
    awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' || fail "$name: exposure $score"
    echo "$name: exposure $score"
done
# A unit that is not hardened is refused by the same check (the threshold works).
printf '[Service]\nExecStart=%s --version\n' "$PREFIX/bin/pccl" > "$WORK/bare.service"
(cd "$WORK" && systemd-analyze security --offline=true --threshold=30 "$WORK/bare.service") > /dev/null 2>&1 \
    && fail "systemd-analyze security --threshold=30 accepts an unhardened unit"

(cd "$WORK" && systemd-analyze verify --man=no "$UNITS/pccl-master.service" "$UNITS/pccl-peer@.service" \
    "$WORK/gpu/pccl-gpu-peer@.service") > "$WORK/verify.log" 2>&1 || fail "systemd-analyze verify: $(cat "$WORK/verify.log")"
[ -s "$WORK/verify.log" ] && fail "systemd-analyze verify warns: $(cat "$WORK/verify.log")"

# The master's ExecStart as systemd runs it: %d is the credentials directory, $PCCL_MASTER_ARGS is split into
# words (here as /etc/pccl/master.env would set it, on free loopback ports).
mkdir -p "$WORK/cred"
(umask 077; echo s3cret-token-0123456789 > "$WORK/cred/admin.token") # as the master takes it: private, 16+ bytes
exec_start=$(sed -n 's/^ExecStart=//p' "$UNITS/pccl-master.service")
PCCL_MASTER_ARGS="--listen 127.0.0.1:0 --admin 127.0.0.1:0"
exec_start=${exec_start//%d/$WORK/cred}
exec_start=${exec_start//\$PCCL_MASTER_ARGS/$PCCL_MASTER_ARGS}
read -r -a argv <<< "$exec_start"
PCCL_LOG_FORMAT=json "${argv[@]}" > "$WORK/master.log" 2>&1 &
MASTER_PID=$!
PIDS+=("$MASTER_PID")
for _ in $(seq 1 100); do grep -q 'listening on' "$WORK/master.log" && break; sleep 0.05; done
grep -q 'listening on' "$WORK/master.log" || fail "the master unit's command did not start: $exec_start"
kill -TERM "$MASTER_PID"
wait "$MASTER_PID" || fail "the master did not exit 0 on SIGTERM (the unit's KillSignal)"
echo "systemd units ok"
