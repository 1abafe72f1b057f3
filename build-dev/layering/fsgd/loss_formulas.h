#error "fsgd/loss_formulas.h belongs to trainer/loss/, which this module may not include (the modules and their order: Makefile)"
