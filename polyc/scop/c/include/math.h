/* polyc's stand-in for <math.h> (see stddef.h). */
#ifndef POLYC_MATH_H
#define POLYC_MATH_H
double sqrt(double x); float sqrtf(float x);
double exp(double x); float expf(float x);
double log(double x); float logf(float x);
double pow(double x, double y); float powf(float x, float y);
double fabs(double x); float fabsf(float x);
double floor(double x); float floorf(float x);
double ceil(double x); float ceilf(float x);
double sin(double x); float sinf(float x);
double cos(double x); float cosf(float x);
double tan(double x); float tanf(float x);
double tanh(double x); float tanhf(float x);
double fmax(double x, double y); float fmaxf(float x, float y);
double fmin(double x, double y); float fminf(float x, float y);
double fmod(double x, double y); float fmodf(float x, float y);
#define HUGE_VAL (1e300 * 1e300)
#define INFINITY (1e300f * 1e300f)
#define M_PI 3.14159265358979323846
#endif
