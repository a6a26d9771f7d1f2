/* num: strict number parsing and fp16 / fp8 (F143) conversion.
 *
 * The conversions are exact: a float widens to double without loss, scaling
 * by a power of two is exact, and rounding is done by hand on an integer
 * significand, so the result never depends on the FPU rounding mode.
 */
#include "num.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if LLONG_MAX != INT64_MAX || LLONG_MIN != INT64_MIN
#error "parse_i64 assumes long long is int64_t"
#endif

int parse_i64(const char *s, int64_t *out)
{
	const char *p;
	char *end;
	long long v;
	int saved;

	if (!s)
		return -1;
	p = s;
	if (*p == '-')
		p++;
	if (!*p)
		return -1;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	saved = errno;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end) {
		errno = saved;
		return -1;
	}
	errno = saved;
	*out = v;
	return 0;
}

/* The character check keeps strtod away from hex floats, inf, nan and
 * leading spaces. A result that underflows to zero or a subnormal is finite
 * and accepted; one that overflows is rejected. Assumes the "C" numeric
 * locale ('.' as the decimal point). */
int parse_f64(const char *s, double *out)
{
	const char *p;
	char *end;
	double v;
	int saved;

	if (!s || !*s)
		return -1;
	for (p = s; *p; p++)
		if (!strchr("0123456789.eE+-", *p))
			return -1;
	saved = errno;
	v = strtod(s, &end);
	errno = saved;
	if (end == s || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* Round a >= 0 (finite) to a format with p mantissa bits and least normal
 * exponent emin, to nearest even. Returns the magnitude code
 * (biased exponent << p | mantissa); a carry out of the mantissa moves into
 * the exponent, so the largest finite code + 1 means "overflowed". */
static long rne(double a, int p, int emin)
{
	double n, f;
	long k;
	int e;

	if (a == 0)
		return 0;
	frexp(a, &e);
	e--;			/* floor(log2 a) */
	if (e < emin)
		e = emin;	/* subnormal: fixed quantum 2^(emin-p) */
	n = ldexp(a, p - e);	/* exact, in [0, 2^(p+1)) */
	f = floor(n);
	k = (long)f;
	n -= f;			/* exact fraction */
	if (n > 0.5 || (n == 0.5 && (k & 1)))
		k++;
	return ((long)(e - emin) << p) + k;
}

/* fp16. Every NaN encodes to the one quiet NaN 0x7e00 with the sign bit
 * clear (the sign of a NaN carries no meaning here, and one code keeps the
 * output deterministic). Zeros and infinities keep their sign, as IEEE. */
uint16_t f32_to_f16(float x)
{
	uint16_t s;
	long k;

	if (isnan(x))
		return 0x7e00;
	s = signbit(x) ? 0x8000 : 0;
	if (isinf(x))
		return s | 0x7c00;
	k = rne(fabs((double)x), 10, -14);
	if (k > 0x7c00)
		k = 0x7c00;
	return s | (uint16_t)k;
}

/* Every NaN code decodes to a quiet NaN with the code's sign; the payload
 * is not kept. */
float f16_to_f32(uint16_t h)
{
	int e = h >> 10 & 31, m = h & 0x3ff;
	float v;

	if (e == 31)
		v = m ? NAN : INFINITY;
	else if (e)
		v = ldexpf((float)(0x400 | m), e - 25);
	else
		v = ldexpf((float)m, -24);
	return h & 0x8000 ? -v : v;
}

/* fp8 F143 from a non-NaN double: beyond 240 (infinity included)
 * saturates, and anything that rounds to zero is the one zero 0x00. */
static uint8_t enc8(double d)
{
	double a = fabs(d);
	long k;

	k = a > F8_MAX ? 0x7f : rne(a, 3, -7);
	if (k == 0)
		return 0;
	return (uint8_t)(signbit(d) ? k | 0x80 : k);
}

uint8_t f32_to_f8(float x)
{
	if (!isfinite(x))
		return F8_NAN;
	return enc8(x);
}

float f8_to_f32(uint8_t b)
{
	int e = b >> 3 & 15, m = b & 7;
	float v;

	if (b == F8_NAN)
		return NAN;
	if (e)
		v = ldexpf((float)(8 | m), e - 11);
	else
		v = ldexpf((float)m, -10);
	return b & 0x80 ? -v : v;
}

/* Same as f32_to_f8(ldexpf(x, -scale)), except that the scaling is done in
 * double: a finite x never turns into infinity (and so NaN) on the way,
 * it saturates. Scales beyond +-4096 behave as +-4096 (same result). */
uint8_t f32_to_f8s(float x, int scale)
{
	if (!isfinite(x))
		return F8_NAN;
	if (scale > 4096)
		scale = 4096;
	if (scale < -4096)
		scale = -4096;
	return enc8(ldexp((double)x, -scale));
}

float f8s_to_f32(uint8_t b, int scale)
{
	return ldexpf(f8_to_f32(b), scale);
}
