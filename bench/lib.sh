# shellcheck shell=bash disable=SC2034 # the variables set here are used by the scripts that source it
# bench/lib.sh - shared by bench/run.sh and bench/rounds.sh (sourced).

# OpenMPI over TCP on loopback only; ranks oversubscribe the cores and are not pinned.
# shellcheck disable=SC2054 # "tcp,self" is one mca value, not two array elements
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo
        --mca pml ob1 --bind-to none)

# reps_for BYTES REPS: sets r (timed repetitions) and warm (warm-ups) for one run at BYTES; small
# points get many cheap repetitions so their median is not one scheduler hiccup: x10 with 20
# warm-ups up to 1 MiB, x6 with 3 warm-ups up to 16 MiB (5 repetitions of 2 x 16 MiB are 60 ms).
reps_for() {
    r=$2 warm=1
    if [ "$1" -le 1048576 ]; then warm=20; r=$(($2 * 10));
    elif [ "$1" -le 16777216 ]; then warm=3; r=$(($2 * 6)); fi
}
