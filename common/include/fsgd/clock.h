/* The one clock of fsgd: monotonic time, for durations, deadlines and rates
 * (never for dates: those are CLOCK_REALTIME, read where they are written). */
#ifndef FSGD_CLOCK_H
#define FSGD_CLOCK_H

/* Seconds on CLOCK_MONOTONIC (an arbitrary origin, the same for every thread
 * of the process; only differences mean anything). Thread safe. */
double fsgd_clock_s(void);

/* The same clock in milliseconds. */
double fsgd_clock_ms(void);

#endif
