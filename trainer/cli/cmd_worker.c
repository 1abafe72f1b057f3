#include "cli.h"

/* Placeholder until the worker command lands; fails loudly rather than pretend. */
int fsgd_cmd_worker(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fsgd_cli_error("worker: not available in this build yet");
    return 1;
}
