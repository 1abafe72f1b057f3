#error "fsgd/observe.h belongs to trainer/observe/, which this module may not include (the modules and their order: Makefile)"
