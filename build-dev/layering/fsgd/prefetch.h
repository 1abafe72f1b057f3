#error "fsgd/prefetch.h belongs to common/, which this module may not include (the modules and their order: Makefile)"
