#error "fsgd/loss.h belongs to trainer/loss/, which this module may not include (the modules and their order: Makefile)"
