#!/usr/bin/env bash
# test_systemd_units.sh BIN_DIR - the systemd units `cmake --install` writes (packaging/systemd/): each is
# hardened to an exposure of at most 3.0 in `systemd-analyze security` (the peer with its GPU drop-in too),
# passes `systemd-analyze verify` without a warning, names the installed pccl, is Type=notify with a watchdog and
# spaced restarts, and the master's ExecStart runs as written (a credential for the token, arguments from
# PCCL_MASTER_ARGS), tells the notify socket READY=1 and WATCHDOG=1 as systemd would see them, and stops cleanly on
# SIGTERM. The restart backoff drop-in passes verify on systemd 254 and later; on older ones its two keys, and
# nothing else, are the ones verify does not know.
# systemd-analyze reads unit files offline: no running systemd is needed.
source "$(dirname "$0")/lib.sh"
BUILD=$(cd "$BIN/.." && pwd)
command -v systemd-analyze > /dev/null || fail "systemd-analyze missing (Debian package systemd, scripts/deps.sh)"

PREFIX=$WORK/prefix
cmake --install "$BUILD" --prefix "$PREFIX" > "$WORK/install.log" 2>&1 || fail "cmake --install"
UNITS=$PREFIX/lib/systemd/system
GPU=$PREFIX/share/pccl/systemd/pccl-peer-gpu.conf
BACKOFF=$PREFIX/share/pccl/systemd/pccl-restart-backoff.conf
for f in "$UNITS/pccl-master.service" "$UNITS/pccl-peer@.service" "$GPU" "$BACKOFF"; do
    [ -f "$f" ] || fail "$f not installed"
done
grep -q "^ExecStart=$PREFIX/bin/pccl master " "$UNITS/pccl-master.service" || fail "master unit does not run $PREFIX/bin/pccl"
grep -q "^ExecStart=$PREFIX/bin/pccl join " "$UNITS/pccl-peer@.service" || fail "peer unit does not run $PREFIX/bin/pccl"
# Both are ready when pccl says so, watched, and restarted after a pause (not at once, not forever fast).
for unit in "$UNITS/pccl-master.service" "$UNITS/pccl-peer@.service"; do
    for key in Type=notify NotifyAccess=main 'WatchdogSec=[1-9][0-9]*' 'RestartSec=[1-9][0-9]*' Restart=on-failure; do
        grep -qx "$key" "$unit" || fail "$(basename "$unit"): no $key"
    done
done
grep -qx 'RestartPreventExitStatus=2 4' "$UNITS/pccl-peer@.service" || fail "the peer unit restarts after exit 2 or 4"
# Every flag the units pass is one their command knows (a unit with a stale flag would exit 2 at every start).
for pair in master:pccl-master.service join:pccl-peer@.service; do
    cmd=${pair%%:*}; unit=${pair#*:}
    help=$("$BIN/pccl" "$cmd" --help)
    for flag in $(sed -n 's/^ExecStart=//p' "$UNITS/$unit" | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        grep -q -- "^  $flag\b" <<< "$help" || fail "$unit passes $flag, which pccl $cmd does not know"
    done
done

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

# The backoff drop-in on both units (appended, as above).
for u in pccl-master.service pccl-peer@.service; do
    cat "$UNITS/$u" "$BACKOFF" > "$WORK/gpu/backoff-$u"
done
(cd "$WORK" && systemd-analyze verify --man=no "$WORK/gpu/backoff-pccl-master.service" \
    "$WORK/gpu/backoff-pccl-peer@.service") > "$WORK/verify-backoff.log" 2>&1 \
    || fail "systemd-analyze verify with the backoff drop-in: $(cat "$WORK/verify-backoff.log")"
version=$(systemd-analyze --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p')
[ -n "$version" ] || fail "no systemd version in: $(systemd-analyze --version | head -n 1)"
if [ "$version" -ge 254 ]; then
    [ -s "$WORK/verify-backoff.log" ] && fail "systemd $version: verify warns about the backoff drop-in: $(cat "$WORK/verify-backoff.log")"
else
    unknown=$(grep -c "Unknown key 'Restart\(Steps\|MaxDelaySec\)' in section \[Service\], ignoring" "$WORK/verify-backoff.log")
    [ "$unknown" -eq 4 ] && [ "$(wc -l < "$WORK/verify-backoff.log")" -eq 4 ] \
        || fail "systemd $version: expected only RestartSteps and RestartMaxDelaySec unknown, got: $(cat "$WORK/verify-backoff.log")"
    echo "systemd $version: the backoff drop-in's keys are unknown here (added in 254), nothing else"
fi

# The master's ExecStart as systemd runs it: %d is the credentials directory, $PCCL_MASTER_ARGS is split into
# words (here as /etc/pccl/master.env would set it, on free loopback ports).
mkdir -p "$WORK/cred"
(umask 077; echo s3cret-token-0123456789 > "$WORK/cred/admin.token") # as the master takes it: private, 16+ bytes
exec_start=$(sed -n 's/^ExecStart=//p' "$UNITS/pccl-master.service")
PCCL_MASTER_ARGS="--listen 127.0.0.1:0 --admin 127.0.0.1:0"
exec_start=${exec_start//%d/$WORK/cred}
exec_start=${exec_start//\$PCCL_MASTER_ARGS/$PCCL_MASTER_ARGS}
read -r -a argv <<< "$exec_start"
# As systemd starts a Type=notify unit: NOTIFY_SOCKET, and WATCHDOG_USEC from WatchdogSec (whole seconds).
wd_sec=$(sed -n 's/^WatchdogSec=//p' "$UNITS/pccl-master.service")
python3 "$(dirname "$0")/notify_listener.py" "@pccl-units-$$" "$WORK/notify.log" 120 > /dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 1 400); do grep -q '"bound"' "$WORK/notify.log" 2>/dev/null && break; sleep 0.05; done
grep -q '"bound"' "$WORK/notify.log" 2>/dev/null || fail "the notify listener did not start"
NOTIFY_SOCKET="@pccl-units-$$" WATCHDOG_USEC=$((wd_sec * 1000000)) PCCL_LOG_FORMAT=json "${argv[@]}" \
    > "$WORK/master.log" 2>&1 &
MASTER_PID=$!
PIDS+=("$MASTER_PID")
for _ in $(seq 1 400); do grep -q 'READY=1' "$WORK/notify.log" && break; sleep 0.05; done
grep -q 'READY=1' "$WORK/notify.log" || fail "the master unit's command did not say READY=1: $exec_start"
# The listener probes both ports as soon as READY=1 arrives, then logs the result.
for _ in $(seq 1 200); do grep -q '"probe"' "$WORK/notify.log" && break; sleep 0.05; done
grep -q '"probe": "ok"' "$WORK/notify.log" || fail "READY=1 before the master's ports answered: $(cat "$WORK/notify.log")"
# The first ping comes with the event loop's first tick; the next ones every WatchdogSec/2.
for _ in $(seq 1 100); do grep -q 'WATCHDOG=1' "$WORK/notify.log" && break; sleep 0.05; done
grep -q 'WATCHDOG=1' "$WORK/notify.log" || fail "no WATCHDOG=1 within 5 s of READY=1 (WatchdogSec=$wd_sec)"
kill -TERM "$MASTER_PID"
wait "$MASTER_PID" || fail "the master did not exit 0 on SIGTERM (the unit's KillSignal)"
for _ in $(seq 1 100); do grep -q 'STOPPING=1' "$WORK/notify.log" && break; sleep 0.05; done
grep -q 'STOPPING=1' "$WORK/notify.log" || fail "the master did not say STOPPING=1 on SIGTERM"
echo "systemd units ok"
