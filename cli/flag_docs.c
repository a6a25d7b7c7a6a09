/*
 * flag_docs.c - everything written about the flags, from their one description (cli_flag_t, cli/opts/CMD.def):
 * --help (its usage line from synopsis.c), the man pages' OPTIONS entries (`pccl help --man CMD`, spliced into man/pccl-CMD.1.scd by the build)
 * and the shell completions (`pccl help --completions bash|zsh|fish`, written into the build by CMake).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

void cli_flag_value(const cli_flag_t *f, char *out, size_t cap) {
    out[0] = 0;
    if (f->metavar) snprintf(out, cap, "%s", f->metavar);
    else if (f->choices) cli_choices_text(f, "|", out, cap);
}

/* "--name METAVAR" as --help's left column shows it. */
static void flag_left(const cli_flag_t *f, char *out, size_t cap) {
    char meta[160];
    cli_flag_value(f, meta, sizeof meta);
    if (!meta[0]) snprintf(out, cap, "--%s", f->name);
    else snprintf(out, cap, f->optional_value ? "--%s [%s]" : "--%s %s", f->name, meta);
}

/* The help line: the text, the choices when a metavar stands for them, then "(default D; env E)". */
static void flag_help_line(const cli_flag_t *f) {
    char choices[256] = "";
    if (f->choices && f->metavar) cli_choices_text(f, ", ", choices, sizeof choices);
    printf("%s%s%s", f->help, choices[0] ? ": " : "", choices);
    char range[96];
    const char *parts[3] = {cli_flag_range(f, range, sizeof range), f->def, f->env};
    static const char *const label[3] = {"", "default ", "env "};
    for (int i = 0, n = 0; i < 3; i++)
        if (parts[i] && parts[i][0]) printf("%s%s%s", n++ ? "; " : " (", label[i], parts[i]);
    printf(f->max > 0 || f->def || f->env ? ")\n" : "\n");
}

void cli_print_help(const cli_command_t *cmd) {
    char usage[2048];
    if (cli_synopsis(cmd, usage, sizeof usage) != 0) snprintf(usage, sizeof usage, "%s", cmd->usage);
    printf("usage: pccl %s %s\n\n%s\n", cmd->name, usage, cmd->summary);
    if (cmd->alias) printf("(also: pccl %s)\n", cmd->alias);
    printf("\noptions:\n");
    for (const cli_flag_t *f = cmd->flags; f && f->name; f++) {
        char left[192];
        flag_left(f, left, sizeof left);
        printf("  %-28s ", left);
        flag_help_line(f);
    }
    printf("  %-28s %s\n", "-h, --help", "show this help");
}

/* text, each line indented by a tab (blank lines stay blank), as scdoc wants an entry's body. */
static void man_indented(const char *text) {
    while (*text) {
        size_t n = strcspn(text, "\n");
        if (n) printf("\t%.*s", (int)n, text);
        printf("\n");
        text += n + (text[n] == '\n');
    }
}

void cli_print_man_options(const cli_command_t *cmd) {
    for (const cli_flag_t *f = cmd->flags; f && f->name; f++) {
        printf("*--%s*", f->name);
        char meta[160] = "";
        if (f->choices && !f->metavar) printf(" %s", cli_choices_text(f, "|", meta, sizeof meta));
        else if (f->metavar) printf(f->optional_value ? " [_%s_]" : " _%s_", f->metavar);
        printf("\n");
        if (f->man) {
            man_indented(f->man);
        } else {
            /* The help line as a sentence; "synthetic: ..." names a workload and stays as it is. */
            size_t word = strcspn(f->help, " ");
            int upper = f->help[0] >= 'a' && f->help[0] <= 'z' && f->help[word ? word - 1 : 0] != ':';
            printf("\t%c%s.\n", upper ? f->help[0] - 'a' + 'A' : f->help[0], f->help + 1);
        }
        for (int i = 0; f->choices && f->choices[i].name; i++)
            printf(f->choices[i].doc ? "%s*%s*: %s%s" : "%s*%s*%s%s", i ? "" : "\t", f->choices[i].name,
                   f->choices[i].doc ? f->choices[i].doc : "", f->choices[i + 1].name ? "; " : ".\n");
        char range[96];
        if (f->max > 0 || f->def || f->env) {
            printf("\t");
            if (f->max > 0) printf("Values: %s.%s", cli_flag_range(f, range, sizeof range), f->def || f->env ? " " : "");
            if (f->def) printf("Default: %s.%s", f->def, f->env ? " " : "");
            if (f->env) printf("Environment: *%s*.", f->env);
            printf("\n");
        }
        printf("\n");
    }
    printf("*-h*, *--help*\n\tShow the options and exit 0.\n");
}

/* ---- shell completions ---- */

static void all_commands(const char *sep) {
    for (size_t i = 0; i < cli_num_commands; i++) printf("%s%s", i ? sep : "", cli_commands[i]->name);
    printf("%shelp", sep);
}

/* What a shell runs to complete the value of a FILE, DIR, HOST and CHOICE flag (%s: the choices). */
typedef struct {
    const char *file, *dir, *host, *choice;
} shell_values_t;

static const shell_values_t bash_values = {
    "COMPREPLY=($(compgen -f -- \"$cur\")); return 0",
    "COMPREPLY=($(compgen -d -- \"$cur\")); return 0",
    "COMPREPLY=($(compgen -A hostname -- \"$cur\")); return 0",
    "COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return 0",
};
static const shell_values_t zsh_values = {"_files; return", "_files -/; return", "_hosts -S :; return",
                                          "compadd %s; return"};

/* One case arm "CMD:--FLAG) ACTION ;;" per flag whose value the shell completes. */
static void value_arms(const shell_values_t *sh) {
    for (size_t i = 0; i < cli_num_commands; i++) {
        for (const cli_flag_t *f = cli_commands[i]->flags; f && f->name; f++) {
            const char *act = f->arg == CLI_FILE ? sh->file : f->arg == CLI_DIR ? sh->dir
                              : f->arg == CLI_HOST ? sh->host : f->arg == CLI_CHOICE ? sh->choice : NULL;
            if (!act) continue;
            char words[256];
            printf("        %s:--%s) ", cli_commands[i]->name, f->name);
            printf(act, cli_choices_text(f, " ", words, sizeof words));
            printf(" ;;\n");
        }
    }
}

/* One case arm per command that sets the shell variable flags to its flags: flags=OPEN--a --b --helpCLOSE. */
static void flag_lists(char open, char close) {
    for (size_t i = 0; i < cli_num_commands; i++) {
        printf("        %s) flags=%c", cli_commands[i]->name, open);
        for (const cli_flag_t *f = cli_commands[i]->flags; f && f->name; f++) printf("--%s ", f->name);
        printf("--help%c ;;\n", close);
    }
}

static void print_bash(void) {
    printf("# bash completion for pccl, generated by `pccl help --completions bash` from its flag tables.\n"
           "_pccl() {\n"
           "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
           "    local cmds=\"");
    all_commands(" ");
    printf("\"\n"
           "    COMPREPLY=()\n"
           "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
           "        COMPREPLY=($(compgen -W \"$cmds --help --version\" -- \"$cur\"))\n"
           "        return 0\n"
           "    fi\n"
           "    local cmd=${COMP_WORDS[1]}\n"
           "    if [ \"$cmd\" = help ]; then\n"
           "        [ \"$COMP_CWORD\" -eq 2 ] && COMPREPLY=($(compgen -W \"$cmds\" -- \"$cur\"))\n"
           "        return 0\n"
           "    fi\n"
           "    case $cmd:$prev in\n");
    value_arms(&bash_values);
    printf("    esac\n"
           "    [[ $cur == -* ]] || return 0\n"
           "    local flags=\n"
           "    case $cmd in\n");
    flag_lists('"', '"');
    printf("    esac\n"
           "    COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
           "    return 0\n"
           "}\n"
           "complete -o default -F _pccl pccl\n");
}

static void print_zsh(void) {
    printf("#compdef pccl\n"
           "# zsh completion for pccl, generated by `pccl help --completions zsh` from its flag tables.\n"
           "_pccl() {\n"
           "    local -a cmds\n"
           "    cmds=(");
    all_commands(" ");
    printf(")\n"
           "    if (( CURRENT == 2 )); then\n"
           "        compadd -a cmds\n"
           "        compadd -- --help --version\n"
           "        return\n"
           "    fi\n"
           "    local cmd=${words[2]}\n"
           "    if [[ $cmd == help ]]; then\n"
           "        (( CURRENT == 3 )) && compadd -a cmds\n"
           "        return\n"
           "    fi\n"
           "    case $cmd:${words[CURRENT-1]} in\n");
    value_arms(&zsh_values);
    printf("    esac\n"
           "    if [[ ${words[CURRENT]} != -* ]]; then\n"
           "        _files\n"
           "        return\n"
           "    fi\n"
           "    local -a flags\n"
           "    case $cmd in\n");
    flag_lists('(', ')');
    printf("    esac\n"
           "    compadd -a flags\n"
           "}\n"
           "_pccl \"$@\"\n");
}

/* s inside fish's single quotes. */
static void fish_quoted(const char *s) {
    putchar('\'');
    for (; *s; s++) {
        if (*s == '\'' || *s == '\\') putchar('\\');
        putchar(*s);
    }
    putchar('\'');
}

static void print_fish(void) {
    printf("# fish completion for pccl, generated by `pccl help --completions fish` from its flag tables.\n"
           "complete -c pccl -f\n");
    for (size_t i = 0; i < cli_num_commands; i++) {
        printf("complete -c pccl -n '__fish_use_subcommand' -a %s -d ", cli_commands[i]->name);
        fish_quoted(cli_commands[i]->summary);
        printf("\n");
    }
    printf("complete -c pccl -n '__fish_use_subcommand' -a help -d 'show help for COMMAND'\n"
           "complete -c pccl -n '__fish_use_subcommand' -l help -l version\n"
           "complete -c pccl -n '__fish_seen_subcommand_from help' -a '");
    all_commands(" ");
    printf("'\n");
    for (size_t i = 0; i < cli_num_commands; i++) {
        const cli_command_t *cmd = cli_commands[i];
        for (const cli_flag_t *f = cmd->flags; f && f->name; f++) {
            char words[256];
            printf("complete -c pccl -n '__fish_seen_subcommand_from %s' -l %s", cmd->name, f->name);
            if (f->arg == CLI_FILE || f->arg == CLI_DIR) printf(" -r -F");
            else if (f->arg == CLI_HOST) printf(" -x -a '(__fish_print_hostnames)'");
            else if (f->arg == CLI_CHOICE) printf(" -x -a '%s'", cli_choices_text(f, " ", words, sizeof words));
            else if (f->arg != CLI_SWITCH && !f->optional_value) printf(" -x");
            printf(" -d ");
            fish_quoted(f->help);
            printf("\n");
        }
        printf("complete -c pccl -n '__fish_seen_subcommand_from %s' -s h -l help -d 'show this help'\n", cmd->name);
    }
}

int cli_print_completions(const char *shell) {
    if (strcmp(shell, "bash") == 0) print_bash();
    else if (strcmp(shell, "zsh") == 0) print_zsh();
    else if (strcmp(shell, "fish") == 0) print_fish();
    else return -1;
    return 0;
}
