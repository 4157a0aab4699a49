/* polyc's stand-in for <stdlib.h> (see stddef.h). */
#ifndef POLYC_STDLIB_H
#define POLYC_STDLIB_H
#include <stddef.h>
void *malloc(size_t size);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t size);
void free(void *p);
int posix_memalign(void **p, size_t alignment, size_t size);
void exit(int status);
void abort(void);
int atoi(const char *s);
long atol(const char *s);
double atof(const char *s);
double strtod(const char *s, char **end);
long strtol(const char *s, char **end, int base);
int abs(int x);
long labs(long x);
int rand(void);
void srand(unsigned seed);
char *getenv(const char *name);
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
#define RAND_MAX 2147483647
#endif
