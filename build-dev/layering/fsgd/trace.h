#error "fsgd/trace.h belongs to trainer/distributed/, which this module may not include (the modules and their order: Makefile)"
