/* flags.c - the getopt_long loop every subcommand shares, so usage errors read the same everywhere. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "pccl_tools.h"

/* getopt_long options from flags, plus --help as 'h'; out holds 64 entries. */
static void longopts(const cli_flag_t *flags, struct option *out) {
    int n = 0;
    for (; flags && flags[n].name && n < 62; n++) {
        out[n].name = flags[n].name;
        out[n].has_arg = flags[n].arg == CLI_SWITCH   ? no_argument
                         : flags[n].optional_value ? optional_argument
                                                   : required_argument;
        out[n].flag = NULL;
        out[n].val = 0;
    }
    out[n++] = (struct option){"help", no_argument, NULL, 'h'};
    out[n] = (struct option){0, 0, 0, 0};
}

/* --log-level / --log-format; 0 if applied, CLI_EXIT_USAGE on a bad value, -1 if not a log flag. */
static int apply_log_flag(const cli_command_t *cmd, const char *name, const char *value) {
    const cli_flag_t *f = cli_flag_find(cmd, name);
    char choices[64];
    if (strcmp(name, "log-level") == 0) {
        pcclLogLevel_t l;
        if (pcclToolLogParseLevel(value, &l) != pcclSuccess)
            return cli_usage_error(cmd, "unknown log level '%s' (%s)", value,
                                   cli_choices_text(f, ", ", choices, sizeof choices));
        pcclToolLogSetLevel(l);
        return 0;
    }
    if (strcmp(name, "log-format") == 0) {
        if (cli_choice_index(f, value) < 0)
            return cli_usage_error(cmd, "unknown log format '%s' (%s)", value,
                                   cli_choices_text(f, ", ", choices, sizeof choices));
        pcclToolLogSetJson(strcmp(value, "json") == 0);
        return 0;
    }
    return -1;
}

void cli_early_log_format(int argc, char **argv) {
    static const char flag[] = "--log-format";
    const size_t n = sizeof flag - 1;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) return;
        if (strncmp(argv[i], flag, n) != 0) continue;
        const char *value = argv[i][n] == '=' ? argv[i] + n + 1 : argv[i][n] == 0 ? argv[i + 1] : NULL;
        /* A bad value is reported by the command's own parse. */
        if (value && (strcmp(value, "json") == 0 || strcmp(value, "text") == 0))
            pcclToolLogSetJson(strcmp(value, "json") == 0);
    }
}

/* Usage error for an unknown option, with the closest flag of the table when one is near. */
static int unknown_option(const cli_command_t *cmd, const struct option *opts, const char *arg) {
    if (optopt) return cli_usage_error(cmd, "unknown option '-%c'", optopt);
    const char *word = arg + strspn(arg, "-");
    for (const cli_renamed_t *r = cmd->renamed; r && r->old; r++)
        if (strlen(r->old) == strcspn(word, "=") && strncmp(word, r->old, strlen(r->old)) == 0)
            return cli_usage_error(cmd, "--%s is no option of this command: %s", r->old, r->hint);
    const char *names[64];
    size_t n = 0;
    for (; opts[n].name; n++) names[n] = opts[n].name;
    const char *near = cli_suggest(word, strcspn(word, "="), names, n);
    if (near) return cli_usage_error(cmd, "unknown option '%s' (did you mean '--%s'?)", arg, near);
    return cli_usage_error(cmd, "unknown option '%s'", arg);
}

const cli_flag_t *cli_flag_find(const cli_command_t *cmd, const char *name) {
    for (const cli_flag_t *f = cmd->flags; f && f->name; f++)
        if (strcmp(f->name, name) == 0) return f;
    return NULL;
}

int cli_flag_u64(const cli_command_t *cmd, const char *name, const char *value, uint64_t *out) {
    const cli_flag_t *f = cli_flag_find(cmd, name);
    uint64_t v;
    if (!f || cli_parse_u64(value, f->max > 0 ? (uint64_t)f->max : UINT64_MAX, &v) != 0 || (double)v < f->min)
        return -1;
    *out = v;
    return 0;
}

int cli_flag_double(const cli_command_t *cmd, const char *name, const char *value, double *out) {
    const cli_flag_t *f = cli_flag_find(cmd, name);
    return f && f->max > 0 ? cli_parse_double(value, f->min, f->max, out) : -1;
}

const char *cli_flag_range(const cli_flag_t *f, char *out, size_t cap) {
    if (f->max > 0) snprintf(out, cap, "%.15g to %.15g", f->min, f->max);
    else if (cap) out[0] = 0;
    return out;
}

int cli_choice_index(const cli_flag_t *f, const char *value) {
    for (int i = 0; f && f->choices && f->choices[i].name; i++)
        if (strcmp(f->choices[i].name, value) == 0) return i;
    return -1;
}

const char *cli_choices_text(const cli_flag_t *f, const char *sep, char *out, size_t cap) {
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; f && f->choices && f->choices[i].name && len < cap; i++) {
        int n = snprintf(out + len, cap - len, "%s%s", i ? sep : "", f->choices[i].name);
        if (n < 0) break;
        len += (size_t)n;
    }
    return out;
}

int cli_parse_flags(const cli_command_t *cmd, int argc, char **argv, cli_on_flag_fn on_flag, void *ctx,
                    int *first_positional) {
    struct option opts[64];
    longopts(cmd->flags, opts);
    int seen[64] = {0};
    optind = 1;
    opterr = 0; /* our own messages, with the usage hint */
    int c, idx;
    while ((c = getopt_long(argc, argv, ":h", opts, &idx)) != -1) {
        if (c == 'h') {
            cli_print_help(cmd);
            if (cmd->help_footer) printf("%s", cmd->help_footer);
            return CLI_EXIT_OK;
        }
        if (c == ':') return cli_usage_error(cmd, "option '%s' needs a value", argv[optind - 1]);
        if (c == '?') return unknown_option(cmd, opts, argv[optind - 1]);
        const char *name = opts[idx].name, *value = optarg;
        /* A second value of a single-value flag would silently replace the first: refused, so that a
         * command line means one thing. */
        if (opts[idx].has_arg != no_argument && seen[idx]++ && !cmd->flags[idx].repeatable)
            return cli_usage_error(cmd, "--%s given twice (it takes one value)", name);
        /* "--watch 5" as well as "--watch=5": an optional value may be the next word when that is a number. */
        if (!value && opts[idx].has_arg == optional_argument && optind < argc && argv[optind][0] >= '0' &&
            argv[optind][0] <= '9')
            value = argv[optind++];
        int rc = apply_log_flag(cmd, name, value);
        if (rc < 0) rc = on_flag(ctx, name, value);
        if (rc == CLI_FLAG_BAD) return cli_usage_error(cmd, "bad value '%s' for --%s", value, name);
        if (rc != 0) return rc;
    }
    if (first_positional) *first_positional = optind;
    else if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    return CLI_FLAGS_GO_ON;
}
