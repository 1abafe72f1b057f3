#error "fsgd/job.h belongs to trainer/core/, which this module may not include (the modules and their order: Makefile)"
