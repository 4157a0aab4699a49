/* polyc's stand-in for <unistd.h> (see stddef.h). */
#ifndef POLYC_UNISTD_H
#define POLYC_UNISTD_H
#include <stddef.h>
int usleep(unsigned usec);
unsigned sleep(unsigned seconds);
long sysconf(int name);
#endif
