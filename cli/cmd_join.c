/* cmd_join.c - `pccl join`: join a run as a peer and run a workload; leave it on SIGTERM/SIGINT; wait for a
 * master that is not there yet (--connect-timeout). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "join.h"
#include "join_notify.h"
#include "pccl_tools.h"
#include "pccl.h"
#include "pccl_ext.h"
#include "pccl_kernels.h"
#include "pccl_leave.h"
#include "pccl_quant.h"
#include "pccl_sparse.h"
#include "mnist.h"
#include "opts/shared.h"

static const cli_flag_t flags[] = {
#include "opts/join.def"
    {0},
};

static int run(int argc, char **argv);

const cli_command_t cli_cmd_join = {
    .name = "join",
    .summary = "join a run as a peer and run a workload (the canonical PCCL training loop)",
    .usage = "--master [--workload] [--steps] [--peer-group] [--json] [OPTIONS]",
    .flags = flags,
    .run = run,
    .help_footer = "\nSIGTERM or SIGINT leaves the run cleanly and exits 0 within about a second in every state (connecting,\n"
                   "waiting for a lost master, in a collective, syncing); a second one ends the process at once.\n"
                   "exit codes: 0 finished, left, or the run was shut down (pccl shutdown), 1 run failed (master lost or\n"
                   "unreachable), 2 usage error, 3 kicked by the master, 4 local configuration error (checked before\n"
                   "contacting the master), 5 wrong synthetic result\n",
};

/* Where on_flag stores the flag values of `pccl join`. */
typedef struct {
    join_opts_t *o;
    ccoip_socket_address_t *master;
    int *have_master;
    const char **key_file;
    const char **p2p_port, **advertise;
    const char **identity_file, **name;
    double *connect_timeout_s; /* -1: not given */
    const char **master_host; /* --master as given: dialled at each of its addresses */
} join_args_t;

static int on_flag(void *ctx, const char *n, const char *arg) {
    const join_args_t *a = ctx;
    join_opts_t *o = a->o;
    const cli_command_t *cmd = &cli_cmd_join;
    uint64_t v = 0;
    int bad = 0;
    if (!strcmp(n, "master")) {
        *a->have_master = 1;
        *a->master_host = arg;
        return cli_parse_addr(cmd, n, arg, CCOIP_PROTOCOL_PORT_MASTER, a->master, JOIN_EXIT_FAILED);
    } else if (!strcmp(n, "key-file")) {
        *a->key_file = arg;
    } else if (!strcmp(n, "identity-file")) {
        *a->identity_file = arg;
    } else if (!strcmp(n, "name")) {
        if (!pcclToolNameValid(arg))
            return cli_usage_error(cmd, "bad --name '%s' (at most 63 printable ASCII characters)", arg);
        *a->name = arg;
    } else if (!strcmp(n, "connect-timeout")) {
        bad = cli_flag_double(cmd, n, arg, a->connect_timeout_s);
    } else if (!strcmp(n, "p2p-port")) {
        bad = cli_flag_u64(cmd, n, arg, &v);
        *a->p2p_port = arg;
    } else if (!strcmp(n, "advertise")) {
        ccoip_socket_address_t adv;
        char err[320];
        *a->advertise = arg;
        pcclResult_t rc = pcclToolParseAddress(arg, 0, PCCL_TOOL_ADDR_ADVERTISED, &adv, err, sizeof err);
        if (rc == pcclInvalidArgument) return cli_usage_error(cmd, "--advertise: %s", err);
        if (rc != pcclSuccess) cli_err("pccl join: --advertise: %s\n", err);
        return rc == pcclSuccess ? 0 : JOIN_EXIT_FAILED;
    } else if (!strcmp(n, "workload")) {
        const cli_flag_t *f = cli_flag_find(cmd, n);
        char names[128];
        if (cli_choice_index(f, arg) < 0)
            return cli_usage_error(cmd, "unknown workload '%s' (%s)", arg, cli_choices_text(f, ", ", names, sizeof names));
        o->workload = arg;
    } else if (!strcmp(n, "steps")) {
        bad = cli_flag_u64(cmd, n, arg, &o->steps);
    } else if (!strcmp(n, "peer-group")) {
        bad = cli_flag_u64(cmd, n, arg, &v);
        o->peer_group = (uint32_t)v;
    } else if (!strcmp(n, "data")) {
        o->data_dir = arg;
    } else if (!strcmp(n, "size")) {
        bad = cli_flag_u64(cmd, n, arg, &o->size_bytes);
    } else if (!strcmp(n, "tensors")) {
        bad = cli_flag_u64(cmd, n, arg, &v);
        o->tensors = (uint32_t)v;
    } else if (!strcmp(n, "pool")) {
        bad = cli_flag_u64(cmd, n, arg, &v);
        o->pool = (uint32_t)v;
    } else if (!strcmp(n, "inner-steps")) {
        bad = cli_flag_u64(cmd, n, arg, &v);
        o->inner_steps = (uint32_t)v;
    } else if (!strcmp(n, "batch")) {
        bad = cli_flag_u64(cmd, n, arg, &v);
        o->batch = (uint32_t)v;
    } else if (!strcmp(n, "inner-lr")) {
        bad = cli_parse_float(arg, &o->inner_lr) || o->inner_lr <= 0;
    } else if (!strcmp(n, "outer-lr")) {
        bad = cli_parse_float(arg, &o->outer_lr) || o->outer_lr <= 0;
    } else if (!strcmp(n, "outer-momentum")) {
        bad = cli_parse_float(arg, &o->outer_momentum) || o->outer_momentum < 0 || o->outer_momentum >= 1;
    } else if (!strcmp(n, "seed")) {
        bad = cli_parse_u64(arg, UINT64_MAX, &o->seed);
    } else if (!strcmp(n, "step-delay")) {
        bad = cli_flag_u64(cmd, n, arg, &v);
        o->step_delay_ms = (uint32_t)v;
    } else if (!strcmp(n, "min-world")) {
        bad = cli_flag_u64(cmd, n, arg, &v);
        o->min_world = (uint32_t)v;
    } else if (!strcmp(n, "max-rejections")) {
        bad = cli_flag_u64(cmd, n, arg, &v);
        o->max_rejections = (uint32_t)v;
    } else if (!strcmp(n, "fragments")) {
        bad = cli_flag_u64(cmd, n, arg, &v);
        o->fragments = (uint32_t)v;
    } else if (!strcmp(n, "overlap-steps")) {
        bad = cli_flag_u64(cmd, n, arg, &v);
        o->overlap_steps = (uint32_t)v;
    } else if (!strcmp(n, "sparsify")) {
        o->sparse_fraction = 0;
        o->sparse_bits = 0;
        if (strcmp(arg, "none") && pcclExtSparseParse(arg, &o->sparse_fraction, &o->sparse_bits) != pcclSuccess)
            return cli_usage_error(cmd, "bad value '%s' for --sparsify (topk:FRACTION or topk:FRACTION:BITS with "
                                   "FRACTION in (0, 1] and BITS 2 or 4, or none)", arg);
    } else if (!strcmp(n, "sparse-decay")) {
        bad = cli_parse_float(arg, &o->sparse_decay) || !(o->sparse_decay >= 0 && o->sparse_decay <= 1);
    } else if (!strcmp(n, "quantize")) {
        if (pccl_quant_parse(arg, &o->quant) != 0)
            return cli_usage_error(cmd, "bad value '%s' for --quantize (minmax:uint8|int8|uint16|uint4|uint2, "
                                   "zero-point-scale:uint8|int8|uint16|float16|uint4|uint2, none)", arg);
    } else if (!strcmp(n, "optimize")) {
        o->optimize = 1;
    } else if (!strcmp(n, "out-of-place")) {
        o->out_of_place = 1;
    } else if (!strcmp(n, "json")) {
        o->json = 1;
    }
    return bad ? CLI_FLAG_BAD : 0;
}

/* PCCL_P2P_PORT and PCCL_ADVERTISE_ADDRESS as the library will read them: a malformed value is a local
 * configuration error (exit 4, not retried by scripts/fleet/peer.sh), a name that does not resolve a failure. */
static int check_env_addresses(void) {
    const char *port = getenv("PCCL_P2P_PORT"), *adv = getenv("PCCL_ADVERTISE_ADDRESS");
    uint64_t v;
    if (port && *port && cli_flag_u64(&cli_cmd_join, "p2p-port", port, &v) != 0) {
        cli_err("pccl join: PCCL_P2P_PORT=%s is not a port (1..65535)\n", port);
        return JOIN_EXIT_CONFIG;
    }
    ccoip_socket_address_t a;
    char err[320];
    pcclResult_t rc = adv && *adv ? pcclToolParseAddress(adv, 0, PCCL_TOOL_ADDR_ADVERTISED, &a, err, sizeof err)
                                  : pcclSuccess;
    if (rc == pcclSuccess) return 0;
    cli_err("pccl join: PCCL_ADVERTISE_ADDRESS: %s\n", err);
    return rc == pcclInvalidArgument ? JOIN_EXIT_CONFIG : JOIN_EXIT_FAILED;
}

/* The exit code of a run that ended for this peer (rc: the workload's), from how it ended. */
static int exit_code(pcclComm_t *comm, const join_opts_t *o, int rc) {
    pcclExtDeparture_t how = pcclExtInRun;
    pcclExtGetDeparture(comm, &how);
    if (rc == JOIN_EXIT_FAILED && how == pcclExtKicked) return JOIN_EXIT_KICKED;
    if (rc == JOIN_EXIT_FAILED && how == pcclExtShutDown) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "event", "shut_down");
        join_emit(o, e);
        cli_err("pccl join: the run was shut down\n");
        return JOIN_EXIT_OK;
    }
    return rc;
}

/* After a stop request (the stop thread left the run): reports the leave; the exit code. A stop is a clean
 * end whatever the run's state was (connecting, between masters, mid-operation), unless the master had
 * kicked this peer before. */
static int left(pcclComm_t *comm, const join_opts_t *o) {
    pcclResult_t r = join_stop_finish();
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "event", "left");
    cJSON_AddBoolToObject(e, "ok", r == pcclSuccess);
    if (r != pcclSuccess) cJSON_AddStringToObject(e, "error", pcclResultString(r));
    join_emit(o, e);
    pcclExtDeparture_t how = pcclExtInRun;
    pcclExtGetDeparture(comm, &how);
    if (how == pcclExtKicked || how == pcclExtShutDown) return exit_code(comm, o, JOIN_EXIT_FAILED);
    return JOIN_EXIT_OK;
}

/* PCCL_CONNECT_RETRY_MS for the library: --connect-timeout, else the environment's, else the reconnect window. */
static void set_connect_retry(double seconds) {
    char ms[32];
    if (seconds >= 0) {
        snprintf(ms, sizeof ms, "%.0f", seconds * 1000.0);
        setenv("PCCL_CONNECT_RETRY_MS", ms, 1);
    } else if (!getenv("PCCL_CONNECT_RETRY_MS")) {
        const char *window = getenv("PCCL_MASTER_RECONNECT_MS");
        setenv("PCCL_CONNECT_RETRY_MS", window && *window ? window : "60000", 1);
    }
}

/* Who this peer is, at the default log level: the operator matches it with `pccl status` and allow-keys. */
static void log_identity(pcclComm_t *comm, const char *identity_file) {
    uint8_t u[16];
    char pk[45];
    pcclExtCommGetIdentity(comm, u, pk);
    char nm[PCCL_TOOL_NAME_MAX + 1];
    pcclToolDefaultName(nm);
    pcclToolLogPlain(PCCL_LOG_INFO,
                   "pccl join: peer %02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x \"%s\", public "
                   "key %s (%s)\n", u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
                   u[13], u[14], u[15], nm, pk, identity_file && *identity_file ? identity_file : "a new identity");
}

/* --fragments, --overlap-steps and --sparsify against --inner-steps, the workload and --quantize; fills in the
 * default overlap. 0 or a usage error. */
static int check_streaming(const cli_command_t *cmd, join_opts_t *o) {
    uint32_t H = o->inner_steps ? o->inner_steps : JOIN_DEFAULT_INNER_STEPS;
    if (o->fragments == 0) o->fragments = JOIN_DEFAULT_FRAGMENTS;
    if ((o->fragments > 1 || o->overlap_steps != UINT32_MAX) && strcmp(o->workload, JOIN_WORKLOAD_FASHION_MNIST))
        return cli_usage_error(cmd, "--fragments and --overlap-steps apply to --workload %s",
                               JOIN_WORKLOAD_FASHION_MNIST);
    if (o->fragments > H)
        return cli_usage_error(cmd, "--fragments %u exceeds --inner-steps %u: each fragment needs its own sync point",
                               o->fragments, H);
    if (o->sparse_fraction > 0 && strcmp(o->workload, JOIN_WORKLOAD_FASHION_MNIST))
        return cli_usage_error(cmd, "--sparsify applies to --workload %s", JOIN_WORKLOAD_FASHION_MNIST);
    if (o->sparse_fraction > 0 && o->quant.algorithm != pcclQuantNone)
        return cli_usage_error(cmd, "--sparsify and --quantize exclude each other (--sparsify topk:FRACTION:BITS "
                               "quantizes the values it keeps)");
    if (o->sparse_decay != 1 && o->sparse_fraction <= 0)
        return cli_usage_error(cmd, "--sparse-decay applies with --sparsify");
    uint32_t gap = H / o->fragments;
    if (o->overlap_steps == UINT32_MAX) o->overlap_steps = o->fragments > 1 ? gap / 2 : 0;
    if (o->overlap_steps >= gap)
        return cli_usage_error(cmd, "--overlap-steps %u must be less than --inner-steps / --fragments = %u",
                               o->overlap_steps, gap);
    return 0;
}

static int run(int argc, char **argv) {
    join_opts_t o = {.quant = {.quantized_datatype = pcclFloat, .algorithm = pcclQuantNone},
                     .workload = JOIN_WORKLOAD_FASHION_MNIST, .steps = JOIN_DEFAULT_STEPS, .peer_group = JOIN_DEFAULT_PEER_GROUP,
                     .size_bytes = JOIN_DEFAULT_SIZE, .tensors = JOIN_DEFAULT_TENSORS, .outer_momentum = -1,
                     .seed = (uint64_t)getpid() * 2654435761u, .max_rejections = JOIN_DEFAULT_MAX_REJECTIONS,
                     .overlap_steps = UINT32_MAX, .sparse_decay = 1};
    ccoip_socket_address_t master = {0};
    int have_master = 0;
    const char *key_file = NULL, *p2p_port = NULL, *advertise = NULL, *identity_file = NULL, *name = NULL;
    const char *master_host = NULL;
    double connect_timeout_s = -1;
    const cli_command_t *cmd = &cli_cmd_join;
    int rc = cli_parse_flags(cmd, argc, argv, on_flag,
                             &(join_args_t){&o, &master, &have_master, &key_file, &p2p_port, &advertise,
                                            &identity_file, &name, &connect_timeout_s, &master_host}, NULL);
    if (rc != CLI_FLAGS_GO_ON) return rc;
    if (!have_master) return cli_usage_error(cmd, "--master HOST:PORT is required");
    if ((rc = check_streaming(cmd, &o)) != 0) return rc;
    if (key_file) {
        /* Checked here for a clear message; the library reads it through the environment. */
        pcclToolKey_t *key;
        char err[320];
        if (pcclToolKeyLoad(key_file, &key, err, sizeof err) != pcclSuccess) {
            cli_err("pccl join: %s\n", err);
            return CLI_EXIT_FAIL;
        }
        pcclToolKeyFree(key);
        setenv("PCCL_KEY_FILE", key_file, 1);
    }
    /* Checked above; the library reads them through the environment, as a program linking it would be told. */
    if (p2p_port) setenv("PCCL_P2P_PORT", p2p_port, 1);
    if (advertise) setenv("PCCL_ADVERTISE_ADDRESS", advertise, 1);
    if ((rc = check_env_addresses()) != 0) return rc;
    /* The identity file is checked (and created) here for a clear message; the library reads it through the
     * environment, as a program linking it would be told. */
    if (!identity_file) identity_file = getenv("PCCL_IDENTITY_FILE");
    if (identity_file && *identity_file) {
        char ierr[320];
        if (pcclToolLoadIdentity(identity_file, NULL, NULL, NULL, ierr, sizeof ierr) != pcclSuccess) {
            cli_err("pccl join: %s\n", ierr);
            return JOIN_EXIT_CONFIG;
        }
        setenv("PCCL_IDENTITY_FILE", identity_file, 1);
    }
    if (name) setenv("PCCL_NAME", name, 1);
    else if (getenv("PCCL_NAME") && !pcclToolNameValid(getenv("PCCL_NAME"))) {
        cli_err("pccl join: PCCL_NAME='%s' is not a name (at most 63 printable ASCII characters)\n", getenv("PCCL_NAME"));
        return JOIN_EXIT_CONFIG;
    }
    set_connect_retry(connect_timeout_s);

    /* Before any other thread starts (the data loader's included), so that only the stop thread takes them. */
    if (join_catch_stop_signals() != 0) {
        cli_err("pccl join: cannot start the signal thread\n");
        return JOIN_EXIT_FAILED;
    }
    /* Everything local is checked before the master hears of this peer. */
    join_data_t data;
    char err[256];
    if (join_load_data(&o, &data, err, sizeof err) != 0) {
        cli_err("pccl join: %s\n", err);
        return JOIN_EXIT_CONFIG;
    }
    pcclInit();
    pcclCommCreateParams_t params = {.master_address = master, .peer_group = o.peer_group,
                                     .p2p_connection_pool_size = o.pool ? o.pool : o.tensors};
    pcclComm_t *comm = NULL;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) {
        cli_err("pccl join: cannot create a communicator\n");
        join_data_free(&data);
        return JOIN_EXIT_FAILED;
    }
    log_identity(comm, identity_file);
    if (pcclExtCommSetMasterHost(comm, master_host) != pcclSuccess) {
        cli_err("pccl join: cannot use --master %s\n", master_host);
        pcclDestroyCommunicator(comm);
        join_data_free(&data);
        return JOIN_EXIT_FAILED;
    }
    /* Watched first, checked second: a stop either sees the communicator (and cancels its connect) or is seen here. */
    join_stop_watch(comm);
    pcclResult_t r = join_stop_requested() ? pcclMasterConnectionFailed : pcclConnect(comm);
    join_notify_t notify = {0};
    if (r == pcclSuccess && !join_stop_requested()) join_notify_start(&notify, comm);
    if (join_stop_requested()) {
        rc = left(comm, &o);
    } else if (r != pcclSuccess) {
        if (r != pcclExtRunShutDown)
            cli_err("pccl join: cannot join the run at %s: %s\n", master_host, pcclResultString(r));
        rc = exit_code(comm, &o, JOIN_EXIT_FAILED);
    } else {
        rc = !strcmp(o.workload, JOIN_WORKLOAD_SYNTHETIC) ? workload_synthetic(comm, &o) : workload_fashion_mnist(comm, &o, &data);
        if (join_stop_requested() && rc != JOIN_EXIT_WRONG) rc = left(comm, &o);
        else rc = exit_code(comm, &o, rc);
        if (rc == JOIN_EXIT_FAILED) cli_err("pccl join: the run ended abnormally (master gone or fatal error)\n");
        if (rc == JOIN_EXIT_KICKED) cli_err("pccl join: the master removed this peer from the run\n");
    }
    join_notify_end(&notify);
    join_stop_watch(NULL); /* after it, a stop request no longer touches the communicator */
    pcclDestroyCommunicator(comm);
    join_data_free(&data);
    return rc;
}
