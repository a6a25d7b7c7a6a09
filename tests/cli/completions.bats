#!/usr/bin/env bats
# Shell completions: the bash function offers every command of `pccl __complete`
# and every flag of each command's table; zsh and fish files parse.
# PCCL_BIN points at the binary (default build/bin/pccl under the repo root).

setup() {
    REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
    PCCL=${PCCL_BIN:-$REPO/build/bin/pccl}
}

# complete_bash WORD...: runs _pccl with COMP_WORDS=(pccl WORD...) and the cursor on the last word
complete_bash() {
    bash -c '
        source "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
        _pccl
        printf "%s\n" "${COMPREPLY[@]}"
    ' _ "$REPO/completions/pccl.bash" "$PCCL" "$@"
}

@test "bash: 'pccl ' offers every command" {
    run complete_bash ""
    [ "$status" -eq 0 ]
    cmds=$("$PCCL" __complete)
    [ -n "$cmds" ]
    for c in $cmds master join status solve-topology; do grep -qx -- "$c" <<< "$output"; done
}

@test "bash: 'pccl CMD --' offers every flag of the command's table" {
    for cmd in $("$PCCL" __complete); do
        [ "$cmd" = help ] && continue
        run complete_bash "$cmd" --
        [ "$status" -eq 0 ]
        for f in $("$PCCL" __complete "$cmd"); do grep -qx -- "$f" <<< "$output" || { echo "missing $cmd $f"; false; }; done
    done
    run complete_bash master --
    for f in --listen --admin --no-admin --admin-token-file --log-level --log-format --help; do grep -qx -- "$f" <<< "$output"; done
}

@test "bash: prefixes filter and flag values are offered" {
    run complete_bash ma
    [ "$output" = master ]
    run complete_bash status --wa
    [ "$output" = --watch ]
    run complete_bash master --log-level ""
    [[ "$output" == *debug* ]]
}

@test "zsh and fish completion files parse" {
    # scripts/deps.sh installs both shells
    zsh -n "$REPO/completions/_pccl"
    fish -n "$REPO/completions/pccl.fish"
}
