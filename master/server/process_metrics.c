/*
 * process_metrics.c - the conventional process collector series of a Prometheus client (process_*), read from
 * /proc/self for the master's /metrics: resident and virtual memory, CPU seconds, open and maximum file
 * descriptors. A series whose source cannot be read is left out rather than reported as 0.
 */
#include "server/process_metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/base.h"

/* utime, stime (clock ticks), vsize (bytes) and rss (pages) from /proc/self/stat. @return 0, or -PERR_IO
 * (unreadable, or not the format proc(5) describes). */
static int read_stat(unsigned long long *utime, unsigned long long *stime, unsigned long long *vsize, long long *rss) {
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return -PERR_IO;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* The command name (field 2) may hold spaces and parentheses: fields resume after its last ')'. */
    const char *p = strrchr(buf, ')');
    if (!p) return -PERR_IO;
    /* Fields 3..: state ppid pgrp sid tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
     * priority nice threads itrealvalue starttime vsize rss */
    int got = sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %*u %llu %lld",
                     utime, stime, vsize, rss);
    return got == 4 ? 0 : -PERR_IO;
}

/* Open descriptors of this process. @return the count, or -PERR_IO. */
static long count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -PERR_IO;
    long n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

void process_metrics_write(FILE *f) {
    unsigned long long utime, stime, vsize;
    long long rss;
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    if (read_stat(&utime, &stime, &vsize, &rss) == 0 && ticks > 0 && page > 0) {
        fprintf(f, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
                   "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n",
                (double)(utime + stime) / (double)ticks);
        fprintf(f, "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
                   "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %llu\n", vsize);
        fprintf(f, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                   "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %lld\n",
                rss * (long long)page);
    }
    long fds = count_fds();
    if (fds >= 0)
        fprintf(f, "# HELP process_open_fds Number of open file descriptors.\n"
                   "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n", fds);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        fprintf(f, "# HELP process_max_fds Maximum number of open file descriptors.\n"
                   "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
}
