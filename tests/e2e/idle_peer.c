/*
 * idle_peer.c - a peer of test_vote_timeout.sh that joins a run and then stops
 * calling the library (its heartbeats go on): a process stuck in its own code.
 * Usage: idle_peer PORT SECONDS. Prints "accepted" once in the run, then
 * sleeps SECONDS. Exit 0, or 1 if it could not join.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "e2e_peer.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: idle_peer PORT SECONDS\n");
        return 2;
    }
    pcclComm_t *comm = e2e_connect(argv[1], 0, 1);
    if (!comm) {
        fprintf(stderr, "cannot join the run\n");
        return 1;
    }
    printf("accepted\n");
    fflush(stdout);
    sleep((unsigned)atoi(argv[2]));
    pcclDestroyCommunicator(comm);
    return 0;
}
