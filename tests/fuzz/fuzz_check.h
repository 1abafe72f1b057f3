/* CHECK(c): a fuzz target's assertion. A false invariant traps, which
 * libFuzzer reports as a crash with the input saved, and which the replay
 * driver (replay_main.c) turns into a failing test. */
#ifndef FSGD_FUZZ_CHECK_H
#define FSGD_FUZZ_CHECK_H

#define CHECK(c)                                                                                          \
    do {                                                                                                  \
        if (!(c))                                                                                         \
            __builtin_trap();                                                                             \
    } while (0)

#endif
