#error "fsgd/bus.h belongs to trainer/kafka/, which this module may not include (the modules and their order: Makefile)"
