#include "cli.h"

/* Placeholder until the produce command lands; fails loudly rather than pretend. */
int fsgd_cmd_produce(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fsgd_cli_error("produce: not available in this build yet");
    return 1;
}
