#error "fsgd/reduce.h belongs to common/, which this module may not include (the modules and their order: Makefile)"
