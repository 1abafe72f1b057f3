#error "fsgd/backend.h belongs to trainer/backend/, which this module may not include (the modules and their order: Makefile)"
