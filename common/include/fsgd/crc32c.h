/* CRC32C (Castagnoli), the checksum of every fsgd message and file. */
#ifndef FSGD_CRC32C_H
#define FSGD_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends crc (0 to start) over len bytes of data. Pure, thread safe.
 * fsgd_crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t fsgd_crc32c(uint32_t crc, const void *data, size_t len);

#endif
