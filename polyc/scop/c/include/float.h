/* polyc's stand-in for <float.h> (see stddef.h). */
#ifndef POLYC_FLOAT_H
#define POLYC_FLOAT_H
#define FLT_MAX 3.40282347e+38f
#define DBL_MAX 1.7976931348623157e+308
#define FLT_EPSILON 1.19209290e-07f
#define DBL_EPSILON 2.2204460492503131e-16
#endif
