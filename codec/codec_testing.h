/* Private to codec/ and its tests (the Makefile's PRIVATE_codec): what an
 * encoder is and what it last sent, for tests that check messages against
 * the wire format. No other module needs them. */
#ifndef FSGD_CODEC_TESTING_H
#define FSGD_CODEC_TESTING_H

#include "fsgd/codec.h"
#include "fsgd/downlink.h"
#include "fsgd/sparse.h"

/* Wire id of the codec (FORMAT.md), never renumbered. */
int fsgd_codec_id(const fsgd_codec_t *c);

/* What the last encode sent, decoded: the update every worker adds (owned by
 * d, valid until the next encode). */
const fsgd_sparse_t *fsgd_downlink_last(const fsgd_downlink_t *d);

#endif
