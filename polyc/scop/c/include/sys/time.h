/* polyc's stand-in for <sys/time.h> (see ../stddef.h). */
#ifndef POLYC_SYS_TIME_H
#define POLYC_SYS_TIME_H
#include <time.h>
struct timeval { time_t tv_sec; long tv_usec; };
struct timezone { int tz_minuteswest; int tz_dsttime; };
int gettimeofday(struct timeval *tv, struct timezone *tz);
#endif
