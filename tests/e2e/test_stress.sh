#!/usr/bin/env bash
# test_stress.sh BIN_DIR - the chaos stress test (scripts/stress.sh) as a ctest: a run with peers
# SIGKILLed every 500-1000 ms, SIGSTOPped and cut off the network (when network namespaces are
# usable, i.e. as root) must keep consistent hashes, keep advancing, lose no peer by itself and
# keep the master's memory flat; the master itself is SIGKILLed and restarted every 30-60 s
# (--master-kills), and the peers must live through it. Fails on any criterion. Every all-reduce sends by splice
# (PCCL_ZEROCOPY_MIN_BYTES=0; the steps are 2 MiB, below the default threshold), so peers killed
# in the middle of spliced sends are covered; the sanitizer runs of scripts/stress.sh keep the
# default and cover the copying path.
# PCCL_STRESS_MINUTES (default 2), PCCL_STRESS_SEED (default 1), PCCL_STRESS_PEERS_MAX (default 4);
# PCCL_STRESS_MINUTES=0 skips the test.
set -u
BIN=${1:?usage: $0 BIN_DIR}
minutes=${PCCL_STRESS_MINUTES:-2}
if [ "$minutes" = 0 ]; then echo "skipped (PCCL_STRESS_MINUTES=0)"; exit 0; fi
export PCCL_ZEROCOPY_MIN_BYTES=${PCCL_ZEROCOPY_MIN_BYTES:-0}
exec "$(dirname "$0")/../../scripts/stress.sh" --bin "$BIN" --minutes "$minutes" \
    --seed "${PCCL_STRESS_SEED:-1}" --peers-max "${PCCL_STRESS_PEERS_MAX:-4}" --master-kills
