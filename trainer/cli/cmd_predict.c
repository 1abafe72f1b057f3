#include "cli.h"

/* Placeholder until the predict command lands; fails loudly rather than pretend. */
int fsgd_cmd_predict(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fsgd_cli_error("predict: not available in this build yet");
    return 1;
}
