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
int fsgd_cmd_plot(int argc, char **argv);
int fsgd_cmd_serve(int argc, char **argv);

/* Prints "fsgd: <msg>" to stderr. */
void fsgd_cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Exit statuses of every fsgd command, defined once (fsgd --help prints
 * this table; scripts may rely on the numbers). */
#define FSGD_EXIT_LIST(X)                                                                                     \
    X(OK, 0, "success")                                                                                       \
    X(USAGE, 2, "bad usage: unknown option or bad value, job file error, refused output path or --workers, " \
                "a job name in use")                                                                          \
    X(DATA, 3, "bad input data: malformed rows, wrong or single-class labels, corrupt model or checkpoint")   \
    X(BROKER, 4, "Kafka problem: broker unreachable or timed out, data lost")                                 \
    X(INTERNAL, 70, "internal error: out of memory, exactly-once violated, device failure")                   \
    X(IO, 74, "a file could not be read or written (disk full, permissions)")                                 \
    X(SIGINT, 130, "interrupted by SIGINT (128 + 2); fsgd run stopped every process it started")              \
    X(SIGTERM, 143, "stopped by SIGTERM (128 + 15); fsgd run stopped every process it started")

#define FSGD_EXIT_ENUM_(name, value, desc) FSGD_EXIT_##name = value,
enum { FSGD_EXIT_LIST(FSGD_EXIT_ENUM_) };
#undef FSGD_EXIT_ENUM_

/* Exit status for an fsgd_err_t (0 for FSGD_E_OK): ARG, NOT_BUILT and
 * UNSUPPORTED -> USAGE; PARSE, FORMAT, CRC, VERSION, TRUNCATED, RANGE,
 * NONFINITE, AUTH -> DATA; KAFKA, TIMEOUT, LOST -> BROKER; IO -> IO; the rest
 * -> INTERNAL. */
int fsgd_cli_status(int err);

/* argv[*i] as "NAME value" (then *i moves past the value) or "NAME=value":
 * the value, or NULL when argv[*i] is not NAME; *missing = 1 when NAME is
 * the last word and its value is missing. */
const char *fsgd_cli_opt_value(int argc, char **argv, int *i, const char *name, int *missing);

/* Prints the exit status table (for --help texts). */
void fsgd_cli_print_exit_codes(void *file /* FILE* */);

/* Installs SIGINT/SIGTERM/SIGHUP handlers that remove the temporary output
 * files in flight (fsgd/outfile.h) and then die of the signal as before. */
void fsgd_cli_cleanup_on_signal(void);

/* Checks each non-empty output path with fsgd_outfile_check; prints the
 * error prefixed with what ("train") and returns FSGD_EXIT_USAGE, or 0. */
int fsgd_cli_check_outputs(const char *what, const char *const *paths, int n);

/* A path a command reads or writes, with the option that named it. */
typedef struct {
    const char *opt;  /* "--out", "--data", "job file", ... */
    const char *path; /* NULL, "" and "-" (stdin/stdout) are skipped */
} fsgd_cli_path_t;

/* Refuses a command whose outputs name (fsgd_outfile_same: by identity,
 * not spelling) one of its inputs or another of its outputs: a path
 * mistake must never replace the training data with a model. Prints which
 * options collide and returns FSGD_EXIT_USAGE, or 0. Call before any file
 * is opened for writing. */
int fsgd_cli_check_distinct(const char *what, const fsgd_cli_path_t *outs, int nout, const fsgd_cli_path_t *ins,
                            int nin);

/* 1 when an --out path is a stream, written in place rather than replaced
 * atomically, by name: "-" and /dev/stdout (stdout), /dev/stderr,
 * /dev/fd/N and /dev/null. Other devices and FIFOs stay refused. */
int fsgd_cli_out_is_stream(const char *path);
/* 1 for "-" and /dev/stdout. */
int fsgd_cli_out_is_stdout(const char *path);

/* Runs cmd (a command writing its --out as a file) so that an --out that is
 * a stream (above) works: the command writes a temporary file in $TMPDIR,
 * copied to the stream when it succeeds (nothing is sent when it fails);
 * with stdout as the output, the command's own stdout lines go to stderr. A
 * binary output (binary 1) is refused on a terminal. Other --out values run
 * cmd unchanged. what names the command in errors. Returns cmd's status. */
int fsgd_cli_run_streamed(int (*cmd)(int, char **), int argc, char **argv, const char *what, int binary);
/* The candidate nearest to word (a mistyped command or option), or NULL
 * when none is close enough or two are equally close. */
const char *fsgd_cli_suggest(const char *word, const char *const *cands, unsigned long n);
/* The same over every "--option" of the commands. */
const char *fsgd_cli_suggest_option(const char *word);

/* The name to print for an output path: the stream a temporary file of
 * fsgd_cli_run_streamed stands for ("stdout", "/dev/null"), else path. */
const char *fsgd_cli_out_name(const char *path);

#endif
