/* The file names of a job's shards (fsgd/ckpt_set.h): one rule for the
 * checkpoint set, the aggregator's metrics and the CLI's output checks. A
 * file of its own: the aggregator writes by it and the set reads
 * checkpoints through the aggregator's reader. */
#include <stdio.h>

#include "fsgd/ckpt_set.h"

int fsgd_ckpt_set_path(const char *base, unsigned shard, int prev, char *out, size_t cap)
{
    return shard ? snprintf(out, cap, "%s.shard%u%s", base, shard, prev ? ".prev" : "")
                 : snprintf(out, cap, "%s%s", base, prev ? ".prev" : "");
}
