/* process_metrics.h - the process_* series of the master's /metrics (process_metrics.c). */
#ifndef PCCL_PROCESS_METRICS_H
#define PCCL_PROCESS_METRICS_H

#include <stdio.h>

/* Writes process_cpu_seconds_total, process_virtual_memory_bytes, process_resident_memory_bytes,
 * process_open_fds and process_max_fds (with HELP and TYPE) to f. */
void process_metrics_write(FILE *f);

#endif
