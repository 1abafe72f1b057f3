/* A job's topic names (trainer/KAFKA_FORMAT.md), which every role of the
 * job reads and writes: made once, from the job's name. */
#ifndef FSGD_JOB_TOPICS_H
#define FSGD_JOB_TOPICS_H

typedef struct job_topics {
    char data[128], grads[128], model[128], ctl[128], pull[128];
} job_topics_t;

void job_topics_init(job_topics_t *t, const char *job);

#endif
