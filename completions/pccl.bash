# bash completion for pccl. Commands and flags come from the binary itself
# (`pccl __complete` and `pccl __complete CMD`), so they cannot drift from it.
_pccl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local bin=${COMP_WORDS[0]}
    COMPREPLY=()
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$("$bin" __complete 2>/dev/null) --help --version" -- "$cur"))
        return 0
    fi
    local cmd=${COMP_WORDS[1]}
    if [ "$cmd" = help ]; then
        [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "$("$bin" __complete 2>/dev/null)" -- "$cur"))
        return 0
    fi
    case $prev in
        --matrix|--admin-token-file|--key-file|--file|--out|--output) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
        --log-level) COMPREPLY=($(compgen -W "error warn info debug" -- "$cur")); return 0 ;;
        --log-format) COMPREPLY=($(compgen -W "text json" -- "$cur")); return 0 ;;
        --workload) COMPREPLY=($(compgen -W "fashion-mnist synthetic" -- "$cur")); return 0 ;;
        # HOST:PORT flags: the host part (names from /etc/hosts and the like); the port is typed
        --master|--admin|--listen|--connect|--advertise) COMPREPLY=($(compgen -A hostname -- "$cur")); return 0 ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$("$bin" __complete "$cmd" 2>/dev/null)" -- "$cur"))
    fi
    return 0
}
complete -o default -F _pccl pccl
