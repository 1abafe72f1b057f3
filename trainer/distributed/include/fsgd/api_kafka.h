/* The bindings' API (as fsgd/api.h: opaque handles, no struct layouts) for
 * a job's Kafka topics: what the Python package reads of a running or
 * finished job without the CLI. */
#ifndef FSGD_API_KAFKA_H
#define FSGD_API_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/model.h"

/* The newest model of job `name` on brokers ("host:port,..."), rebuilt from
 * its topic NAME.model as fsgd model assemble rebuilds it: a new handle
 * *out (fsgd_api_model_free) and its step in *step (may be NULL).
 * settings: "key=value" lines (NULL: none): job_key_file=PATH (the job's
 * key: only messages with its tag are taken; a job of fsgd run is
 * authenticated), partial=1 (also a job still running: its newest model so
 * far), connect_timeout_ms=N (default 15000), and Kafka client settings
 * (security.*, sasl.*, ssl.*, fsgd_kbus_options_add). Returns 0, or an
 * fsgd error with err set (FSGD_E_KAFKA when the brokers cannot be read,
 * FSGD_E_ARG for a setting). */
int fsgd_api_model_from_topic(const char *brokers, const char *name, const char *settings, fsgd_model_t **out,
                              uint64_t *step, char *err, size_t errsz);

#endif
