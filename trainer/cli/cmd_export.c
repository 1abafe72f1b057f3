#include "cli.h"

/* Placeholder until the export command lands; fails loudly rather than pretend. */
int fsgd_cmd_export(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fsgd_cli_error("export: not available in this build yet");
    return 1;
}
