#include "cli.h"

/* Placeholder until the run command lands; fails loudly rather than pretend. */
int fsgd_cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fsgd_cli_error("run: not available in this build yet");
    return 1;
}
