#!/usr/bin/env bats
# Shell completions, generated at build time from the flag tables (`pccl help --completions SHELL`): the build's
# files are that output; the bash function offers every command of `pccl __complete`, every flag of each
# command's table and the values a flag's table entry allows; zsh and fish files name every flag and parse.
# PCCL_BIN points at the binary (default build/bin/pccl under the repo root); its build dir holds the files.

setup() {
    REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
    PCCL=${PCCL_BIN:-$REPO/build/bin/pccl}
    BUILD="$(cd "$(dirname "$PCCL")/.." && pwd)"
    COMPLETIONS="$BUILD/completions"
}

# complete_bash WORD...: runs _pccl with COMP_WORDS=(pccl WORD...) and the cursor on the last word
complete_bash() {
    bash -c '
        source "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
        _pccl
        printf "%s\n" "${COMPREPLY[@]}"
    ' _ "$COMPLETIONS/pccl.bash" "$PCCL" "$@"
}

@test "the build's completion files are what pccl help --completions prints" {
    for pair in bash:pccl.bash zsh:_pccl fish:pccl.fish; do
        [ -f "$COMPLETIONS/${pair#*:}" ] || { echo "no $COMPLETIONS/${pair#*:}"; false; }
        diff <("$PCCL" help --completions "${pair%%:*}") "$COMPLETIONS/${pair#*:}"
    done
    run "$PCCL" help --completions tcsh
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown shell 'tcsh'"* ]]
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
        [ "$(wc -l <<< "$output")" -eq "$("$PCCL" __complete "$cmd" | wc -l)" ] || { echo "$cmd: extra flags"; false; }
    done
    run complete_bash master --
    for f in --listen --admin --no-admin --admin-token-file --log-level --log-format --help; do grep -qx -- "$f" <<< "$output"; done
}

@test "bash: prefixes filter and flag values are offered as the flag table allows them" {
    run complete_bash ma
    [ "$output" = master ]
    run complete_bash status --wa
    [ "$output" = --watch ]
    run complete_bash master --log-level ""
    [ "$output" = "$(printf 'error\nwarn\ninfo\ndebug')" ]
    run complete_bash join --workload ""
    [ "$output" = "$(printf 'fashion-mnist\nsynthetic')" ]
    # the choices --help states are the ones offered
    [[ "$("$PCCL" join --help)" == *"--workload NAME"*"fashion-mnist, synthetic"* ]]
    run complete_bash master --on-signal e
    [ "$output" = end-run ]
    # a FILE flag completes file names, a number nothing
    touch "$BATS_TEST_TMPDIR/key-xyz"
    run complete_bash master --key-file "$BATS_TEST_TMPDIR/key-x"
    [ "$output" = "$BATS_TEST_TMPDIR/key-xyz" ]
    run complete_bash master --vote-timeout ""
    [ -z "$output" ]
}

@test "zsh and fish: every flag of every command, and the files parse" {
    for cmd in $("$PCCL" __complete); do
        [ "$cmd" = help ] && continue
        zline=$(grep -E "^ +$cmd\) flags=\(" "$COMPLETIONS/_pccl")
        for f in $("$PCCL" __complete "$cmd"); do
            grep -qE -- "[( ]$f[ )]" <<< "$zline" || { echo "zsh: $cmd lacks $f"; false; }
            [ "$f" = --help ] && continue
            grep -q -- "__fish_seen_subcommand_from $cmd' -l ${f#--} " "$COMPLETIONS/pccl.fish" || { echo "fish: $cmd lacks $f"; false; }
        done
    done
    # scripts/deps.sh installs both shells
    zsh -n "$COMPLETIONS/_pccl"
    fish -n "$COMPLETIONS/pccl.fish"
    run fish -c 'source $argv[1]; complete -C "pccl join --workload "; complete -C "pccl master --no-a"' "$COMPLETIONS/pccl.fish"
    [ "$(cut -f1 <<< "$output")" = "$(printf 'fashion-mnist\nsynthetic\n--no-admin')" ]
}
