/* numref.h: what the lib/num tests share: brute-force references written
 * from the format definitions (docs/machine.md §3), never from num.c:
 * every fp8 and fp16 code's value from its fields, the nearest code by
 * scanning or bisecting them, and a fixed-seed xorshift. numref_init
 * fills the value tables before any test runs. */
#ifndef AMP_NUMREF_H
#define AMP_NUMREF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static double v8[256];		/* reference fp8 values, by code */
static double v16[0x7c00];	/* reference positive finite fp16 values */

/* fp8 F143 from its fields: bias 8, field 0 subnormal, 0x80 NaN. */
static inline double ref8(unsigned b)
{
	unsigned s = b >> 7, e = b >> 3 & 15, m = b & 7;
	double v;

	if (b == 0x80)
		return NAN;
	v = e ? ldexp(1.0 + m / 8.0, (int)e - 8) : ldexp(m / 8.0, -7);
	return s ? -v : v;
}

/* IEEE binary16 from its fields. */
static inline double ref16(unsigned h)
{
	unsigned s = h >> 15, e = h >> 10 & 31, m = h & 1023;
	double v;

	if (e == 31)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m / 1024.0, -14);
	else
		v = ldexp(1.0 + m / 1024.0, (int)e - 15);
	return s ? -v : v;
}

static inline int same(float a, float b)
{
	return memcmp(&a, &b, sizeof a) == 0;
}

static inline float bitsf(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof x);
	return x;
}

/* Nearest fp8 code by scanning all 255 finite codes; ties go to the even
 * mantissa (low code bit 0). The double distances are exact whenever it
 * matters: for |x| >= 2^-20 the difference spans at most 51 bits, and below
 * that code 0x00 wins by far. */
static inline unsigned near8(float x)
{
	unsigned c, best = 0;
	double d, bd = fabs((double)x);

	if (isnan(x) || isinf(x))
		return 0x80;
	if (x > 240)
		return 0x7f;
	if (x < -240)
		return 0xff;
	for (c = 1; c < 256; c++) {
		if (c == 0x80)
			continue;
		d = fabs((double)x - v8[c]);
		if (d < bd || (d == bd && !(c & 1))) {
			bd = d;
			best = c;
		}
	}
	return best;
}

/* Nearest fp16 code by bisecting the sorted table of positive finite codes
 * and comparing against the exact midpoint; ties to even; >= 65520 is inf. */
static inline unsigned near16(float x)
{
	unsigned s = signbit(x) ? 0x8000 : 0, lo = 0, hi = 0x7bff, mid;
	double a = fabs((double)x), m;

	if (isnan(x))
		return 0x7e00;
	if (a >= 65520)
		return s | 0x7c00;
	while (lo < hi) {	/* largest code with value <= a */
		mid = (lo + hi + 1) / 2;
		if (v16[mid] <= a)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (v16[lo] == a || lo == 0x7bff)
		return s | lo;
	m = (v16[lo] + v16[lo + 1]) / 2;
	if (a < m || (a == m && !(lo & 1)))
		return s | lo;
	return s | (lo + 1);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;

static inline uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 32);
}

/* A float uniform in [-r, r]. */
static inline float unif(double r)
{
	return (float)(rnd() / 4294967296.0 * 2 * r - r);
}

static inline unsigned neg8(unsigned c)
{
	return c ? c | 0x80 : 0;
}

static inline void numref_init(void)
{
	unsigned i;

	for (i = 0; i < 256; i++)
		v8[i] = ref8(i);
	for (i = 0; i < 0x7c00; i++)
		v16[i] = ref16(i);
}

#endif
