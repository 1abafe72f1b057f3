/* A producer's account of the rows it wrote into NAME.data: what the
 * aggregator would otherwise learn by reading and parsing the whole topic
 * before step 1 (agg_scan.c). Sent as a `data_summary` event on NAME.ctl,
 * authenticated like every event (KAFKA_FORMAT.md). Private to
 * trainer/distributed/. */
#ifndef FSGD_DIST_DATA_SUMMARY_H
#define FSGD_DIST_DATA_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "fsgd/bus.h"
#include "fsgd/csr.h"
#include "fsgd/dist.h"
#include "fsgd/loss.h"

/* Partitions a summary can describe (the event stays well under a message). */
#define FSGD_SUMMARY_MAX_PARTS 4096

typedef struct fsgd_data_summary {
    uint32_t nparts;
    uint32_t ends[FSGD_SUMMARY_MAX_PARTS];      /* partition p holds offsets [0, ends[p]) */
    uint32_t part_rows[FSGD_SUMMARY_MAX_PARTS]; /* and part_rows[p] rows in them */
    uint32_t block_rows; /* rows a message, but for the last of a partition (which holds the rest) */
    uint64_t rows, max_col; /* rows = the sum of part_rows */
    uint64_t nnz; /* the rows' nonzeros (0: a producer that did not count them) */
    fsgd_label_set_t labels;
    double xmax, ymax; /* largest |feature value| and |label| */
    double xsum;       /* Σ|feature value| (0: a producer that did not sum them) */
} fsgd_data_summary_t;

/* Counts parsed rows into s (max column, labels, value bounds, rows). */
void fsgd_data_summary_add(fsgd_data_summary_t *s, const fsgd_csr_t *rows);

/* Sends s on the job's NAME.ctl. Best effort, as every event. */
int fsgd_data_summary_send(fsgd_bus_client_t *prod, const fsgd_dist_job_t *job, const fsgd_data_summary_t *s);

/* 1 when json (len bytes) is a well-formed data_summary of job's rows
 * (its name, format and hash_bits), parsed into s; 0 otherwise. */
int fsgd_data_summary_parse(const char *json, size_t len, const fsgd_dist_job_t *job, fsgd_data_summary_t *s);

/* Reads the newest authenticated data_summary of job on NAME.ctl (what the
 * topic holds now) into s: 1 found, 0 none (or no job key: an event anyone
 * could write is not trusted for this), < 0 error. c: a consumer client,
 * left unassigned. */
int fsgd_data_summary_read(fsgd_bus_client_t *c, const fsgd_dist_job_t *job, fsgd_data_summary_t *s, char *err,
                           size_t errsz);

#endif
