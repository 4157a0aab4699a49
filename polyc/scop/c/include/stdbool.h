/* polyc's stand-in for <stdbool.h> (see stddef.h). */
#ifndef POLYC_STDBOOL_H
#define POLYC_STDBOOL_H
#define bool _Bool
#define true 1
#define false 0
#endif
