#error "fsgd/downlink.h belongs to codec/, which this module may not include (the modules and their order: Makefile)"
