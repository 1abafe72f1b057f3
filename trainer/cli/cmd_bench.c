#include "cli.h"

/* Placeholder until the bench command lands; fails loudly rather than pretend. */
int fsgd_cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fsgd_cli_error("bench: not available in this build yet");
    return 1;
}
