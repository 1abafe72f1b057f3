#include "cli.h"

/* Placeholder until the aggregator command lands; fails loudly rather than pretend. */
int fsgd_cmd_aggregator(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fsgd_cli_error("aggregator: not available in this build yet");
    return 1;
}
