# fish completion for pccl. Commands and flags come from the binary itself
# (`pccl __complete` and `pccl __complete CMD`), so they cannot drift from it.
function __pccl_commands
    pccl __complete 2>/dev/null
end

function __pccl_flags
    set -l words (commandline -opc)
    if test (count $words) -ge 2
        pccl __complete $words[2] 2>/dev/null
    end
end

complete -c pccl -f
complete -c pccl -n '__fish_use_subcommand' -a '(__pccl_commands)'
complete -c pccl -n '__fish_seen_subcommand_from help' -a '(__pccl_commands)'
complete -c pccl -n 'not __fish_use_subcommand; and string match -q -- "-*" (commandline -ct)' -a '(__pccl_flags)'
function __pccl_prev_is
    set -l words (commandline -opc)
    test (count $words) -ge 1; and test "$words[-1]" = "$argv[1]"
end

complete -c pccl -n '__pccl_prev_is --log-level' -a 'error warn info debug'
complete -c pccl -n '__pccl_prev_is --log-format' -a 'text json'
complete -c pccl -n '__pccl_prev_is --workload' -a 'fashion-mnist synthetic'
complete -c pccl -n '__pccl_prev_is --master; or __pccl_prev_is --admin; or __pccl_prev_is --listen; or __pccl_prev_is --connect; or __pccl_prev_is --advertise' -a '(__fish_print_hostnames)'
complete -c pccl -n '__pccl_prev_is --matrix; or __pccl_prev_is --admin-token-file; or __pccl_prev_is --key-file' -F
