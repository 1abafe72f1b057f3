/* Transparent huge pages for the model-sized arrays (θ, Adam's or FTRL's
 * per-key state, a worker's replica). A sparse step touches its keys at
 * random over arrays of 64-256 MB at 2^24 keys: with 4 KiB pages each key
 * is a TLB miss and, the first time, a page fault (two, when the page was
 * read before it was written: the zero page, then a copy-on-write fault).
 * The aggregator spent a third of its step there (perf, bd4a7c3). 2 MiB
 * pages make the faults 512 times fewer and the TLB reach 512 times wider.
 * Random keys touch every 4 KiB page of such arrays anyway, so the resident
 * size ends the same. */
#ifndef FSGD_HUGEPAGES_H
#define FSGD_HUGEPAGES_H

#include <stddef.h>

/* Arrays smaller than this are left alone (a huge page would be most of them). */
#define FSGD_HUGEPAGES_MIN ((size_t)4 << 20)

/* Asks the kernel to back the whole 2 MiB-aligned pages inside
 * [p, p + bytes) with huge pages (madvise MADV_HUGEPAGE). A hint: a kernel
 * without THP, or with THP off, changes nothing; the memory and its bytes
 * are untouched. p may be NULL. */
void fsgd_hugepages_advise(void *p, size_t bytes);

#endif
