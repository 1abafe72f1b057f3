#include "cli.h"

/* Placeholder until the gen command lands; fails loudly rather than pretend. */
int fsgd_cmd_gen(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fsgd_cli_error("gen: not available in this build yet");
    return 1;
}
