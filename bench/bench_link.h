/*
 * bench_link.h - the time of sending BYTES once over one link, next to which bench/wan.sh puts a
 * broadcast (pccl_coll sink / pccl_coll send).
 */
#ifndef PCCL_BENCH_LINK_H
#define PCCL_BENCH_LINK_H

/* argv: "sink IP" (listens on IP, prints "PORT n", reads every connection to its end and answers one
 * byte, until killed) or "send IP PORT STREAMS BYTES REPS" (per repetition: opens STREAMS fresh TCP
 * connections, sends BYTES split evenly over them, and waits for the sink's byte on each; prints
 * "TIMES 0 t0 t1 ..." in seconds). Returns the exit status. */
int link_main(int argc, char **argv);

#endif /* PCCL_BENCH_LINK_H */
