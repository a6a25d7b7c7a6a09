/* tinytest.h - the unit tests' runner and assertions.
 *
 * A test file is one executable: main() prepares what every test shares (a log level, a temporary
 * folder), calls RUN_TEST(fn) for each test and ends with TEST_MAIN_END().
 *
 * One process per test (as libuv's runner): each RUN_TEST forks a child that runs setup, the test
 * and teardown, and the parent waits for it with a deadline. A test that hangs past its deadline is
 * killed and one that crashes is reported, with its name; the tests after it still run. Each test
 * starts from the state main() built, never from what an earlier test left. One line per test:
 *     ok   test_name (0.012 s)
 *     FAIL test_name (0.020 s): 2 of 41 checks failed
 *     FAIL test_name (60.0 s): hung past its 60 s deadline, killed
 *     FAIL test_name (0.003 s): killed by signal 11 (Segmentation fault)
 * then a summary; the exit status is 1 when any test failed, 2 when a named test does not exist.
 *
 * The parent forks, so until its last RUN_TEST it must not start threads (fork copies only the
 * calling thread; ThreadSanitizer requires it too; a test forked from a process with threads fails
 * unrun), initialise CUDA or hold a connection a test needs: such things belong in the test or its
 * setup.
 *
 * At file scope, once each:
 *     TT_FIXTURE(setup, teardown);  every test runs as setup(); test(); teardown(); (either may be NULL)
 *     TT_TIMEOUT(seconds);          the deadline of each test (default 60 s; four times that under
 *                                   ASan or TSan, whose builds run several times slower)
 * Environment: TT_TIMEOUT_S=n sets every deadline (a slow machine, a debugger).
 *
 * Debugging: `build/bin/test_x NAME` (or TT_TEST=NAME build/bin/test_x) runs only test NAME, with its
 * fixture, in this process without a fork or a deadline, so a debugger sees it:
 *     gdb --args build/bin/test_msm_accept test_accept_round
 * `build/bin/test_x --list` prints the file's test names.
 *
 * Assertions: CHECK(cond) and CHECK_EQ_U64(a, b) print file:line on failure and the test goes on;
 * a test fails when any of its checks failed. */
#ifndef TINYTEST_H
#define TINYTEST_H
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int tt_failures = 0;
static int tt_checks = 0;

#define CHECK(cond)                                                              \
    do {                                                                         \
        tt_checks++;                                                             \
        if (!(cond)) {                                                           \
            tt_failures++;                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                       \
    do {                                                                         \
        unsigned long long tt_a_ = (unsigned long long)(a), tt_b_ = (unsigned long long)(b); \
        tt_checks++;                                                             \
        if (tt_a_ != tt_b_) {                                                    \
            tt_failures++;                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed: %llu != %llu\n", __FILE__, __LINE__, #a, #b, tt_a_, tt_b_); \
        }                                                                        \
    } while (0)

/* ---------- per-file settings ---------- */

typedef void (*tt_fn_t)(void);
typedef struct {
    tt_fn_t setup, teardown;
} tt_fixture_t;

/* Tentative definitions: TT_FIXTURE and TT_TIMEOUT give them their values; a file without them runs
 * its tests bare, with the default deadline. */
static tt_fixture_t tt_fixture;
static unsigned tt_file_timeout_s;
#define TT_FIXTURE(setup_fn, teardown_fn) static tt_fixture_t tt_fixture = {(setup_fn), (teardown_fn)}
#define TT_TIMEOUT(seconds) static unsigned tt_file_timeout_s = (seconds)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TT_SLOWDOWN 4
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TT_SLOWDOWN 4
#endif
#endif
#ifndef TT_SLOWDOWN
#define TT_SLOWDOWN 1
#endif

/* ---------- the runner ---------- */

typedef struct {
    int tests, failed;    /* tests run, tests failed */
    int matched;          /* a name was asked for and found */
    int listing;          /* --list */
    const char *only;     /* run only this test, in this process */
    char failed_names[1024];
    int inited;
} tt_runner_t;
static tt_runner_t tt_runner;

/* What a child reports back through shared memory: its checks, and that it reached the end. */
typedef struct {
    int checks, failures, finished;
} tt_report_t;

static inline double tt_now_(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The first argument of the command line: read from /proc so that main() keeps its signature and a
 * test file needs no glue to be run by name. */
static inline void tt_init_(void) {
    static char arg[256];
    if (tt_runner.inited) return;
    tt_runner.inited = 1;
    const char *env = getenv("TT_TEST");
    if (env && *env) {
        tt_runner.only = env;
        return;
    }
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f) return;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    size_t first = strlen(buf) + 1; /* past argv[0] */
    if (first >= n) return;
    snprintf(arg, sizeof arg, "%s", buf + first);
    if (strcmp(arg, "--list") == 0) tt_runner.listing = 1;
    else if (arg[0] && arg[0] != '-') tt_runner.only = arg;
}

static inline unsigned tt_deadline_s_(void) {
    const char *env = getenv("TT_TIMEOUT_S");
    if (env && atoi(env) > 0) return (unsigned)atoi(env);
    return (tt_file_timeout_s ? tt_file_timeout_s : 60) * TT_SLOWDOWN;
}

static inline void tt_body_(tt_fn_t fn) {
    if (tt_fixture.setup) tt_fixture.setup();
    fn();
    if (tt_fixture.teardown) tt_fixture.teardown();
}

/* Runs the child to its end or its deadline; returns the wait status, sets *hung when it was killed. */
static inline int tt_wait_(pid_t pid, double deadline, const sigset_t *chld, int *hung) {
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r < 0 && errno != EINTR) return -1;
        double left = deadline - tt_now_();
        if (left <= 0) {
            *hung = 1;
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
            return status;
        }
        struct timespec ts = {.tv_sec = (time_t)left, .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
        sigtimedwait(chld, NULL, &ts); /* a SIGCHLD, a timeout or an interruption: look again */
    }
}

/* Why the child failed, or "" when it passed. */
static inline void tt_verdict_(int status, int hung, unsigned deadline_s, const tt_report_t *rep, char *why, size_t cap) {
    why[0] = 0;
    if (status < 0) snprintf(why, cap, "lost the test process: %s", strerror(errno));
    else if (hung) snprintf(why, cap, "hung past its %u s deadline, killed", deadline_s);
    else if (WIFSIGNALED(status))
        snprintf(why, cap, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (rep->failures) snprintf(why, cap, "%d of %d checks failed", rep->failures, rep->checks);
    else if (WEXITSTATUS(status) != 0) snprintf(why, cap, "exited with status %d", WEXITSTATUS(status));
    else if (!rep->finished) snprintf(why, cap, "exited before its end");
}

static inline void tt_record_(const char *name, double t0, const char *why) {
    tt_runner.tests++;
    if (why[0]) {
        tt_runner.failed++;
        size_t used = strlen(tt_runner.failed_names);
        snprintf(tt_runner.failed_names + used, sizeof tt_runner.failed_names - used, " %s", name);
    }
    fprintf(stderr, "%s %s (%.3f s)%s%s\n", why[0] ? "FAIL" : "ok  ", name, tt_now_() - t0, why[0] ? ": " : "", why);
}

static inline void tt_run_in_process_(const char *name, tt_fn_t fn) {
    int checks = tt_checks, failures = tt_failures;
    double t0 = tt_now_();
    tt_body_(fn);
    char why[128] = "";
    if (tt_failures != failures)
        snprintf(why, sizeof why, "%d of %d checks failed", tt_failures - failures, tt_checks - checks);
    tt_record_(name, t0, why);
}

/* The threads of this process; fork copies only the calling one. */
static inline int tt_threads_(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d) return 1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static inline void tt_run_forked_(const char *name, tt_fn_t fn) {
    int threads = tt_threads_();
    if (threads > 1) { /* its process would hold only the thread that forks */
        char why[128];
        snprintf(why, sizeof why, "not run: main() has %d threads (start them in the test or its setup)", threads);
        tt_record_(name, tt_now_(), why);
        return;
    }
    static tt_report_t *rep;
    if (!rep) {
        rep = mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (rep == MAP_FAILED) {
            perror("tinytest: mmap");
            exit(2);
        }
    }
    memset(rep, 0, sizeof *rep);
    unsigned deadline_s = tt_deadline_s_();
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    fflush(NULL); /* or the child writes the parent's buffered output again */
    double t0 = tt_now_();
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("tinytest: fork");
        exit(2);
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* the runner killed: its tests end too */
        if (getppid() != parent) _exit(2);
        int checks = tt_checks, failures = tt_failures;
        tt_body_(fn);
        rep->checks = tt_checks - checks;
        rep->failures = tt_failures - failures;
        rep->finished = 1;
        exit(rep->failures ? 1 : 0); /* exit, not _exit: sanitizers check leaks at exit */
    }
    int hung = 0;
    int status = tt_wait_(pid, t0 + deadline_s, &chld, &hung);
    sigprocmask(SIG_SETMASK, &old, NULL);
    tt_checks += rep->checks;
    tt_failures += rep->failures;
    char why[160];
    tt_verdict_(status, hung, deadline_s, rep, why, sizeof why);
    tt_record_(name, t0, why);
}

static inline void tt_run_(const char *name, tt_fn_t fn) {
    tt_init_();
    if (tt_runner.listing) {
        printf("%s\n", name);
        return;
    }
    if (tt_runner.only) {
        if (strcmp(tt_runner.only, name) != 0) return;
        tt_runner.matched = 1;
        tt_run_in_process_(name, fn);
        return;
    }
    tt_run_forked_(name, fn);
}

static inline int tt_main_end_(void) {
    tt_init_();
    if (tt_runner.listing) return 0;
    if (tt_runner.only && !tt_runner.matched) {
        fprintf(stderr, "no test named %s in this file (--list names them)\n", tt_runner.only);
        return 2;
    }
    fprintf(stderr, "%d tests, %d failed%s%s; %d checks, %d failed\n", tt_runner.tests, tt_runner.failed,
            tt_runner.failed ? ":" : "", tt_runner.failed_names, tt_checks, tt_failures);
    return tt_runner.failed || tt_failures ? 1 : 0;
}

#define RUN_TEST(fn) tt_run_(#fn, fn)

#define TEST_MAIN_END() return tt_main_end_()

/* libgomp is not built with ThreadSanitizer, so its threads cause false reports:
 * under TSan the OpenMP tests run one thread (the serial/parallel equality is
 * checked in the normal and ASan builds). */
#if defined(__SANITIZE_THREAD__)
#define TT_OMP_THREADS(n) 1
#else
#define TT_OMP_THREADS(n) (n)
#endif
#endif
