#error "fsgd/libsvm.h belongs to data/, which this module may not include (the modules and their order: Makefile)"
