#include "cli.h"

/* Placeholder until the train command lands; fails loudly rather than pretend. */
int fsgd_cmd_train(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fsgd_cli_error("train: not available in this build yet");
    return 1;
}
