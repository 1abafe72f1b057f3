#ifndef FSGD_VERSION_H
#define FSGD_VERSION_H
#define FSGD_VERSION "0.1.0"
#endif
