#error "fsgd/strategy.h belongs to strategy/, which this module may not include (the modules and their order: Makefile)"
