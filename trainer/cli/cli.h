/* The fsgd command line: one binary, one function per subcommand
 * (trainer/cli/cmd_<name>.c). Each takes argc/argv after the subcommand
 * name (argv[0] is the subcommand) and returns the process exit status. */
#ifndef FSGD_CLI_H
#define FSGD_CLI_H

int fsgd_cmd_train(int argc, char **argv);
int fsgd_cmd_predict(int argc, char **argv);
int fsgd_cmd_export(int argc, char **argv);
int fsgd_cmd_gen(int argc, char **argv);
int fsgd_cmd_bench(int argc, char **argv);
int fsgd_cmd_produce(int argc, char **argv);
int fsgd_cmd_worker(int argc, char **argv);
int fsgd_cmd_aggregator(int argc, char **argv);
int fsgd_cmd_run(int argc, char **argv);
int fsgd_cmd_model(int argc, char **argv);

/* Prints "fsgd: <msg>" to stderr. */
void fsgd_cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Exit status for an fsgd_err_t: 0 ok, 2 usage/argument/parse errors,
 * 1 anything else. */
int fsgd_cli_status(int err);

#endif
