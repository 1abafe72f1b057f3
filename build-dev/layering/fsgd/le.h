#error "fsgd/le.h belongs to common/, which this module may not include (the modules and their order: Makefile)"
