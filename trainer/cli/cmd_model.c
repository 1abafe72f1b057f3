#include "cli.h"

/* Placeholder until the model command lands; fails loudly rather than pretend. */
int fsgd_cmd_model(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fsgd_cli_error("model: not available in this build yet");
    return 1;
}
