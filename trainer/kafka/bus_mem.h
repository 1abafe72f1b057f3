/* The in-memory bus (bus_mem.c), private to trainer/kafka/ and the tests
 * the Makefile's PRIVATE_trainer/kafka list names: the roles' tests run a
 * whole job on it, without a broker, with faults injected. Nothing outside
 * the tests makes one. */
#ifndef FSGD_BUS_MEM_H
#define FSGD_BUS_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/bus.h"

/* One process: topics are growable logs, consumer groups assign partitions
 * round-robin over their members in join order (deterministic). Thread
 * safe. */
fsgd_bus_t *fsgd_bus_mem_new(void);

/* Makes topic with partitions (an existing one is kept). 0 or FSGD_E_NOMEM. */
int fsgd_bus_mem_topic(fsgd_bus_t *b, const char *topic, int partitions);

/* Fault hooks. The hook sees every message produced (before it is stored)
 * and says what happens to it. */
typedef enum fsgd_bus_fault {
    FSGD_BUS_DELIVER = 0,
    FSGD_BUS_DROP = 1,      /* never stored */
    FSGD_BUS_DUPLICATE = 2, /* stored twice (a retried produce) */
    FSGD_BUS_DELAY = 3,     /* stored after *delay_ms (later messages may pass it) */
} fsgd_bus_fault_t;
typedef fsgd_bus_fault_t (*fsgd_bus_hook_fn)(void *ctx, const char *topic, int32_t partition, const void *val,
                                             size_t len, int *delay_ms);
/* Sets the hook (NULL: deliver everything). Called with the bus locked: it
 * must not call the bus. */
void fsgd_bus_mem_set_hook(fsgd_bus_t *b, fsgd_bus_hook_fn fn, void *ctx);

/* A bus that shares b's topics and groups, whose clients are tagged member
 * (fsgd_bus_mem_kill). Destroy it with fsgd_bus_destroy before b. */
fsgd_bus_t *fsgd_bus_mem_view(fsgd_bus_t *b, int member);

/* Kills every client of the views of member, as a crashed process: what it
 * sends from now on is lost, it reads nothing more, and its consumer-group
 * memberships end after session_ms (the group's session timeout). */
void fsgd_bus_mem_kill(fsgd_bus_t *b, int member, int session_ms);

/* Drops the messages of partition before offset, as retention would (a
 * reader there gets FSGD_BUS_LOST). */
void fsgd_bus_mem_truncate(fsgd_bus_t *b, const char *topic, int32_t partition, int64_t offset);

#endif
