/* polyc's stand-in for <stddef.h>: what pycparser must read of the C library to parse
   a kernel's source (the real headers are full of compiler extensions). */
#ifndef POLYC_STDDEF_H
#define POLYC_STDDEF_H
typedef unsigned long size_t;
typedef long ptrdiff_t;
#define NULL ((void *) 0)
#endif
