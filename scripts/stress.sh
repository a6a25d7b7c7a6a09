#!/usr/bin/env bash
# stress.sh [--minutes M] [--seed S] [--peers-max K] [--bin DIR] [orchestrator options...]
# Chaos test of a live run: a `pccl master` and 2..K synthetic `pccl join` peers; one peer is
# SIGKILLed every 500-1000 ms and replaced, at a lower rate one is SIGSTOPped for longer than the
# timeout and one has its network cut (own network namespace, veth taken down). Checks that the
# peers agree on every revision, that the revision keeps advancing, that no peer exits by itself,
# that the master does not grow and exits 0 at the end, and that no process wrote a sanitizer
# report; prints a summary and PASS/FAIL (exit 0/1).
# Default: 2 minutes, seed 1, K = 4, timeout 2000 ms (PCCL_TIMEOUT_MS for peers and master).
# --bin DIR uses DIR/pccl; otherwise builds build/ (./scripts/build.sh build) when needed.
# More options: python3 scripts/stress/orchestrator.py --help. See docs/reliability.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="" args=()
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bin=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done
if [ -z "$bin" ]; then
    "$root/scripts/build.sh" build
    bin="$root/build/bin"
fi
[ -x "$bin/pccl" ] || { echo "stress.sh: no pccl in $bin" >&2; exit 1; }
command -v python3 >/dev/null || { echo "stress.sh: python3 is needed" >&2; exit 1; }
exec python3 "$root/scripts/stress/orchestrator.py" --pccl "$bin/pccl" "${args[@]}"
