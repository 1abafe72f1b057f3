/* A job's topic names (job_topics.h). */
#include "job_topics.h"

#include "fsgd/kbus.h"

void job_topics_init(job_topics_t *t, const char *job)
{
    fsgd_kbus_topic(t->data, sizeof t->data, job, "data");
    fsgd_kbus_topic(t->grads, sizeof t->grads, job, "grads");
    fsgd_kbus_topic(t->model, sizeof t->model, job, "model");
    fsgd_kbus_topic(t->ctl, sizeof t->ctl, job, "ctl");
    fsgd_kbus_topic(t->pull, sizeof t->pull, job, "pull");
}
