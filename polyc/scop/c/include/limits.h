/* polyc's stand-in for <limits.h> (see stddef.h). */
#ifndef POLYC_LIMITS_H
#define POLYC_LIMITS_H
#define INT_MAX 2147483647
#define INT_MIN (-INT_MAX - 1)
#define CHAR_BIT 8
#endif
