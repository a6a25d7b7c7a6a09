#!/usr/bin/env bats
# scripts/demo.sh with bad settings: the peers exit at once with a usage error, and the demo must stop at once
# (not wait for progress that never comes) and show the peer's message.

setup() {
    PCCL=${PCCL_BIN:-$BATS_TEST_DIRNAME/../../build/bin/pccl}
    DEMO=$BATS_TEST_DIRNAME/../../scripts/demo.sh
}

@test "demo.sh stops within seconds and shows the peer's error when QUANTIZE is bogus" {
    start=$(date +%s)
    BIN=$(dirname "$PCCL") QUANTIZE=bogus run timeout 30 "$DEMO"
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ]
    [ $(($(date +%s) - start)) -lt 20 ]
    [[ "$output" == *"bad value 'bogus' for --quantize"* ]]
}

@test "demo.sh passes FRAGMENTS and SPARSIFY on: the peers' usage errors come back at once" {
    BIN=$(dirname "$PCCL") FRAGMENTS=40 INNER=10 run timeout 30 "$DEMO"
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ]
    [[ "$output" == *"--fragments 40 exceeds --inner-steps 10"* ]]
    BIN=$(dirname "$PCCL") SPARSIFY=topk:1.5 run timeout 30 "$DEMO"
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ]
    [[ "$output" == *"--sparsify"* ]]
}

@test "demo.sh refuses a FRAGMENTS that is no number" {
    BIN=$(dirname "$PCCL") FRAGMENTS=four run timeout 30 "$DEMO"
    [ "$status" -eq 2 ]
    [[ "$output" == *"FRAGMENTS must be a positive number"* ]]
}
