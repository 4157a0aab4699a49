/* polyc's stand-in for <time.h> (see stddef.h). */
#ifndef POLYC_TIME_H
#define POLYC_TIME_H
typedef long time_t;
typedef long clock_t;
struct timespec { time_t tv_sec; long tv_nsec; };
time_t time(time_t *t);
clock_t clock(void);
#define CLOCKS_PER_SEC 1000000l
#endif
