/* polyc's stand-in for <stdio.h> (see stddef.h). */
#ifndef POLYC_STDIO_H
#define POLYC_STDIO_H
#include <stddef.h>
typedef struct polyc_file FILE;
extern FILE *stdin, *stdout, *stderr;
int printf(const char *format, ...);
int fprintf(FILE *stream, const char *format, ...);
int sprintf(char *s, const char *format, ...);
int snprintf(char *s, size_t n, const char *format, ...);
int fflush(FILE *stream);
int puts(const char *s);
int putchar(int c);
FILE *fopen(const char *path, const char *mode);
int fclose(FILE *stream);
int scanf(const char *format, ...);
int fscanf(FILE *stream, const char *format, ...);
#define EOF (-1)
#endif
